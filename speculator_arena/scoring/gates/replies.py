"""The sampled likelihood and first-choice share gates (SCORING.md "Gates"): one module, because
both are computed from the same scored replies (sql/gate_scored.sql) with the same clusters.
"""

from __future__ import annotations

import numpy as np

from speculator_arena.scoring import frames
from speculator_arena.scoring.gates.columns import EvaluationRows, gate_columns
from speculator_arena.scoring.result import ENGINES
from speculator_arena.scoring.rows import ScoringRows
from speculator_arena.scoring.statistics import cluster_ratio, two_sided_fails


def gates(rows: ScoringRows, on: EvaluationRows) -> list:
    """Sampled likelihood and first-choice share: candidate minus stock, replies as clusters."""
    scored, uniques, codes, lim_e = rows.scored, on.uniques, on.codes, on.limits
    n = len(codes)
    stats = {}
    if len(scored):
        s = scored.astype({"s": float, "x": float, "n": float})
        s = s.assign(ss=s.s * s.s, sn=s.s * s.n, nn=s.n * s.n, xx=s.x * s.x, xn=s.x * s.n)
        g = s.groupby(["evaluation_id", "reply_engine"])
        agg = g[["s", "x", "n", "ss", "sn", "nn", "xx", "xn"]].sum().assign(R=g.size())
        L, seL = cluster_ratio(agg.s, agg.n, agg.ss, agg.sn, agg.nn, agg.R)
        F, seF = cluster_ratio(agg.x, agg.n, agg.xx, agg.xn, agg.nn, agg.R)
        agg = agg.assign(L=L, seL=seL, F=F, seF=seF)
        stats = {k: agg.xs(k, level="reply_engine") for k in ENGINES if k in agg.index.get_level_values(1)}
    z = lim_e["z"].to_numpy()
    blocks = []
    for est, se_col, bound_col in (("L", "seL", "likelihood_bound"), ("F", "seF", "first_choice_bound")):
        bound = lim_e[bound_col].to_numpy()
        both = np.zeros(n, dtype=bool)
        if "candidate" in stats and "stock" in stats:
            pc = stats["candidate"].index.get_indexer(uniques)[codes]
            ps = stats["stock"].index.get_indexer(uniques)[codes]
            both = (pc >= 0) & (ps >= 0)
        stat, se, low, high = (np.full(n, np.nan) for _ in range(4))
        verdict = frames.objects(n, "not measured")
        detail = frames.objects(n, "the stock engine has fewer than 2 scored replies")
        # the stock engine scored enough of its own replies: too few of the candidate's is the
        # candidate's failure (it failed or emptied its timed replies), never an unmeasured gate
        stock_r = np.zeros(n)
        if "stock" in stats:
            ps_all = stats["stock"].index.get_indexer(uniques)[codes]
            stock_r[ps_all >= 0] = stats["stock"]["R"].to_numpy()[ps_all[ps_all >= 0]]
        cand_short = stock_r >= 2
        verdict[cand_short] = "fail"
        detail[cand_short] = (
            "the candidate has fewer than 2 scored replies with tokens (its timed replies failed or were empty)"
        )
        if both.any():
            c, st = stats["candidate"], stats["stock"]
            c_est, s_est = c[est].to_numpy()[pc[both]], st[est].to_numpy()[ps[both]]
            c_r, s_r = c["R"].to_numpy()[pc[both]], st["R"].to_numpy()[ps[both]]
            d = c_est - s_est
            e = np.hypot(c[se_col].to_numpy()[pc[both]], st[se_col].to_numpy()[ps[both]])
            fails, lo, hi = two_sided_fails(d, e, bound[both], z[both])
            measured = ~np.isnan(e)
            stat[both] = d
            se[both] = np.where(measured, e, np.nan)
            low[both] = np.where(measured, lo, np.nan)
            high[both] = np.where(measured, hi, np.nan)
            s_ok = ~np.isnan(st[se_col].to_numpy()[ps[both]])
            verdict[both] = np.where(
                measured, np.where(fails, "fail", "pass"), np.where(s_ok, "fail", "not measured")
            ).astype(object)
            detail[both] = [
                f"candidate {ce:.5f} ({int(cr)} replies), stock {se_:.5f} ({int(sr)} replies); "
                f"fails when CI lies beyond +-{b}"
                if m
                else (
                    "the candidate has fewer than 2 scored replies with tokens"
                    if so
                    else "the stock engine has fewer than 2 scored replies with tokens"
                )
                for ce, cr, se_, sr, b, m, so in zip(c_est, c_r, s_est, s_r, bound[both], measured, s_ok)
            ]
        blocks.append(gate_columns(n, frames.floats(lim_e[bound_col]), verdict, detail, stat, se, low, high))
    return blocks
