"""The `m`/`c` fit of SCORING.md "Calibration": short stock passes over a grid of interleave `m`
(live sessions per lane) and think-time scale `c`, the pair whose cache statistics come closest
to the data card's targets.

Each grid point is one short pass of the `busy` workload (its lanes are the ones that fill the
stock engine's KV cache, section 4) served by the stock engine, started once for the whole grid,
with fresh salted sessions per point. Its requests are stored as raw rows of the evaluation
`cal-<task>-v<N>-fit` (pass ids `fit-m<m>-c<c>`), so that a fit interrupted half-way runs only
the missing points when started again, and the achieved values are recomputed from the rows.

The statistics, from the requests that ended with `[DONE]`:
- token-weighted cache hit: sum cached / sum prompt tokens (`usage`);
- per-request cache hit: the mean of cached / prompt over the requests;
- returning-session cached share: over every turn after a session's first, the share of the
  session's history (its previous prompt plus its previous reply) found cached,
  sum min(cached, history) / sum history.
Targets: the data card's `target_cache_hit_token_weighted` (also the per-request target: the
card states no separate one) and `returning_session_history_cached_target`.
"""

from __future__ import annotations

import asyncio
import itertools
import time

import numpy as np

from speculator_arena.rules.accounts import CALIBRATION_ACCOUNT
from speculator_arena.rules.status import VOID

M_GRID = (1, 2, 3, 4)
C_GRID = (0.25, 0.5, 1.0, 2.0, 4.0)  # a log grid from 0.25 to 4
STATS = ("cache_hit_tokens", "cache_hit_mean", "returning_cached_share")
FIT_WORKLOAD = "busy"


def grid(m_values=M_GRID, c_values=C_GRID) -> list[tuple[int, float]]:
    return [(int(m), float(c)) for m in m_values for c in c_values]


def pass_id(m: int, c: float) -> str:
    return f"fit-m{m}-c{c:g}"


def cache_stats(rows: list[dict]) -> dict:
    """The three cache statistics of one pass's request rows (see the module's docstring)."""
    done = [r for r in rows if r.get("done") and (r.get("usage_prompt_tokens") or r.get("prompt_tokens"))]
    if not done:
        return {k: None for k in STATS}
    prompt = np.array([r.get("usage_prompt_tokens") or r["prompt_tokens"] for r in done], dtype=float)
    cached = np.array([r.get("cached_tokens") or 0 for r in done], dtype=float)
    by_session: dict = {}
    for r in sorted(done, key=lambda r: (r["session_id"], r["turn"])):
        by_session.setdefault(r["session_id"], []).append(r)
    hist_sum = hit_sum = 0.0
    for turns in by_session.values():
        for prev, cur in itertools.pairwise(turns):
            if cur["turn"] != prev["turn"] + 1:
                continue
            history = (prev.get("usage_prompt_tokens") or prev["prompt_tokens"]) + (prev.get("output_tokens") or 0)
            hist_sum += history
            hit_sum += min(cur.get("cached_tokens") or 0, history)
    return {
        "cache_hit_tokens": float(cached.sum() / prompt.sum()),
        "cache_hit_mean": float(np.mean(cached / prompt)),
        "returning_cached_share": hit_sum / hist_sum if hist_sum else None,
    }


def targets_of(card: dict) -> dict:
    ct = card["cache_hit_targets"]
    t = float(ct["target_cache_hit_token_weighted"])
    return {
        "cache_hit_tokens": t,
        "cache_hit_mean": t,
        "returning_cached_share": float(ct["returning_session_history_cached_target"]),
    }


def loss(achieved: dict, targets: dict) -> float:
    """Summed squared relative error against the targets (a statistic with no value counts 1)."""
    total = 0.0
    for k, t in targets.items():
        a = achieved.get(k)
        total += 1.0 if a is None else ((a - t) / t) ** 2
    return total


def choose(points: list[dict], targets: dict) -> dict:
    """The grid point minimizing the loss (ties: the smaller m, then the smaller c)."""
    scored = [dict(p, loss=loss(p["achieved"], targets)) for p in points]
    best = min(scored, key=lambda p: (p["loss"], p["m"], p["c"]))
    return {"m": best["m"], "c": best["c"], "achieved": best["achieved"], "loss": best["loss"], "grid": scored}


def data_card(home, task_id: str) -> dict:
    """The task's data card statistics (the served pool's, else the repository's copy): the targets."""
    from speculator_arena.pools.builder.datacard import load_data_card

    card = load_data_card(task_id, home)
    if card is None or not card.stats or "cache_hit_targets" not in card.stats:
        raise FileNotFoundError(
            f"no data card with cache-hit targets for {task_id}: build the pools first "
            f"(arena pools build --task {task_id})"
        )
    return card.stats


def stored_points(wh, evaluation_id: str) -> dict[str, list[dict]]:
    if not wh.partition_dir("requests", evaluation_id).exists():
        return {}  # nothing stored yet
    rows = wh.read_table("requests", evaluation_id).to_pylist()
    out: dict[str, list[dict]] = {}
    for r in rows:
        out.setdefault(r["pass_id"], []).append(r)
    return out


