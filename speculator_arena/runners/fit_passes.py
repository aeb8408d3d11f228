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
never ranked); its requests are the fit's evidence: `run_fit` returns the void reason, which
the harness records.
"""

from __future__ import annotations

import asyncio
import time

from speculator_arena.runners.engines import Engines
from speculator_arena.runners.failures import EngineFailure
from speculator_arena.runners.fit_plan import pass_id
from speculator_arena.runners.passes import TimedPasses, sessions_per_pass
from speculator_arena.runners.run_context import RunContext
from speculator_arena.runners.spec import resolve_engine_path
from speculator_arena.runners.workload import record_rows, run_lanes

FIT_VOID_REASON = (
    "calibration m/c fit: short stock passes, not a paired evaluation (its requests are the fit's evidence)"
)


def run_fit(ctx: RunContext, engines: Engines, passes: TimedPasses) -> str:
    """Serve the plan of `ctx.spec.fit` (the run's inputs loaded): the stock engine started once,
    one pass per point. Returns the void reason: the fit's, or why it stopped."""
    plan, t = ctx.spec.fit, ctx.task
    workload, seconds = plan["workload"], plan["seconds"]
    ctx.set_phase("m/c fit")
    try:
        er = engines.start(
            "stock",
            resolve_engine_path(ctx.spec.engine),
            "calibration fit",
            t.engine_environment.gpu_memory_utilization,
        )
    except EngineFailure as exc:
        return exc.reason
    died = None
    try:
        cfg = passes.client_config("stock", er)
        lanes = t.lanes[workload]
        start, end = ctx.pool.blocks()[(workload, 0)]
        for k, (m, c) in enumerate(plan["points"], 1):
            pid = pass_id(m, c)
            cfg.think_scale = c
            n = min(sessions_per_pass(lanes, m, seconds), end - start)
            sessions = ctx.pool.passes(f"{ctx.eid}-{pid}", workload, 0, n)
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
                    evaluation_id=ctx.eid,
                    engine="stock",
                    pass_id=pid,
                    workload=workload,
                    pass_index=0,
                    tokenizer=ctx.tokenizer,
                )[0]
                for r in records
            ]
            if rows:
                ctx.write("requests", rows)
            ctx.say(f"fit point {k}/{len(plan['points'])} m {m} c {c:g}: {len(rows)} requests")
            if not er.alive():
                died = f"the stock engine died during the m/c fit (at point m {m} c {c:g})"
                break
    finally:
        engines.stop(er, record=True)  # its start row: the engine, its user, the device idle after
    return died or FIT_VOID_REASON
