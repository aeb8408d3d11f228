"""The public ranking as JSON (`GET /api/board`): the board's own rows (scoring.board), each with
its shared `rank`, `tie` (another entry shares the rank), `interval_low` and `interval_high`
(its SpecScore's 95% interval), and the board's `noise` (the calibrated max A/A error the
intervals are widened by, or not calibrated, and the A/A reference's flag)."""

from __future__ import annotations

import math

import pandas as pd


def _clean(v):
    """A board cell as plain JSON (NaN, NA and NaT as null; numpy scalars as Python ones)."""
    if v is None or v is pd.NA or v is pd.NaT:
        return None
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


def board_json(wh, task_id: str, split: str) -> dict:
    from speculator_arena.protocol import load_protocol
    from speculator_arena.protocol.model import protocol_digest
    from speculator_arena.scoring import score_warehouse
    from speculator_arena.scoring.board import COLUMNS, board_noise, board_rows

    version = load_protocol().version
    frame = pd.DataFrame(columns=COLUMNS)
    if (wh.home / "raw" / "evaluations").is_dir():
        scores = score_warehouse(wh, protocol_version=version)
        frame = board_rows(scores, task_id, split)
    rows = [{c: _clean(r[c]) for c in COLUMNS} for _, r in frame.iterrows()]
    noise = {k: _clean(v) for k, v in board_noise(version, task_id, frame).items()}
    return {"task_id": task_id, "split": split, "protocol_version": version, "protocol_digest": protocol_digest(version),
            "noise": noise,
            "participants": [r for r in rows if r["section"] == "participants"],
            "references": [r for r in rows if r["section"] == "references"]}
