"""Shown figures (docs/scoring.md): per evaluation, engine and workload, long format; a figure
without every row it needs is NaN with its reason (ADR-0009)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from speculator_arena.protocol.model import WORKLOADS
from speculator_arena.scoring import frames
from speculator_arena.scoring.result import ENGINES, KEY_FIGURES
from speculator_arena.scoring.rows import ScoringRows

_REQUEST_FIGURES = (
    "ttft_p50",
    "ttft_p90",
    "ttft_p99",
    "tpot_p50",
    "tpot_p90",
    "tpot_p99",
    "latency_mean",
    "latency_p50",
    "latency_p95",
    "generated_tokens",
    "cache_hit_tokens",
    "cache_hit_mean",
    "tokens_per_chunk",
)
_ENGINE_FIGURES = (
    "wall_seconds",
    "output_tokens_per_second",
    "mean_acceptance_length",
    "draft_acceptance_rate",
    "memory_peak_bytes",
)
_COUNTERS = ("drafts", "draft_tokens", "accepted_tokens")  # spec_decode_counter's names (warehouse/sql/macros/)


def figures_frame(ev, incomplete_reason, rows: ScoringRows) -> pd.DataFrame:
    """Shown figures, long format; a figure without every row it needs is NaN with its reason.

    Per evaluation row and engine: the request figures of each workload and of all ("all"),
    then the engine-level ones; built as (rows x engines x figures) arrays, then flattened.
    `rows`: the scorer's rows (figures_requests, figures_wall, figures_acceptance, engine_passes
    and memory are read). An engine's workload figure needs as many complete passes as the
    evaluation was run with (`ev.passes_run`, scoring/limits.py).
    """
    fig_req, fig_wall, fig_acc = rows.figures_requests, rows.figures_wall, rows.figures_acceptance
    engine_passes, memory = rows.engine_passes, rows.memory
    columns = ["evaluation_id", "engine", "workload", "figure", "value", "reason"]
    n = len(ev)
    if n == 0:
        return pd.DataFrame([], columns=columns)
    codes, uniques, _, last = frames.eval_keys(ev["evaluation_id"])
    why_all, why = _figure_blanks(
        incomplete_reason.to_numpy()[last], ev["passes_run"].to_numpy()[last], engine_passes, uniques, codes
    )
    req_value, req_reason, generated = _request_figures(fig_req, uniques, codes, why)
    eng_value, eng_reason = _engine_figures(
        fig_wall, fig_acc, memory, uniques, codes, why_all, generated, ev["passes_run"].to_numpy()[last]
    )
    engines = len(ENGINES)
    value = np.concatenate([req_value.reshape(n, engines, -1), eng_value], axis=2).reshape(-1)
    reason = np.concatenate([req_reason.reshape(n, engines, -1), eng_reason], axis=2).reshape(-1)
    workloads = (*WORKLOADS, "all")
    per_engine = len(workloads) * len(_REQUEST_FIGURES) + len(_ENGINE_FIGURES)
    workload_code = np.r_[
        np.repeat(np.arange(len(workloads)), len(_REQUEST_FIGURES)), np.full(len(_ENGINE_FIGURES), len(workloads) - 1)
    ]
    figure_code = np.r_[
        np.tile(np.arange(len(_REQUEST_FIGURES)), len(workloads)),
        len(_REQUEST_FIGURES) + np.arange(len(_ENGINE_FIGURES)),
    ]
    return pd.DataFrame(
        {
            "evaluation_id": frames.inferred(ev["evaluation_id"].to_numpy()).take(
                np.repeat(np.arange(n), engines * per_engine)
            ),
            "engine": frames.inferred(ENGINES).take(np.tile(np.repeat(np.arange(engines), per_engine), n)),
            "workload": frames.inferred(workloads).take(np.tile(workload_code, engines * n)),
            "figure": frames.inferred((*_REQUEST_FIGURES, *_ENGINE_FIGURES)).take(np.tile(figure_code, engines * n)),
            "value": value,
            "reason": frames.inferred(reason),
        }
    )


def _figure_blanks(inc: np.ndarray, expected, engine_passes, uniques, codes) -> tuple[np.ndarray, np.ndarray]:
    """Why an engine's figures are blank, per row x engine ("all") and per row x engine x workload
    (None where they are not): the task is not in the protocol, the evaluation is still running, or
    the engine has fewer complete passes of the workload(s) than the task asks."""
    n = len(codes)
    expected = np.array([x or 0 for x in expected], dtype=float)
    pos = frames.positions(
        engine_passes, ["evaluation_id", "engine", "workload"], (uniques, ENGINES, WORKLOADS), repeated="absent"
    )[codes]
    count = frames.take(engine_passes["complete"] if len(engine_passes) else [], pos, 0)
    missing = count < expected[:, None, None]
    whole = frames.objects(n)
    whole[:] = [r if isinstance(r, str) and r.startswith(("incomplete: evaluation", "task not")) else None for r in inc]
    has_whole = pd.notna(whole)
    why = np.empty((n, len(ENGINES), len(WORKLOADS) + 1), dtype=object)
    bits = (missing.astype(np.int64) << np.arange(len(WORKLOADS))).sum(axis=2)
    for e, engine in enumerate(ENGINES):
        texts = [None] + [
            f"{engine} passes missing or aborted in " + ", ".join(w for k, w in enumerate(WORKLOADS) if b >> k & 1)
            for b in range(1, 2 ** len(WORKLOADS))
        ]
        why[:, e, -1] = np.array(texts, dtype=object)[bits[:, e]]
        for k, w in enumerate(WORKLOADS):
            why[:, e, k] = np.where(missing[:, e, k], f"{engine} passes missing or aborted in {w}", None)
    why[has_whole] = whole[has_whole][:, None, None]
    return why[:, :, -1], why


def _request_figures(fig_req, uniques, codes, why) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The request figures (rows x engines x workloads x figures: values, reasons) and each row
    and engine's generated tokens over all workloads (NaN where it has no counted request)."""
    workloads = (*WORKLOADS, "all")
    pos = frames.positions(fig_req, ["evaluation_id", "engine", "workload"], (uniques, ENGINES, workloads))[codes]
    shape = (*pos.shape, len(_REQUEST_FIGURES))
    absent = pos < 0
    if len(fig_req):
        values = fig_req[list(_REQUEST_FIGURES)].to_numpy(dtype=float, na_value=np.nan)[np.maximum(pos, 0)]
        values[absent] = np.nan
        timing, usage = frames.take(fig_req["timing_missing"], pos), frames.take(fig_req["usage_missing"], pos)
    else:
        values = np.full(shape, np.nan)
        timing = usage = np.full(pos.shape, np.nan)
    timing_text, usage_text = frames.objects(pos.size).reshape(pos.shape), frames.objects(pos.size).reshape(pos.shape)
    timing_text[timing > 0] = [f"{int(x)} counted requests lack chunk times" for x in timing[timing > 0]]
    usage_text[usage > 0] = [f"{int(x)} counted requests lack usage" for x in usage[usage > 0]]
    is_timing = np.array([f.startswith(("ttft", "tpot", "latency")) for f in _REQUEST_FIGURES])
    is_cache = np.array([f.startswith("cache") for f in _REQUEST_FIGURES])
    has_why = pd.notna(why)
    conditions = [
        has_why[..., None],
        absent[..., None],
        is_timing & (timing > 0)[..., None],
        is_cache & (usage > 0)[..., None],
        np.isnan(values),
    ]
    choices = [
        why[..., None],
        frames.objects(1, "no counted requests"),
        timing_text[..., None],
        usage_text[..., None],
        frames.objects(1, "no request with the inputs of this figure"),
    ]
    conditions = [np.broadcast_to(c, shape) for c in conditions]
    reason = np.select(conditions, [np.broadcast_to(c, shape) for c in choices], None)
    value = np.where(np.logical_or.reduce(conditions), np.nan, values)
    generated = values[:, :, -1, _REQUEST_FIGURES.index("generated_tokens")]
    return value, reason, generated


