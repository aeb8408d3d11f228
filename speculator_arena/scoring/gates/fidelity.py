"""The target fidelity gate (SCORING.md "Gates"): the candidate's log-probabilities of fixed texts
against the stock engine's.
"""

from __future__ import annotations

import numpy as np

from speculator_arena.scoring import frames
from speculator_arena.scoring.gates.columns import EvaluationRows, gate_columns, per_row
from speculator_arena.scoring.rows import ScoringRows


def gate(rows: ScoringRows, on: EvaluationRows) -> dict:
    """Target fidelity: mean absolute log-probability difference over the fixed texts' tokens the
    stock engine scored. From protocol v2 on a text the candidate left unanswered (or answered on
    other token positions than the arena's) counts its tokens at the largest per-token difference
    any answered text showed, and at least `unanswered_min_nats` (SCORING.md); under v1 such texts
    were left out and texts tokenized differently left the gate not measured."""
    fidelity, uniques, codes, lim_e = rows.fidelity, on.uniques, on.codes, on.limits
    n = len(codes)
    ceil = frames.floats(lim_e["fidelity_ceiling"])
    stat = np.full(n, np.nan)
    verdict = frames.objects(n, "not measured")
    detail = frames.objects(n, "no fixed text scored by the stock engine")
    if not len(fidelity):
        return gate_columns(n, ceil, verdict, detail, statistic=stat)
    ids = uniques[codes]
    worst_rule = per_row(ids, lim_e["unanswered_worst"].to_numpy(dtype=bool), fidelity["evaluation_id"]).astype(bool)
    min_nats = per_row(ids, lim_e["unanswered_min_nats"].to_numpy(dtype=float), fidelity["evaluation_id"])
    good = fidelity["candidate_answered"].to_numpy(dtype=bool) & fidelity["aligned"].fillna(False).to_numpy(dtype=bool)
    f = fidelity.assign(good=good, worst_rule=worst_rule, min_nats=min_nats)
    f = f[good | worst_rule | fidelity["candidate_answered"].to_numpy(dtype=bool)]
    f = f.assign(
        good_diff=f["abs_diff"].where(f["good"], 0.0),
        good_max=f["max_diff"].where(f["good"]),
        bad_n=f["n"].where(~f["good"], 0),
        good_n=f["n"].where(f["good"], 0),
        misaligned=(~f["good"] & ~f["worst_rule"]).astype(int),
        skipped=(~f["good"]).astype(int),
    )
    fa = f.groupby("evaluation_id").agg(
        abs_diff=("good_diff", "sum"),
        worst_seen=("good_max", "max"),
        bad_n=("bad_n", "sum"),
        n=("n", "sum"),
        texts=("n", "size"),
        misaligned=("misaligned", "sum"),
        skipped=("skipped", "sum"),
        worst_rule=("worst_rule", "first"),
        min_nats=("min_nats", "first"),
    )
    worst = np.fmax(fa["worst_seen"].fillna(0.0).to_numpy(), fa["min_nats"].to_numpy())
    value = (fa["abs_diff"].to_numpy() + fa["bad_n"].to_numpy() * np.where(fa["worst_rule"], worst, 0.0)) / fa[
        "n"
    ].where(fa["n"] > 0).to_numpy()
    pos = fa.index.get_indexer(uniques)[codes]
    rows = np.flatnonzero(pos >= 0)
    p = pos[rows]
    measured = (fa["misaligned"].to_numpy()[p] == 0) & ~np.isnan(value[p])
    stat[rows[measured]] = value[p][measured]
    verdict[rows[measured]] = np.where(value[p][measured] <= ceil[rows[measured]], "pass", "fail").astype(object)
    detail[rows] = [
        (
            f"{int(k)} tokens of {int(t)} texts"
            + (f"; {int(u)} unanswered by the candidate, scored at {w:.4g} nats per token" if u else "")
        )
        if m
        else (f"{int(b)} texts tokenized differently by the two engines" if b else "no tokens to score")
        for k, t, u, w, m, b in zip(
            fa["n"].to_numpy()[p],
            fa["texts"].to_numpy()[p],
            fa["skipped"].to_numpy()[p],
            worst[p],
            measured,
            fa["misaligned"].to_numpy()[p],
        )
    ]
    return gate_columns(n, ceil, verdict, detail, statistic=stat)