def fit(
    wh,
    task_id: str,
    version: int,
    candidate_version: int,
    target: str | None = None,
    points=None,
    pass_seconds: float | None = None,
    progress=None,
) -> dict:
    """Run the grid's missing points, then choose (m, c). Returns the fit's evidence."""
    from speculator_arena.protocol import load_protocol

    say = progress or (lambda m: None)
    points = points or grid()
    eid = f"cal-{task_id}-v{candidate_version}-fit"
    tp = load_protocol(version).task(task_id)
    secs = float(pass_seconds or tp.workloads[FIT_WORKLOAD].pass_seconds)
    stored = stored_points(wh, eid)
    missing = [(m, c) for m, c in points if pass_id(m, c) not in stored]
    if missing:
        say(
            f"[calibrate {task_id}] m/c fit: {len(points) - len(missing)} of {len(points)} grid points stored; "
            f"running {len(missing)} short stock passes of {secs:g} s"
        )
        FitPasses(task_id, version, eid, wh.home, target, say).run(missing, secs)
        stored = stored_points(wh, eid)
    targets = targets_of(data_card(wh.home, task_id))
    measured = [{"m": m, "c": c, "achieved": cache_stats(stored.get(pass_id(m, c), []))} for m, c in points]
    out = choose(measured, targets)
    out.update(
        {
            "evaluation_id": eid,
            "targets": targets,
            "workload": FIT_WORKLOAD,
            "pass_seconds": secs,
            "previous_m": tp.workloads["busy"].interleave,
            "previous_c": tp.think_time.scale_c,
            "rule": "the (m, c) of the grid minimizing the summed squared relative error of the token-weighted "
            "and per-request cache hit and the returning-session cached share against the data card's "
            f"targets; one {secs:g} s stock pass of {FIT_WORKLOAD} per point",
        }
    )
    say(
        f"[calibrate {task_id}] m/c fit: m {out['m']}, c {out['c']:g} (achieved "
        + ", ".join(f"{k} {v:.3f}" for k, v in out["achieved"].items() if v is not None)
        + ")"
    )
    return out


class FitPasses:
    """The stock engine started once, one short pass per grid point, rows written as each ends.

    Built on the harness's own pieces (engine start and stop, client config, record rows) so the
    fit's passes are served exactly as timed passes are, with the point's m and c.
    """

    def __init__(self, task_id, version, evaluation_id, home, target, say):
        from speculator_arena.runners.harness import Evaluation
        from speculator_arena.runners.spec import calibration_spec, default_stock_engine

        self.stock = default_stock_engine(task_id, version)
        spec = calibration_spec(
            task_id=task_id,
            engine=self.stock,
            evaluation_id=evaluation_id,
            target=target,
            protocol_version=version,
            label="calibration m/c fit",
            account_id=CALIBRATION_ACCOUNT,
        )
        self.ev = Evaluation(spec, home=home, progress=say)

    def run(self, points, seconds: float) -> None:
        from speculator_arena.runners.passes import sessions_per_pass
        from speculator_arena.runners.spec import resolve_engine_path
        from speculator_arena.runners.workload import record_rows, run_lanes

        ev, t = self.ev, self.ev.task
        pool = ev.begin_unpaired()  # the dev pool; an evaluations row, so the fit's rows belong to a stored evaluation
        er = ev.start_engine(
            "stock", resolve_engine_path(self.stock), "calibration fit", t.engine_environment.gpu_memory_utilization
        )
        try:
            cfg = ev.client_config("stock", er)
            L = t.lanes[FIT_WORKLOAD]
            start, end = pool.blocks()[(FIT_WORKLOAD, 0)]
            for k, (m, c) in enumerate(points, 1):
                pid = pass_id(m, c)
                cfg.think_scale = c
                n = min(sessions_per_pass(L, m, seconds), end - start)
                sessions = pool.passes(f"{ev.eid}-{pid}", FIT_WORKLOAD, 0, n)
                now = time.time()
                records = asyncio.run(
                    run_lanes(
                        cfg,
                        sessions,
                        L,
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
                        workload=FIT_WORKLOAD,
                        pass_index=0,
                        tokenizer=ev.tokenizer,
                    )[0]
                    for r in records
                ]
                if rows:
                    ev.wh.write_rows("requests", ev.eid, rows)
                st = cache_stats(rows)
                ev.say(
                    f"fit point {k}/{len(points)} m {m} c {c:g}: {len(rows)} requests, cache hit "
                    + ", ".join(f"{s} {'-' if v is None else f'{v:.3f}'}" for s, v in st.items())
                )
                if not er.alive():
                    raise RuntimeError("the stock engine died during the m/c fit")
        finally:
            ev.stop_engine(er, record=False)
            from speculator_arena.runners.status import write_status

            # void: short stock passes, not a paired evaluation; never scored, never ranked
            write_status(
                ev.wh,
                ev.row,
                VOID,
                void_reason="calibration m/c fit: short stock passes, not a paired "
                "evaluation (its requests are the fit's evidence)",
            )
