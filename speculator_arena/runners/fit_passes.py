"""The m/c fit's short stock passes (SCORING.md "Calibration") as a run of the runner: what an
`EvaluationSpec` with a `fit` plan runs instead of the paired passes.

Why in the runner and not in calibration/: the passes are served by the stock engine on the
evaluated machine, so they must go where every evaluation goes: through the one door (the
`evaluation` asset, its device tag and its backend: this process, or a pod whose runner runs
the same `Evaluation`). The calibration only plans them (the grid points, the pass length) and
reads the rows they leave (calibration/fit.py).

The stock engine is started once; each grid point (m, c) is one short pass of the plan's
workload with fresh salted sessions, pass id `fit-m<m>-c<c>`, its request rows written as it
ends. The evaluation ends void (short stock passes, not a paired evaluation: never scored,
never ranked); its requests are the fit's evidence.
"""

from __future__ import annotations

import asyncio
import time

from speculator_arena.rules.status import VOID
from speculator_arena.runners.failures import EngineFailure
from speculator_arena.runners.fit_plan import pass_id
from speculator_arena.runners.spec import resolve_engine_path

FIT_VOID_REASON = (
    "calibration m/c fit: short stock passes, not a paired evaluation (its requests are the fit's evidence)"
)


def run_fit(ev) -> str:
    """Serve the plan of `ev.spec.fit` on `ev` (a `runners.harness.Evaluation`, running, its
    inputs loaded): the stock engine started once, one pass per point. Returns the final status
    (void: the fit's reason, or why it stopped)."""
    from speculator_arena.runners.passes import sessions_per_pass
    from speculator_arena.runners.workload import record_rows, run_lanes

    plan, t = ev.spec.fit, ev.task
    workload, seconds = plan["workload"], plan["seconds"]
    ev.set_phase("m/c fit")
    try:
        er = ev.start_engine(
            "stock", resolve_engine_path(ev.spec.engine), "calibration fit", t.engine_environment.gpu_memory_utilization
        )
    except EngineFailure as exc:
        return ev.finish(VOID, void_reason=exc.reason)
    died = None
    try:
        cfg = ev.client_config("stock", er)
        lanes = t.lanes[workload]
        start, end = ev.pool.blocks()[(workload, 0)]
        for k, (m, c) in enumerate(plan["points"], 1):
            pid = pass_id(m, c)
            cfg.think_scale = c
            n = min(sessions_per_pass(lanes, m, seconds), end - start)
            sessions = ev.pool.passes(f"{ev.eid}-{pid}", workload, 0, n)
            now = time.time()
            records = asyncio.run(
                run_lanes(
                    cfg,
                    sessions,
                    lanes,
                    m,
                    pid,
                    now + seconds,
                    now + seconds + t.grace_seconds,
                    stop_check=lambda: not er.alive(),
                )
            )
            rows = [
                record_rows(
                    r,
                    evaluation_id=ev.eid,
                    engine="stock",
                    pass_id=pid,
                    workload=workload,
                    pass_index=0,
                    tokenizer=ev.tokenizer,
                )[0]
                for r in records
            ]
            if rows:
                ev.write("requests", rows)
            ev.say(f"fit point {k}/{len(plan['points'])} m {m} c {c:g}: {len(rows)} requests")
            if not er.alive():
                died = f"the stock engine died during the m/c fit (at point m {m} c {c:g})"
                break
    finally:
        ev.stop_engine(er, record=True)  # its start row: the engine, its user, the device idle after
    return ev.finish(VOID, void_reason=died or FIT_VOID_REASON)
