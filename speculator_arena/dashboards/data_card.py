"""Find and read a task's public data card, and nothing else of a pool.

The pools domain writes each task's card as `<task>.md` (for people), `<task>.json`
(statistics) and `<task>.png` (its structure plot) under `$ARENA_HOME/pools/<task>/data_card/`,
and optionally into the repository's `data_cards/`. Only those files are read: the hidden test
pool lives under `pools/<task>/hidden/`, which this module never lists or opens, and no pool
text is read.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from speculator_arena.warehouse.store import arena_home

REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class DataCard:
    task_id: str
    markdown: str | None
    stats: dict[str, Any] | None
    plot: Path | None
    source: Path


def card_locations(task_id: str, home: str | os.PathLike | None = None) -> list[Path]:
    """Where a task's card may be, most specific first (the pools build, then the repo's copy)."""
    h = arena_home(home)
    return [h / "pools" / task_id / "data_card" / task_id, REPO_ROOT / "data_cards" / task_id]


def load_data_card(task_id: str, home: str | os.PathLike | None = None) -> DataCard | None:
    """The first location holding `<stem>.md` or `<stem>.json`; None when the card is not built."""
    if "/" in task_id or "\\" in task_id or task_id in ("", ".", "..") or "hidden" in task_id:
        raise ValueError(f"not a task id: {task_id!r}")
    for stem in card_locations(task_id, home):
        md, js = stem.with_suffix(".md"), stem.with_suffix(".json")
        if md.is_file() or js.is_file():
            markdown = md.read_text(encoding="utf-8") if md.is_file() else None
            stats = json.loads(js.read_text(encoding="utf-8")) if js.is_file() else None
            png = stem.with_suffix(".png")
            return DataCard(task_id, markdown, stats, png if png.is_file() else None, stem)
    return None
