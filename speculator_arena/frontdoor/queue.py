"""The queue: accepted submissions waiting for, in, or past their evaluation.

A committed submission row is a queued evaluation (its evaluation id is fixed at intake). The
Dagster sensor `submission_queue` (speculator_arena/assets/submissions.py) starts the oldest one
that has no run yet, one at a time per device, as a run of the `evaluation` asset's partition.
What the participant sees is the warehouse's status of that evaluation (queued until the
runner writes its row, then running, measured, failed or void) and the runner's phase; before
that, a submission naming a repository or a hub speculator is `fetching` (the fetch worker has
it), and `refused` with the reason if the fetch failed (nothing runs; its quota is refunded).
"""

from __future__ import annotations

from speculator_arena import settings
from speculator_arena.errors import ArenaError
from speculator_arena.frontdoor.state import sql
from speculator_arena.rules.devices import devices_problem, parse_devices
from speculator_arena.rules.status import ACCEPTED, FETCHING, QUEUED
from speculator_arena.warehouse.evaluations import statuses as evaluation_statuses

SUBMISSION_TAG = "arena/submission"


class DeviceSettingError(ValueError, ArenaError):
    """`ARENA_DEVICE` names devices the queue cannot use as given (rules/devices.py says why)."""


def device_names() -> list[str]:
    """The devices the queue runs evaluations on (`ARENA_DEVICE`, comma-separated), one evaluation
    at a time on each; several only on the kubernetes backend, each a GPU node."""
    names = parse_devices(settings.get("ARENA_DEVICE"))
    why = devices_problem(names, settings.get("ARENA_BACKEND") or "local")
    if why:
        raise DeviceSettingError(why)
    return names


def device_name() -> str:
    """The device an evaluation started outside the queue (`arena evaluate`, `arena demo`, a
    calibration) is tagged with and, on the kubernetes backend, pinned to: the first one."""
    return device_names()[0]


def waiting(con, wh) -> list[dict]:
    """Accepted (sealed whole) submissions whose evaluation has not started (oldest first)."""
    statuses = evaluation_statuses(wh)
    return [
        dict(r) for r in con.execute(sql("queued_submissions")) if statuses.get(r["evaluation_id"], QUEUED) == QUEUED
    ]


def evaluation_spec(sub: dict, account_name: str):
    """The evaluation a submission asks for, as the harness runs it (the runner's builder of
    a submission's spec, given the row's fields)."""
    from speculator_arena.runners.spec import submission_spec

    return submission_spec(
        task_id=sub["task_id"],
        engine_dir=sub["engine_dir"],
        split=sub["split"],
        evaluation_id=sub["evaluation_id"],
        account_name=account_name,
        account_id=sub["account_id"],
        submission_id=sub["submission_id"],
        solution_kind=sub["solution_kind"],
        speculator_dir=sub["speculator_dir"],
        artifact_dir=sub.get("artifact_dir"),
    )


def board_url(evaluation_id: str) -> str:
    base = (settings.get("ARENA_BOARD_URL") or "").rstrip("/")
    return f"{base}/evaluation?evaluation={evaluation_id}"


def _intake_progress(row) -> str | None:
    if row["intake_status"] == FETCHING:
        return "fetching what it names" + (
            " (the fetch worker has it)" if row["fetch_owner"] else " (waiting for a fetch slot)"
        )
    return None


def submission_status(con, wh, submission_id: str, account_id: str) -> dict | None:
    """What the owner sees of a submission: status, the runner's phase, the evaluation's link."""
    from speculator_arena.runners.status import read_state
    from speculator_arena.warehouse.evaluations import current_row

    row = con.execute(sql("owned_submission"), (submission_id, account_id)).fetchone()
    if row is None:
        return None
    eid = row["evaluation_id"]
    intake = row["intake_status"]
    ev = (current_row(wh, eid) or {}) if intake == ACCEPTED else {}
    state = (read_state(wh, eid) or {}) if intake == ACCEPTED else {}
    out = {
        "submission_id": submission_id,
        "evaluation_id": eid,
        "task_id": row["task_id"],
        "split": row["split"],
        "status": ev.get("status", QUEUED) if intake == ACCEPTED else intake,
        "progress": state.get("phase") if intake == ACCEPTED else _intake_progress(row),
        "void_reason": ev.get("void_reason"),
        "failure_reason": ev.get("failure_reason"),
        "accepted_at": row["accepted_at"],
        "engine_digest": row["engine_digest"] or None,
        "speculator_digest": row["speculator_digest"],
        "artifact_digest": row["artifact_digest"],
        "evaluation_url": board_url(eid),
        "position": None,
        "refusal": row["intake_reason"],
        "refusal_status": row["intake_code"],
    }
    if out["status"] == QUEUED:
        ids = [w["submission_id"] for w in waiting(con, wh)]
        out["position"] = ids.index(submission_id) + 1 if submission_id in ids else None
    return out
