"""Run a calibration's evaluations, reusing those already stored (idempotent by evaluation id).

Why by id: a calibration is a dozen evaluations (hours on a GPU); an operator who resumes after
an interruption must not pay for the finished ones again. A planned run whose evaluation is
stored and measured is reused; one that ended void (the arena's side failed: a contended host,
a device that did not fall idle) is run again under `<id>-r<k>`, at most `retries` times; one
whose runner died is finished as void first (`arena evaluate --resume`'s bookkeeping).
Calibration runs are ordinary evaluations, under the account `arena-calibration`.
"""

from __future__ import annotations

from collections.abc import Callable

from speculator_arena.calibration.plan import Plan, PlannedRun
from speculator_arena.rules.accounts import CALIBRATION_ACCOUNT
from speculator_arena.rules.status import RANKED, RUNNING, VOID
from speculator_arena.warehouse import Warehouse


def _stored_status(wh: Warehouse, evaluation_id: str) -> str | None:
    from speculator_arena.warehouse.evaluations import current_row

    row = current_row(wh, evaluation_id)
    return None if row is None else row["status"]


def attempt_ids(base_id: str, retries: int) -> list[str]:
    return [base_id] + [f"{base_id}-r{k}" for k in range(1, retries + 1)]


def resolve(wh: Warehouse, plan: Plan, retries: int = 2, adopt: dict[str, str] | None = None) -> dict[str, str | None]:
    """Per planned run, the stored evaluation that stands for it: its first measured or failed
    attempt, the one `run_plan` stops at (None when none is stored yet). `adopt` maps run names
    to evaluation ids stored outside the plan's naming (e.g. the attack tests' runs), which are
    used as they are."""
    out: dict[str, str | None] = {}
    for run in plan.runs:
        if adopt and run.name in adopt:
            out[run.name] = adopt[run.name]
            continue
        attempts = attempt_ids(run.evaluation_id(plan.task_id, plan.candidate_version), retries)
        out[run.name] = next((eid for eid in attempts if _stored_status(wh, eid) in RANKED), None)
    return out


def _next(wh: Warehouse, base_id: str, retries: int) -> tuple[str, str | None]:
    """Where a planned run stands among its attempts: ("done", id) at its first measured or failed
    attempt, ("run", id) for the attempt to run next (not stored, or queued and never started:
    the runner takes its queued row), ("started", id) for an attempt whose row says running (in
    flight, or its runner died), ("exhausted", None) when every attempt ended void."""
    for eid in attempt_ids(base_id, retries):
        status = _stored_status(wh, eid)
        if status in RANKED:
            return "done", eid
        if status == VOID:
            continue
        return ("started", eid) if status == RUNNING else ("run", eid)
    return "exhausted", None


def _run_one(
    wh: Warehouse, plan: Plan, run: PlannedRun, target: str | None, retries: int, say: Callable[[str], None], runner
) -> str | None:
    from speculator_arena.runners.status import EvaluationStateError

    while True:
        state, eid = _next(wh, run.evaluation_id(plan.task_id, plan.candidate_version), retries)
        if state == "done":
            say(f"{run.name}: reusing stored {eid} ({_stored_status(wh, eid)})")
            return eid
        if state == "exhausted":
            say(f"{run.name}: no measured attempt in {retries + 1} tries; it is left out and the evidence says so")
            return None
        if state == "started":  # its row says running: its runner died (or runs elsewhere: then this is an error)
            from speculator_arena.runners.harness import resume_dead

            try:
                resume_dead(wh, eid, progress=say)
            except EvaluationStateError as exc:
                raise RuntimeError(f"calibration run {eid} is running elsewhere: {exc}") from exc
            continue
        say(f"{run.name}: running {eid} ({run.role}, engine {run.engine})")
        status = runner(_spec(plan, run, eid, target), wh, say)
        if status not in RANKED:
            say(f"{run.name}: {eid} ended {status}")


def next_attempts(
    wh: Warehouse, plan: Plan, target: str | None, retries: int = 2, adopt: dict[str, str] | None = None
) -> tuple[list, bool]:
    """(the specs of the planned runs' next attempts, whether any attempt's row says running):
    what a queued calibration asks the queue for (assets/calibration.py `calibration_queue`), one
    attempt per run at a time, the next only after the last one ended void."""
    specs, pending = [], False
    for run in plan.runs:
        if adopt and run.name in adopt:
            continue
        state, eid = _next(wh, run.evaluation_id(plan.task_id, plan.candidate_version), retries)
        if state == "run":
            specs.append(_spec(plan, run, eid, target))
        pending |= state == "started"
    return specs, pending


def _spec(plan: Plan, run: PlannedRun, evaluation_id: str, target: str | None):
    from speculator_arena.runners.spec import calibration_spec

    return calibration_spec(
        task_id=plan.task_id,
        engine=run.engine,
        evaluation_id=evaluation_id,
        label=f"calibration v{plan.candidate_version}: {run.name}",
        account_id=CALIBRATION_ACCOUNT,
        solution_kind=run.solution_kind,
        target=target,
        protocol_version=plan.base_version,
    )


def run_plan(
    wh: Warehouse,
    plan: Plan,
    target: str | None = None,
    retries: int = 2,
    progress: Callable[[str], None] | None = None,
    *,
    runner: Callable,
    adopt: dict[str, str] | None = None,
) -> dict[str, str | None]:
    """Run every planned evaluation not stored yet; return run name -> evaluation id (None: none measured).

    `runner(spec, warehouse, say) -> status` runs one evaluation: the calibration's launcher
    passes the arena's one door (dagster_project/launch.evaluate), so every calibration run is an
    `evaluation` partition like any other, on the backend `arena calibrate` names."""
    say = progress or (lambda m: None)
    out: dict[str, str | None] = {}
    for i, run in enumerate(plan.runs, 1):
        if adopt and run.name in adopt:
            say(f"[calibrate {plan.task_id}] run {i}/{len(plan.runs)} {run.name}: adopting stored {adopt[run.name]}")
            out[run.name] = adopt[run.name]
            continue

        def tagged(msg: str, i=i) -> None:
            say(f"[calibrate {plan.task_id}] run {i}/{len(plan.runs)} {msg}")

        out[run.name] = _run_one(wh, plan, run, target, retries, tagged, runner)
    return out
