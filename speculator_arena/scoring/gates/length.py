"""The length gate (SCORING.md "Gates"): the candidate's reply lengths against the stock engine's."""

from __future__ import annotations

import numpy as np
import pandas as pd

from speculator_arena.scoring import frames
from speculator_arena.scoring.gates.columns import EvaluationRows, gate_columns
from speculator_arena.scoring.rows import ScoringRows
from speculator_arena.scoring.statistics import cluster_ratio, two_sided_fails


def gate(rows: ScoringRows, on: EvaluationRows, incomplete: np.ndarray) -> dict:
    """Length: candidate over stock reply length minus 1 (delta method, pairs as clusters); only
    on complete evaluations (the others' rows are never read)."""
    length, uniques, codes, lim_e = rows.length, on.uniques, on.codes, on.limits
    n = len(codes)
    bound, z = lim_e["length_bound"].to_numpy(), lim_e["z"].to_numpy()
    complete = pd.isna(incomplete)
    stat, se, low, high = (np.full(n, np.nan) for _ in range(4))
    verdict = frames.objects(n, "not measured")
    detail = np.where(complete, "fewer than 2 paired requests", incomplete).astype(object)
    if len(length):
        length = length[length["evaluation_id"].isin(uniques[codes[complete]])]
    pos = frames.positions(length, ["evaluation_id"], (uniques,))[codes]
    rows = np.flatnonzero(complete & (pos >= 0))
    if len(rows):
        r = length.iloc[pos[rows]]
        enough = ~(r["pairs"].to_numpy() < 2) & ~(r["sum_s"].to_numpy() <= 0)
        # the stock engine counted enough requests: too few pairs is the candidate's failure
        short = ~enough & (r["stock_counted"].to_numpy() >= 2)
        verdict[rows[short]] = "fail"
        detail[rows[short]] = [
            f"the candidate answered and counted {int(p)} of the stock engine's {int(k)} counted requests"
            for p, k in zip(r["pairs"].to_numpy()[short], r["stock_counted"].to_numpy()[short])
        ]
        rows, r = rows[enough], r[enough]
    if len(rows):
        ratio, e = cluster_ratio(r.sum_c, r.sum_s, r.sum_cc, r.sum_cs, r.sum_ss, r.pairs)
        delta = ratio - 1.0
        fails, lo, hi = two_sided_fails(delta, e, bound[rows], z[rows])
        stat[rows], se[rows], low[rows], high[rows] = delta, e, lo, hi
        verdict[rows] = np.where(fails, "fail", "pass").astype(object)
        detail[rows] = [f"{int(p)} pairs; mean length ratio {q:.4f}" for p, q in zip(r["pairs"].to_numpy(), ratio)]
    return gate_columns(n, frames.floats(lim_e["length_bound"]), verdict, detail, stat, se, low, high)