def _engine_figures(
    fig_wall, fig_acc, memory, uniques, codes, why, generated, expected
) -> tuple[np.ndarray, np.ndarray]:
    """The engine-level figures (rows x engines x _ENGINE_FIGURES: values, reasons): wall time and
    output tokens per second, the speculative-decoding counters' acceptance, the memory peak."""
    n = len(codes)
    has_why = pd.notna(why)
    # the last axis in _ENGINE_FIGURES order; the counters' in _COUNTERS order
    value = np.full((n, len(ENGINES), len(_ENGINE_FIGURES)), np.nan)
    reason = np.empty((n, len(ENGINES), len(_ENGINE_FIGURES)), dtype=object)

    pos = frames.positions(fig_wall, ["evaluation_id", "engine"], (uniques, ENGINES))[codes]
    wall = frames.take(fig_wall["wall_seconds"] if len(fig_wall) else [], pos)
    unfinished = (pos < 0) | (frames.take(fig_wall["passes_incomplete"] if len(fig_wall) else [], pos) > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        tps = np.where(pd.notna(generated) & (wall > 0), generated / wall, np.nan)
    blank = has_why | unfinished
    unfinished_text = frames.objects(1, "a pass lacks its finish time")
    value[..., 0] = np.where(blank, np.nan, wall)
    reason[..., 0] = np.select([has_why, unfinished], [why, unfinished_text], None)
    value[..., 1] = np.where(blank, np.nan, tps)
    reason[..., 1] = np.select(
        [has_why, unfinished, np.isnan(tps)], [why, unfinished_text, frames.objects(1, "no counted tokens")], None
    )

    total, missing_side, passes, present = _counters(fig_acc, uniques, codes)
    expected_passes = len(WORKLOADS) * np.array([x or 0 for x in expected], dtype=float)[:, None]
    drafts, draft_tokens, accepted = (total[..., k] for k in range(3))
    unread = (missing_side[..., 0] > 0) | (passes[..., 0] < expected_passes) | (passes[..., 2] < expected_passes)
    acc_why = np.select(
        [has_why, ~(present[..., 0] & present[..., 2]), unread, drafts <= 0],
        [
            why,
            frames.objects(1, "the engine reports no vllm:spec_decode_* counters"),
            frames.objects(1, "counters not read before and after every pass"),
            frames.objects(1, "no drafts were proposed"),
        ],
        None,
    )
    measured = pd.isna(acc_why)
    rate = measured & present[..., 1] & (draft_tokens > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        value[..., 2] = np.where(measured, 1.0 + accepted / drafts, np.nan)
        value[..., 3] = np.where(rate, accepted / draft_tokens, np.nan)
    reason[..., 2] = acc_why
    reason[..., 3] = np.where(rate, None, np.where(measured, "no draft-token counter", acc_why))

    mem = frames.positions(memory, ["evaluation_id", "engine"], (uniques, ENGINES))[codes]
    value[..., 4] = frames.take(memory["peak_bytes"].to_numpy(dtype=float) if len(memory) else [], mem)
    reason[..., 4] = np.where(mem >= 0, None, "no device memory samples")
    return value, reason


def _counters(fig_acc, uniques, codes) -> tuple[np.ndarray, ...]:
    """Per row x engine x _COUNTERS: the counters' delta summed over passes (blank deltas as 0), the
    passes read and those missing a side, and whether the engine reports the counter at all.

    The deltas are added one by one in the rows' order (np.add.at), so float sums do not
    depend on grouping."""
    shape = (len(uniques), len(ENGINES), len(_COUNTERS))
    total, missing, passes = np.zeros(shape), np.zeros(shape, dtype=np.int64), np.zeros(shape, dtype=np.int64)
    present = np.zeros(shape, dtype=bool)
    if len(fig_acc):
        counter = pd.Index(_COUNTERS).get_indexer(fig_acc["counter"])
        eid = uniques.get_indexer(fig_acc["evaluation_id"])
        engine = pd.Index(ENGINES).get_indexer(fig_acc["engine"])
        rows = np.flatnonzero((counter >= 0) & (eid >= 0) & (engine >= 0))
        key = (eid[rows], engine[rows], counter[rows])
        delta = fig_acc["delta"].to_numpy(dtype=float, na_value=np.nan)[rows]
        np.add.at(total, key, np.where(np.isnan(delta), 0.0, delta))
        np.add.at(passes, key, fig_acc["passes"].to_numpy()[rows].astype(np.int64))
        np.add.at(missing, key, fig_acc["passes_missing_side"].to_numpy()[rows].astype(np.int64))
        present[key] = True
    return total[codes], missing[codes], passes[codes], present[codes]


def key_figures(ev: pd.DataFrame, figures: pd.DataFrame) -> None:
    """Engine-level key figures as columns of the evaluations frame (`candidate_ttft_p50`, ...):
    each evaluation's first non-blank value of the figure (what a pivot with "first" gives)."""
    codes, uniques, _, _ = frames.eval_keys(ev["evaluation_id"])
    f = figures[
        (figures["workload"] == "all").to_numpy(dtype=bool)
        & figures["figure"].isin(KEY_FIGURES).to_numpy()
        & figures["value"].notna().to_numpy()
    ]
    f = f.drop_duplicates(["evaluation_id", "engine", "figure"])
    pos = frames.positions(f, ["evaluation_id", "engine", "figure"], (uniques, ENGINES, KEY_FIGURES))[codes]
    values = frames.take(f["value"].to_numpy(dtype=float), pos)
    for e, engine in enumerate(ENGINES):
        for k, name in enumerate(KEY_FIGURES):
            ev[f"{engine}_{name}"] = values[:, e, k]
