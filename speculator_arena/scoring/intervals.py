"""Each board entry's SpecScore interval (SCORING.md "Ties on the board").

Why an interval: two speculators whose SpecScores differ by less than the measurement's own
noise are not ranked apart. The interval has two parts:

1. A seeded bootstrap 95% interval of the SpecScore: `RESAMPLES` resamples, each drawing every
   workload's passes with replacement (as many as it has), taking each workload's median pass
   ratio and their geometric mean; the interval is the 2.5% and 97.5% quantiles of those
   (numpy's default, linear interpolation). The failure rule's zeroed pass ratios are resampled
   as the 0 they are.
2. Widened by the task's calibrated max A/A error `e` (protocol `tasks.<task>.speed_noise.
   max_abs_error` of the version being scored), relatively: low × (1 − e), high × (1 + e).
   The bootstrap sees only the variation between an evaluation's own passes; `e` is how far
   the stock engine measured against itself strays from 1 (protocol section 10). A task whose
   `e` is null is "not calibrated": widened by 0.

The seed is the first 8 bytes of sha256(evaluation_id) read big-endian, so an evaluation's
interval is reproducible and does not depend on which other evaluations are on the board or
in what order. Draws, per evaluation from `numpy.random.default_rng(seed)`: for each workload
in the order solo, team, busy, with its `n` pass ratios sorted ascending (`x`),
`idx = rng.integers(0, n, size=(RESAMPLES, n), dtype=numpy.uint8)` (int64 past 256 passes) and
the resamples' medians are `numpy.median(x[idx], axis=1)`; each resample's SpecScore is
(m_solo · m_team · m_busy) ** (1/3), and the interval `numpy.quantile(scores, [0.025, 0.975])`.

A SpecScore not computed from ratios (0 because a gate failed or the candidate failed) has the
interval [0, 0]; a blank SpecScore has a blank interval.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd

from speculator_arena.protocol.model import WORKLOADS

RESAMPLES = 1000
QUANTILES = (0.025, 0.975)  # a 95% interval
COLUMNS = ["boot_low", "boot_high", "interval_low", "interval_high"]


def evaluation_seed(evaluation_id: str) -> int:
    """The bootstrap's seed: the first 8 bytes of sha256(evaluation_id), big-endian."""
    return int.from_bytes(hashlib.sha256(str(evaluation_id).encode("utf-8")).digest()[:8], "big")


def max_abs_error(protocol_version: int, task_id: str) -> float | None:
    """The task's calibrated max A/A error under this version; None when not calibrated (or the
    version has no such task)."""
    from speculator_arena.protocol import load_protocol

    task = load_protocol(protocol_version).tasks.get(task_id)
    value = None if task is None else task.speed_noise.max_abs_error
    return None if value is None else float(value)


def widen(low, high, e: float | None):
    """The bootstrap interval widened by the relative max A/A error `e` (None: not calibrated, 0)."""
    e = 0.0 if e is None else float(e)
    return np.asarray(low, dtype=float) * (1.0 - e), np.asarray(high, dtype=float) * (1.0 + e)


def _bootstrapped(ev: pd.DataFrame) -> np.ndarray:
    """Rows whose SpecScore is the geometric mean of their ratios (every gate passed)."""
    gates_pass = ev["gates_pass"].astype("boolean").fillna(False).to_numpy(dtype=bool)
    return gates_pass & ev["specscore"].notna().to_numpy()


def _pass_ratios(passes: pd.DataFrame, ids: list[str]) -> dict[tuple[str, str], np.ndarray]:
    """(evaluation_id, workload) -> its pass ratios (in any order: the bootstrap sorts them).

    One sort and one split of the whole frame: a group-by loop over hundreds of evaluations'
    workloads cost more than the bootstrap itself."""
    sub = passes[passes["evaluation_id"].isin(ids)]
    if sub.empty:
        return {}
    eid = sub["evaluation_id"].astype(str).to_numpy()
    wl = sub["workload"].astype(str).to_numpy()
    ratio = sub["ratio"].to_numpy(dtype=float, na_value=np.nan)
    order = np.lexsort((wl, eid))
    eid, wl, ratio = eid[order], wl[order], ratio[order]
    starts = np.flatnonzero(np.r_[True, (eid[1:] != eid[:-1]) | (wl[1:] != wl[:-1])])
    return {(eid[i], wl[i]): chunk for i, chunk in zip(starts, np.split(ratio, starts[1:]))}


def draw_dtype(n: int):
    """The dtype of a workload's resample indices: uint8 up to 256 passes (fast), else int64."""
    return np.uint8 if n <= 256 else np.int64


