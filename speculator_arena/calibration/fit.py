"""The `m`/`c` fit of SCORING.md "Calibration": short stock passes over a grid of interleave `m`
(live sessions per lane) and think-time scale `c`, the pair whose cache statistics come closest
to the data card's targets.

Each grid point is one short pass of the `busy` workload (its lanes are the ones that fill the
stock engine's KV cache, section 4) served by the stock engine, started once for the whole grid,
with fresh salted sessions per point: an evaluation whose spec carries the fit plan, run through
the one door like any other (runners/fit_passes.py serves it, on this machine or in a pod), by
the launcher before the calibration's assets (`run_fit_passes`). Its requests are stored as raw
rows of the evaluation `cal-<task>-v<N>-fit` (pass ids `fit-m<m>-c<c>`); a fit that stopped
half-way is completed by `-fit-2`, ... with only the missing points, and the achieved values
are recomputed from the rows (`fit`, what the `calibration_fit` asset runs: it serves nothing).

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

import itertools

import numpy as np

from speculator_arena.rules.accounts import CALIBRATION_ACCOUNT
from speculator_arena.runners.fit_plan import pass_id

M_GRID = (1, 2, 3, 4)
C_GRID = (0.25, 0.5, 1.0, 2.0, 4.0)  # a log grid from 0.25 to 4
STATS = ("cache_hit_tokens", "cache_hit_mean", "returning_cached_share")
FIT_WORKLOAD = "busy"


def grid(m_values=M_GRID, c_values=C_GRID) -> list[tuple[int, float]]:
    return [(int(m), float(c)) for m in m_values for c in c_values]


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


def fit_evaluations(wh, task_id: str, candidate_version: int) -> list[str]:
    """The stored evaluations holding the candidate's fit passes, oldest first: `cal-<task>-v<N>-fit`,
    then `-fit-2`, `-fit-3`, ... (a fit that stopped half-way is completed by a further one)."""
    from speculator_arena.warehouse.catalog import partition_mtimes

    base = fit_evaluation_id(task_id, candidate_version)
    ids = set(partition_mtimes(wh.raw / "evaluations"))
    out, k = [], 1
    while (eid := base if k == 1 else f"{base}-{k}") in ids:
        out.append(eid)
        k += 1
    return out


def fit_evaluation_id(task_id: str, candidate_version: int, attempt: int = 1) -> str:
    base = f"cal-{task_id}-v{candidate_version}-fit"
    return base if attempt == 1 else f"{base}-{attempt}"


def stored_points(wh, evaluation_ids: list[str]) -> dict[str, list[dict]]:
    """pass id -> the request rows of that grid point, from the fit evaluations (a point stored
    by two keeps the first's rows)."""
    out: dict[str, list[dict]] = {}
    for eid in evaluation_ids:
        if not wh.partition_dir("requests", eid).exists():
            continue
        here: dict[str, list[dict]] = {}
        for r in wh.read_table("requests", eid).to_pylist():
            here.setdefault(r["pass_id"], []).append(r)
        for pid, rows in here.items():
            out.setdefault(pid, rows)
    return out


def _stored(wh, task_id: str, candidate_version: int, points) -> tuple[list[str], dict, list]:
    """(the fit evaluations, their stored points, the grid points none of them stored)."""
    ids = fit_evaluations(wh, task_id, candidate_version)
    stored = stored_points(wh, ids)
    return ids, stored, [(m, c) for m, c in points if pass_id(m, c) not in stored]


def _seconds(task_id: str, version: int, pass_seconds: float | None) -> float:
    from speculator_arena.protocol import load_protocol

    return float(pass_seconds or load_protocol(version).task(task_id).workloads[FIT_WORKLOAD].pass_seconds)


def next_fit_spec(
    wh, task_id: str, version: int, candidate_version: int, target, points, pass_seconds
) -> tuple[object | None, bool]:
    """(the spec of the fit evaluation that serves the grid points not stored yet, or None when
    every point is stored; whether the last fit evaluation's row says running, in which case no
    spec is made: a queue waits for it). A last fit evaluation queued and never started is the
    one the spec names again (the runner takes its queued row)."""
    from speculator_arena.rules.status import QUEUED, RUNNING
    from speculator_arena.runners.spec import calibration_spec, default_stock_engine
    from speculator_arena.warehouse.evaluations import current_row

    done, _, missing = _stored(wh, task_id, candidate_version, points)
    last = (current_row(wh, done[-1]) or {}).get("status") if done else None
    if last == RUNNING:
        return None, True
    attempt = len(done) if last == QUEUED else len(done) + 1
    if not missing:
        return None, False
    spec = calibration_spec(
        task_id=task_id,
        engine=default_stock_engine(task_id, version),
        evaluation_id=fit_evaluation_id(task_id, candidate_version, attempt),
        target=target,
        protocol_version=version,
        label="calibration m/c fit",
        account_id=CALIBRATION_ACCOUNT,
        fit={"workload": FIT_WORKLOAD, "seconds": _seconds(task_id, version, pass_seconds), "points": missing},
    )
    return spec, False


def run_fit_passes(
    wh, task_id: str, version: int, candidate_version: int, target, points, pass_seconds, runner, progress=None
) -> str | None:
    """The grid points not stored yet, served as one fit evaluation through `runner` (the one
    door: `runner(spec, wh, say)` returns its final status); None when every point is stored."""
    say = progress or (lambda m: None)
    spec, pending = next_fit_spec(wh, task_id, version, candidate_version, target, points, pass_seconds)
    if pending:  # the last fit evaluation says running: its runner died (or it runs elsewhere: an error)
        from speculator_arena.runners.harness import resume_dead

        resume_dead(wh, fit_evaluations(wh, task_id, candidate_version)[-1], progress=say)
        spec, _ = next_fit_spec(wh, task_id, version, candidate_version, target, points, pass_seconds)
    if spec is None:
        return None
    n = len(spec.fit["points"])
    say(
        f"[calibrate {task_id}] m/c fit: {len(points) - n} of {len(points)} grid points stored; "
        f"running {n} short stock passes of {spec.fit['seconds']:g} s"
    )
    return runner(spec, wh, say)


def fit(
    wh,
    task_id: str,
    version: int,
    candidate_version: int,
    points=None,
    pass_seconds: float | None = None,
    progress=None,
) -> dict:
    """Choose (m, c) from the grid's stored passes (run before, by `run_fit_passes`). Returns the
    fit's evidence; raises when a point has no stored pass."""
    from speculator_arena.protocol import load_protocol

    say = progress or (lambda m: None)
    points = points or grid()
    tp = load_protocol(version).task(task_id)
    secs = _seconds(task_id, version, pass_seconds)
    ids, stored, missing = _stored(wh, task_id, candidate_version, points)
    if missing:
        raise FileNotFoundError(
            f"the m/c fit of {task_id} (candidate v{candidate_version}) has no stored pass for "
            + ", ".join(f"m {m} c {c:g}" for m, c in missing)
            + ": `arena calibrate` runs them through the door first (the fit evaluation may have ended early: "
            + (", ".join(ids) or "none stored")
            + ")"
        )
    targets = targets_of(data_card(wh.home, task_id))
    measured = [{"m": m, "c": c, "achieved": cache_stats(stored.get(pass_id(m, c), []))} for m, c in points]
    out = choose(measured, targets)
    out.update(
        {
            "evaluation_id": ids[0],
            "evaluation_ids": ids,
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
