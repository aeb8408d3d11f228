"""The public ranking as JSON (`GET /api/board`): the board's own rows (board/ranking.py), each with
its shared `rank`, `tie` (another entry shares the rank), `interval_low` and `interval_high`
(its SpecScore's 95% interval), and the board's `noise` (the calibrated max A/A error the
intervals are widened by, or not calibrated, and the A/A reference's flag)."""

from __future__ import annotations

import pandas as pd


def board_json(memo, task_id: str, split: str) -> dict:
    """`memo`: the API's BoardMemo (board/memo.py) of its ARENA_HOME, the board every
    board reads, which re-scores only evaluations that changed since the last request."""
    from speculator_arena.board.ranking import COLUMNS, board_noise
    from speculator_arena.printing import json_cell
    from speculator_arena.protocol import load_protocol
    from speculator_arena.protocol.version_files import protocol_digest

    version = load_protocol().version
    frame = memo.board(task_id, version).boards.get(split)
    if frame is None or frame.empty:
        frame = pd.DataFrame(columns=COLUMNS)
    rows = [{c: json_cell(r[c]) for c in COLUMNS} for _, r in frame.iterrows()]
    noise = {k: json_cell(v) for k, v in board_noise(version, task_id, frame).items()}
    return {
        "task_id": task_id,
        "split": split,
        "protocol_version": version,
        "protocol_digest": protocol_digest(version),
        "noise": noise,
        "participants": [r for r in rows if r["section"] == "participants"],
        "references": [r for r in rows if r["section"] == "references"],
    }