def _middle(idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The two middle order statistics of each resample's indices over the last axis (the same
    one twice when the count is odd): a min/max network for three passes, the protocol's
    number, and a sort otherwise."""
    n = idx.shape[-1]
    if n == 3:
        a, b, c = idx[..., 0], idx[..., 1], idx[..., 2]
        mid = np.maximum(np.minimum(a, b), np.minimum(np.maximum(a, b), c))
        return mid, mid
    ordered = np.sort(idx, axis=-1)
    return ordered[..., (n - 1) // 2], ordered[..., n // 2]


def bootstrap_intervals(
    ratios: dict[str, list[np.ndarray]], resamples: int = RESAMPLES
) -> dict[str, tuple[float, float]]:
    """evaluation_id -> (low, high), the bootstrap interval before widening.

    `ratios[eid]` holds one array of pass ratios per workload (WORKLOADS order). Each workload's
    ratios are sorted, so a resample's median is the ratio at the median of its indices (the
    mean of the two middle ones for an even count): the median is taken over small integers and
    the floats are looked up once. Evaluations with the same pass counts are resampled together
    (a board of hundreds of entries costs tens of milliseconds); each still draws from its own
    seeded generator, so its interval does not depend on the others."""
    groups: dict[tuple[int, ...], list[str]] = {}
    for eid, arrays in ratios.items():
        groups.setdefault(tuple(len(a) for a in arrays), []).append(eid)
    out = {}
    for shape, eids in groups.items():
        draws = [[] for _ in shape]
        for eid in eids:
            rng = np.random.default_rng(evaluation_seed(eid))
            for k, n in enumerate(shape):
                draws[k].append(rng.integers(0, n, size=(resamples, n), dtype=draw_dtype(n)))
        rows = np.arange(len(eids))[:, None]
        product = np.ones((len(eids), resamples))
        for k, n in enumerate(shape):
            x = np.sort(np.stack([ratios[eid][k] for eid in eids]), axis=1)  # (E, n), ascending
            lo, hi = _middle(np.stack(draws[k]))  # (E, R) each
            product = product * (x[rows, lo] if n % 2 else (x[rows, lo] + x[rows, hi]) / 2)
        score = product ** (1.0 / 3.0)
        lows, highs = np.quantile(score, QUANTILES, axis=1)
        out.update({eid: (float(lo), float(hi)) for eid, lo, hi in zip(eids, lows, highs)})
    return out


def bootstrapped_intervals(
    evaluations: pd.DataFrame, passes: pd.DataFrame, known: dict[str, tuple[float, float]] | None = None
) -> dict[str, tuple[float, float]]:
    """evaluation_id -> its bootstrap interval (before widening), for the rows of `evaluations`
    whose SpecScore is the geometric mean of their ratios. `known`: intervals already drawn
    (an evaluation's interval depends on its own pass ratios and seed alone, so one drawn
    before, from the same passes, is the same to the last bit): those are not drawn again."""
    if evaluations.empty:
        return {}
    boot = _bootstrapped(evaluations)
    ids = evaluations["evaluation_id"].astype(str).to_numpy()
    known = known or {}
    todo = [eid for eid in ids[boot] if eid not in known]
    by_key = _pass_ratios(passes, sorted(set(todo)))
    ratios = {}
    for eid in todo:
        arrays = []
        for w in WORKLOADS:
            a = by_key.get((eid, w))
            if a is None or len(a) == 0 or not np.isfinite(a).all():
                raise ValueError(
                    f"evaluation {eid} has a SpecScore but no complete {w} pass ratios in the passes frame"
                )
            arrays.append(a)
        ratios[eid] = arrays
    found = bootstrap_intervals(ratios)
    found.update({eid: known[eid] for eid in ids[boot] if eid in known})
    return found


def specscore_intervals(
    evaluations: pd.DataFrame,
    passes: pd.DataFrame,
    e: float | None,
    known: dict[str, tuple[float, float]] | None = None,
) -> pd.DataFrame:
    """`COLUMNS` for each row of `evaluations` (same index): the bootstrap interval and the
    board's interval (widened by `e`). Needs the scorer's columns evaluation_id, specscore,
    gates_pass, and its passes frame (evaluation_id, workload, pass_index, ratio); `known`:
    bootstrap intervals already drawn (`bootstrapped_intervals`)."""
    out = pd.DataFrame(np.nan, index=evaluations.index, columns=COLUMNS)
    if evaluations.empty:
        return out
    boot = _bootstrapped(evaluations)
    ids = evaluations["evaluation_id"].astype(str).to_numpy()
    found = bootstrapped_intervals(evaluations, passes, known)
    pairs = np.array([found[i] if b else (np.nan, np.nan) for i, b in zip(ids, boot)], dtype=float).reshape(-1, 2)
    lows, highs = pairs[:, 0].copy(), pairs[:, 1].copy()
    zero = ~boot & (
        evaluations["specscore"].to_numpy(dtype=float, na_value=np.nan) == 0
    )  # 0: a gate or the candidate failed
    lows[zero], highs[zero] = 0.0, 0.0
    out["boot_low"], out["boot_high"] = lows, highs
    out["interval_low"], out["interval_high"] = widen(lows, highs, e)
    return out
