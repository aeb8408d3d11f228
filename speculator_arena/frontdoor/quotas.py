"""Quota use (protocol section 8), derived rather than counted.

An account's use for a task and split is its submissions minus those whose evaluation ended
void (the arena's fault: refunded), by the runner's status or by the scorer's outcome, and
minus those whose fetch was refused (`fetching` ones count: they may still run). It is read
from the submissions table, the warehouse's `evaluations` rows and the outcomes every scoring
writes (scoring/outcomes.py) each time, so there is no second counter that could drift from
what happened; a refused submission never reaches the table (or, refused by the fetch worker,
is marked so) and so uses nothing. Called inside the intake's `BEGIN IMMEDIATE` transaction,
the count and the insert are one atomic step, so it reads files and never runs the scorer: a
measured evaluation counts until a scoring has found it void (the `evaluation` asset scores the
evaluation it ran as it ends).

Each arena's tasks count under that arena's quotas: a LowBArena task under its protocol's
(`protocol/lowb_versions/`), a speculator task under the speculator protocol's, so that a
change of either arena's rules changes only its own limits. Use is counted the same way in
both: per account, task and split.
"""

from __future__ import annotations

import sqlite3

from speculator_arena.frontdoor.state import sql
from speculator_arena.protocol import load_protocol
from speculator_arena.protocol.lowb import is_lowb_task, load_lowb_protocol
from speculator_arena.rules.status import ACCEPTED, FETCHING, MEASURED, VOID
from speculator_arena.warehouse.evaluations import status_of


def limit(kind: str, split: str, version: int | None = None, task_id: str | None = None) -> int:
    """An account kind's evaluations per task and split, from the task's arena's protocol."""
    if task_id is not None and is_lowb_task(task_id):
        return lowb_limit(kind, split, version)
    return load_protocol(version).quota(kind, split)


def lowb_limit(kind: str, split: str, version: int | None = None) -> int:
    """LowBArena's quota; an account kind its protocol gives none to (a study agent) has 0."""
    quotas = load_lowb_protocol(version).quotas
    return int(quotas[kind][split]) if kind in quotas else 0


def scorer_voided(wh, evaluation_ids: list[str]) -> set[str]:
    """Of these `measured` evaluations, those whose last scoring ended void (SCORING.md "Outcomes":
    the stock engine without tokens on a pass, a gate not measured for the arena's reasons, host
    contention the runner did not stop on): void is refunded whoever found it."""
    from speculator_arena.scoring import outcomes
    from speculator_arena.scoring.registry import scores_root

    return outcomes.voided(scores_root(wh), evaluation_ids)


def used(con: sqlite3.Connection, wh, account_id: str, task_id: str, split: str) -> int:
    rows = con.execute(sql("quota_submissions"), (account_id, task_id, split)).fetchall()
    fetching = sum(r["intake_status"] == FETCHING for r in rows)  # no evaluation yet: counted as they are
    ids = [r["evaluation_id"] for r in rows if r["intake_status"] == ACCEPTED]
    status = {eid: status_of(wh, eid) for eid in ids}
    voided = scorer_voided(wh, [eid for eid, s in status.items() if s == MEASURED])
    return fetching + sum(s != VOID and eid not in voided for eid, s in status.items())


def summary(con: sqlite3.Connection, wh, account_id: str, kind: str, task_id: str, split: str) -> dict:
    n, cap = used(con, wh, account_id, task_id, split), limit(kind, split, task_id=task_id)
    return {"task_id": task_id, "split": split, "used": n, "limit": cap, "left": max(cap - n, 0)}
