"""The scorer's pandas step: the rows of the SQL queries (rows.ScoringRows) made into the
scorer's frames, every evaluation at once: completeness and the workload ratios (ratios.py),
every gate (gates/, one module each), the outcome and SpecScore (outcome.py, whose docstring
states the order of precedence), the shown figures (figures.py) and the dev/test gap flag
(gap.py). rows.py runs the queries; docs/scoring.md gives each formula.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from speculator_arena.scoring import figures, frames, gates, outcome
from speculator_arena.scoring.gap import gap_flags
from speculator_arena.scoring.gates.columns import EvaluationRows
from speculator_arena.scoring.ratios import workload_ratios
from speculator_arena.scoring.result import GATES, Scores
from speculator_arena.scoring.rows import ScoringRows

# gap_flags lives in gap.py; dashboards/memo.py still imports it from here
__all__ = ["assemble", "gap_flags"]


def assemble(proto, digest, limits: pd.DataFrame, rows: ScoringRows) -> Scores:
    """The query results made into the scorer's frames, every evaluation at once.

    `limits`: protocol_limits(proto), one row per task. Why whole frames: this runs on the web
    page's first render (a 2-second budget); the former per-evaluation loops took seconds for
    ~1,000 evaluations. Row order, dtypes and texts are those of that per-row code
    (docs/scoring.md; outcome.py gives the SpecScore precedence).
    """
    lim = limits.set_index("task_id")
    ev = rows.evaluations.copy()
    ev["run_protocol_version"] = ev["protocol_version"]
    ev["protocol_version"] = proto.version
    ev["in_protocol"] = ev["task_id"].isin(lim.index)
    lim_e = lim.reindex(ev["task_id"]).reset_index(drop=True)
    lim_e.index = ev.index
    codes, uniques, first, _ = frames.eval_keys(ev["evaluation_id"])
    public = np.array([bool(x) for x in lim_e["public"].to_numpy()], dtype=bool)
    on = EvaluationRows(ev["evaluation_id"], codes, uniques, first, lim_e, public)

    # ---- completeness, workload ratios -------------------------------------------------------
    passes = rows.passes.copy()
    incomplete_reason = outcome.incomplete_reasons(ev, passes, proto.version)
    ev["complete"] = incomplete_reason.isna()
    incomplete = incomplete_reason.to_numpy()
    workload_ratios(ev, passes)

    # ---- gates (one block of rows per gate, in GATES order), the outcome ------------------------
    blocks, stock_text = gates.evaluate(rows, on, incomplete)
    gates_df = _gates_frame(ev["evaluation_id"], blocks)
    outcome.decide(ev, rows, on, passes, blocks, stock_text, incomplete)

    shown = figures.figures_frame(ev, incomplete_reason, rows)
    figures.key_figures(ev, shown)
    gap_flags(ev, lim_e)

    passes = passes.drop(columns=["task_id"]).reset_index(drop=True)
    return Scores(proto.version, digest, ev.reset_index(drop=True), passes, gates_df, shown)


def _gates_frame(eids: pd.Series, blocks: list) -> pd.DataFrame:
    """The gates frame: one row per gate and evaluation row, gate by gate."""
    columns = ["evaluation_id", "gate", "statistic", "se", "ci_low", "ci_high", "limit", "verdict", "detail"]
    n = len(eids)
    if n == 0:
        gates_df = pd.DataFrame([], columns=columns)
        for col in ("statistic", "se", "ci_low", "ci_high", "limit"):
            gates_df[col] = pd.to_numeric(gates_df[col], errors="coerce")
        return gates_df
    data = {
        "evaluation_id": frames.inferred(eids.to_numpy()).take(np.tile(np.arange(n), len(blocks))),
        "gate": frames.inferred(GATES).take(np.repeat(np.arange(len(blocks)), n)),
    }
    for col in ("statistic", "se", "ci_low", "ci_high", "limit"):
        data[col] = np.concatenate([np.asarray(b[col], dtype=float) for b in blocks])
    for col in ("verdict", "detail"):
        data[col] = frames.inferred(np.concatenate([b[col] for b in blocks]))
    return pd.DataFrame(data)
