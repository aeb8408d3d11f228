"""The public ranking as JSON (`GET /api/board`): the board's own rows (board/ranking.py), each with
its shared `rank`, `tie` (another entry shares the rank), `interval_low` and `interval_high`
(its SpecScore's 95% interval), `regression` and `previous_evaluation_id` (its SpecScore lies
below the entry's previous scored evaluation's `interval_low`, and which that was: board/history.py;
null where the memo does not hold the previous one), and the board's `noise` (the calibrated max
A/A error the intervals are widened by, or not calibrated, and the A/A reference's flag)."""

from __future__ import annotations

import pandas as pd


def board_json(memo, task_id: str, split: str) -> dict:
    """`memo`: the API's BoardMemo (board/memo.py) of its ARENA_HOME, the board every
    board reads, which re-scores only evaluations that changed since the last request."""
    from speculator_arena.board.history import FLAG_COLUMNS
    from speculator_arena.board.ranking import COLUMNS, board_noise
    from speculator_arena.printing import json_cell
    from speculator_arena.protocol import load_protocol
    from speculator_arena.protocol.version_files import protocol_digest

    version = load_protocol().version
    frame = memo.board(task_id, version).boards.get(split)
    if frame is None or frame.empty:
        frame = pd.DataFrame(columns=COLUMNS)
    columns = COLUMNS + [c for c in FLAG_COLUMNS if c not in COLUMNS]
    for c in FLAG_COLUMNS:
        if c not in frame.columns:
            frame = frame.assign(**{c: None})
    rows = [{c: json_cell(r[c]) for c in columns} for _, r in frame.iterrows()]
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


def history_json(memo, task_id: str, split: str, account: str | None = None, label: str | None = None) -> dict:
    """`GET /api/history`: one entry's history (board/history.py) under the version in force, each
    point with its acceptance spread across passes, and the spread across its evaluations
    (board/spread.py). Public figures only: scores, intervals, engine names and digests."""
    from speculator_arena.board.history import entry_history
    from speculator_arena.board.spread import evaluation_spread, with_pass_spread
    from speculator_arena.printing import json_cell
    from speculator_arena.protocol import load_protocol

    h = entry_history(memo, task_id, split, account=account, label=label, protocol_version=load_protocol().version)
    rows = with_pass_spread(memo.wh.home, h.rows)
    return {
        "task_id": task_id,
        "split": split,
        "account_id": account,
        "label": label,
        "protocol_version": h.protocol_version,
        "points": [{c: json_cell(v) for c, v in r.items()} for r in rows.to_dict("records")],
        "acceptance_spread": {k: json_cell(v) for k, v in evaluation_spread(h.rows).items()},
    }
