"""LowBArena's protocol data, as this package reads it: one small function per question.

Why a reader of its own for now: the typed loader (`protocol/lowb.py`) is being written beside
this package; until it lands the pools read the shipped YAML directly, here and only here, so the
swap is one module.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

import yaml

from speculator_arena.errors import ArenaError

VERSIONS = Path(__file__).resolve().parents[2] / "protocol" / "lowb_versions"


class UnknownLowbTask(KeyError, ArenaError):
    """A task id that no LowBArena protocol version declares."""


@lru_cache(maxsize=4)
def _document(version: int | None = None) -> dict:
    files = {int(m.group(1)): p for p in VERSIONS.glob("p*.yaml") if (m := re.fullmatch(r"p(\d+)\.yaml", p.name))}
    chosen = files[version if version is not None else max(files)]
    with open(chosen, encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def lowb_task(task_id: str) -> dict:
    """The task's protocol entry (workloads, items, kl_probe, ...)."""
    tasks = _document()["tasks"]
    if task_id not in tasks:
        raise UnknownLowbTask(f"no LowBArena task {task_id!r}; tasks: {sorted(tasks)}")
    return tasks[task_id]


def lowb_domains() -> dict[str, dict]:
    """domain -> {benchmarks: [...], gated: bool}."""
    return _document()["domains"]


def protocol_version() -> int:
    return int(_document()["version"])
