"""An evaluation's current row and status, read from the warehouse's `evaluations` table with the
one rule of rules/status.py (the latest `updated_at`). What the runner, the queue, the quota and
the calibration read to learn where an evaluation stands; an evaluation with no row yet is
`queued` (its runner has not written it).
"""

from __future__ import annotations

from speculator_arena.rules import status as S
from speculator_arena.warehouse.store import Warehouse


def current_row(wh: Warehouse, evaluation_id: str) -> dict | None:
    """The evaluation's current row, or None when none is stored."""
    t = wh.read_table("evaluations", evaluation_id)
    return S.current(t.to_pylist()) if t.num_rows else None


def status_of(wh: Warehouse, evaluation_id: str) -> str:
    """The evaluation's status; `queued` until its runner wrote its row."""
    row = current_row(wh, evaluation_id)
    return row["status"] if row else S.QUEUED


def statuses(wh: Warehouse) -> dict[str, str]:
    """Every stored evaluation's status, read in one pass (the queue's view of the warehouse)."""
    if not (wh.raw / "evaluations").is_dir():
        return {}
    by: dict[str, list[dict]] = {}
    for r in wh.read_table("evaluations").select(["evaluation_id", "status", "updated_at"]).to_pylist():
        by.setdefault(r["evaluation_id"], []).append(r)
    return {eid: S.current(rows)["status"] for eid, rows in by.items()}
