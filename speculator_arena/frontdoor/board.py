"""The public ranking as JSON (`GET /api/board`): the board's own rows (scoring.board)."""

from __future__ import annotations

import math


def _clean(v):
    if v is None:
        return None
    try:
        import pandas as pd

        if v is pd.NA or v is pd.NaT:
            return None
    except ImportError:
        pass
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


def board_json(wh, task_id: str, split: str) -> dict:
    from speculator_arena.scoring import score_warehouse
    from speculator_arena.scoring.board import COLUMNS, board_rows

    from speculator_arena.protocol import load_protocol

    version = load_protocol().version
    if not (wh.home / "raw" / "evaluations").is_dir():
        rows = []
        digest = None
    else:
        scores = score_warehouse(wh, protocol_version=version)
        digest = scores.protocol_digest
        frame = board_rows(scores, task_id, split)
        rows = [{c: _clean(r[c]) for c in COLUMNS} for _, r in frame.iterrows()]
    return {"task_id": task_id, "split": split, "protocol_version": version, "protocol_digest": digest,
            "participants": [r for r in rows if r["section"] == "participants"],
            "references": [r for r in rows if r["section"] == "references"]}
