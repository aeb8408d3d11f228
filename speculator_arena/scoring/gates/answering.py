"""The answering gate (SCORING.md "Probe items the candidate does not answer"): the share of
probe requests left unanswered, under the rule of rules/answering.py.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from speculator_arena.rules.answering import over_limit
from speculator_arena.scoring import frames
from speculator_arena.scoring.gates.columns import EvaluationRows, gate_columns
from speculator_arena.scoring.rows import ScoringRows


def gate(rows: ScoringRows, on: EvaluationRows) -> tuple[dict, np.ndarray]:
    """Share of probe requests left unanswered: the candidate's decides the gate; the stock
    engine's voids the evaluation. Returns the gate and per row the stock engine's void text."""
    answering, eids, lim_e = rows.answering, on.ids, on.limits
    n = len(eids)
    mx = lim_e["max_unanswered_share"].to_numpy()
    stat = np.full(n, np.nan)
    verdict = frames.objects(n, "not measured")
    detail = frames.objects(n, "no probe check rows")
    stock_text = frames.objects(n)
    if len(answering):
        ans = answering.assign(share=answering["unanswered"] / answering["requests"].where(answering["requests"] > 0))
        # each evaluation row with its answering rows, in their order
        m = pd.DataFrame({"evaluation_id": eids.to_numpy(), "_row": np.arange(n)}).merge(
            ans.assign(_order=np.arange(len(ans))), on="evaluation_id"
        )
        m = m.iloc[np.lexsort((m["_order"].to_numpy(), m["_row"].to_numpy()))]
        row, engine, share = m["_row"].to_numpy(), m["engine"].to_numpy(), m["share"].to_numpy(dtype=float)
        checks = m["probe_check"].to_numpy()
        parts = [f"{u}/{q} of {c}" for u, q, c in zip(m["unanswered"].to_numpy(), m["requests"].to_numpy(), checks)]
        over = over_limit(m["unanswered"].to_numpy(), m["requests"].to_numpy(), mx[row])
        stock, cand = engine == "stock", engine == "candidate"
        bad = np.flatnonzero(stock & over)
        stock_text = frames.texts_by_row(
            n,
            frames.by_row(row[bad], [parts[i] for i in bad]),
            lambda ps: "stock engine left " + ", ".join(ps) + " unanswered",
        )
        bad = np.flatnonzero(cand & over)
        cand_text = frames.texts_by_row(
            n,
            frames.by_row(row[bad], [parts[i] for i in bad]),
            lambda ps: "candidate left " + ", ".join(ps) + " unanswered",
        )
        seen_text = frames.texts_by_row(
            n,
            frames.by_row(row[cand], checks[cand]),
            lambda cs: "worst candidate share unanswered over " + ", ".join(sorted(set(cs))),
        )
        np.fmax.at(stat, row[cand], share[cand])  # the worst share; NaN where no candidate row
        has_rows, failed, asked = np.bincount(row, minlength=n) > 0, pd.notna(cand_text), pd.notna(seen_text)
        verdict = np.select(
            [~has_rows, failed, ~asked], [verdict, frames.objects(n, "fail"), verdict], frames.objects(n, "pass")
        )
        detail = np.select(
            [~has_rows, failed, ~asked],
            [detail, cand_text, frames.objects(n, "no probe check asked the candidate")],
            seen_text,
        )
    return gate_columns(n, frames.floats(lim_e["max_unanswered_share"]), verdict, detail, statistic=stat), stock_text
