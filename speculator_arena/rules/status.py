"""The statuses an evaluation and a submission go through, and an evaluation's current row: the
one vocabulary every package reads.

An evaluation (its `evaluations` row): queued -> running -> measured | void | failed:
- measured: every pass and probe ran; the scorer decides the score (0 when a gate fails);
- failed: the candidate did not start or died (protocol section 7: it scores 0);
- void: the arena's side failed (stock engine, device not idle, host contended, runner died):
  refunded, never ranked.
FINAL are the statuses after which the runner writes nothing more; RANKED those that carry a
score on the board (SCORING.md "Ranking": void is refunded, queued and running wait);
UNFINISHED those that wait.

A submission (its front-door row's `intake_status`, frontdoor/sql/schema.sql): fetching ->
accepted | refused, or accepted at once when nothing is left to fetch. Only an accepted
submission has an evaluation; what a submission reports (`GET /api/submissions/<id>`, `arena
submit`) is its intake state until it is accepted, then its evaluation's status, so
SUBMISSION_FINAL is FINAL and refused.

Both are str-valued enums: a member is the very string stored in Parquet, DuckDB and SQLite and
sent as JSON, so comparing a stored value with a member, or writing a member, changes nothing
(tests/test_vocabulary.py). SQL files state the same strings as literals.

An evaluation's `evaluations` table normally holds one row (the runner rewrites its one part);
a warehouse with several (a copy landed beside the original, an old layout) reads the row with
the latest `updated_at`, the later row on a tie: `current`, for dicts, and `current_frame`, for
frames, state that one rule.
"""

from __future__ import annotations

from enum import StrEnum


class Status(StrEnum):
    """An evaluation's status, as its `evaluations` row stores it."""

    QUEUED = "queued"
    RUNNING = "running"
    MEASURED = "measured"
    VOID = "void"
    FAILED = "failed"


class IntakeState(StrEnum):
    """A submission's intake state, as its front-door row's `intake_status` stores it."""

    FETCHING = "fetching"
    ACCEPTED = "accepted"
    REFUSED = "refused"


QUEUED, RUNNING, MEASURED, VOID, FAILED = Status.QUEUED, Status.RUNNING, Status.MEASURED, Status.VOID, Status.FAILED
STATUSES = tuple(Status)
FINAL = (MEASURED, VOID, FAILED)
RANKED = (MEASURED, FAILED)
UNFINISHED = (QUEUED, RUNNING)
FETCHING, ACCEPTED, REFUSED = IntakeState.FETCHING, IntakeState.ACCEPTED, IntakeState.REFUSED
SUBMISSION_FINAL = (*FINAL, REFUSED)


def check(status: str) -> str:
    """`status` as the plain string a row stores; a ValueError for a word that is no status."""
    if status not in STATUSES:
        raise ValueError(f"unknown status {status!r}; statuses: {tuple(s.value for s in Status)}")
    return Status(status).value


def _stamp(row) -> float:
    u = row.get("updated_at")
    return float(u) if u is not None and u == u else 0.0


def current(rows) -> dict | None:
    """The current row of one evaluation's rows (dicts), or None when there is none."""
    best = None
    for r in rows:
        if best is None or _stamp(r) >= _stamp(best):
            best = r
    return best


def current_frame(df):
    """One row per evaluation_id of a pandas frame of `evaluations` rows: its current row, in the
    frame's own order of first appearance (a stable sort keeps the later row on equal stamps)."""
    if df.empty:
        return df
    order = df.assign(_stamp=df["updated_at"].astype(float).fillna(0.0)).sort_values("_stamp", kind="stable")
    last = order.drop_duplicates("evaluation_id", keep="last").drop(columns="_stamp")
    first_seen = df.drop_duplicates("evaluation_id")["evaluation_id"]
    return last.set_index("evaluation_id").loc[first_seen].reset_index()[df.columns]
