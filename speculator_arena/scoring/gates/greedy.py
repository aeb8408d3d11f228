"""The greedy agreement gate (SCORING.md "Gates"): the candidate's greedy replies against the stock engine's."""

from __future__ import annotations

import numpy as np
import pandas as pd

from speculator_arena.scoring import frames
from speculator_arena.scoring.gates.columns import EvaluationRows, gate_columns, per_row
from speculator_arena.scoring.rows import ScoringRows


def gate(rows: ScoringRows, on: EvaluationRows) -> dict:
    """Greedy agreement: mean over the prompts the stock engine answered of the common prefix over
    the longer reply, against the floor. A prompt the candidate left unanswered counts a = 0 from
    protocol v2 on (SCORING.md); under v1 it is left out."""
    greedy, uniques, codes, lim_e = rows.greedy, on.uniques, on.codes, on.limits
    n = len(codes)
    floor = lim_e["greedy_floor"].to_numpy()
    floor_f = frames.floats(lim_e["greedy_floor"])
    found = np.zeros(n, dtype=bool)
    stat = np.full(n, np.nan)
    unanswered = np.zeros(n, dtype=np.int64)
    if len(greedy):
        worst = per_row(uniques[codes], lim_e["unanswered_worst"].to_numpy(dtype=bool), greedy["evaluation_id"])
        answered = greedy["candidate_answered"].to_numpy(dtype=bool)
        greedy = greedy[answered | worst.astype(bool)]
        longer = np.maximum(greedy["len_candidate"], greedy["len_stock"])
        a = (greedy["common_prefix"] / longer.where(longer > 0)).fillna(0.0)
        greedy = greedy.assign(
            a=a.where(greedy["candidate_answered"].to_numpy(dtype=bool), 0.0),
            skipped=~greedy["candidate_answered"].to_numpy(dtype=bool),
        )
        ga = greedy.groupby("evaluation_id").agg(mean=("a", "mean"), size=("a", "size"), skipped=("skipped", "sum"))
        pos = ga.index.get_indexer(uniques)[codes]
        found = pos >= 0
        stat[found] = ga["mean"].to_numpy()[pos[found]]
        size = ga["size"].to_numpy()[pos[found]]
        unanswered[found] = ga["skipped"].to_numpy()[pos[found]]
    no_floor = pd.isna(floor)
    ok = stat >= floor_f
    verdict = np.select(
        [~found, no_floor | ok],
        [frames.objects(n, "not measured"), frames.objects(n, "pass")],
        frames.objects(n, "fail"),
    )
    detail = frames.objects(n, "no greedy probe prompt answered by the stock engine")
    if found.any():
        skipped = unanswered[found]
        detail[found] = [
            (
                f"{k} prompts; no floor in this task"
                if nf
                else f"{k} prompts; mean agreement {'>=' if o else '<'} floor {f}"
            )
            + (f"; {u} left unanswered by the candidate, counted as 0" if u else "")
            for k, nf, o, f, u in zip(size, no_floor[found], ok[found], floor[found], skipped)
        ]
    return gate_columns(n, floor_f, verdict, detail, statistic=stat)
