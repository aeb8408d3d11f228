"""What every gate module shares: the evaluation rows a gate is computed for, and a gate's columns.

Why: each gate (one module each, named for it) is a function from the scorer's rows
(rows.ScoringRows) and these evaluation rows to its columns for every evaluation row, in the
gates frame's columns (result.GATES gives their order); assemble.py stacks them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class EvaluationRows:
    """The evaluation rows being scored, each with its task's limits (one row per row of `ids`)."""

    ids: pd.Series  # evaluation_id of every row (a repeated id repeats)
    codes: np.ndarray  # each row's code in `uniques` (frames.eval_keys)
    uniques: pd.Index  # the distinct ids
    first: np.ndarray  # per row, the first row with its id (its gate verdicts decide: frames.eval_keys)
    limits: pd.DataFrame  # protocol_limits of each row's task, row for row (NaN where not in the protocol)
    public: np.ndarray  # each row's task is public (a GPU task whose memory gate blocks)


def gate_columns(n: int, limit, verdict, detail, statistic=None, se=None, low=None, high=None) -> dict:
    """One gate's columns for every evaluation row (NaN where a statistic is not given)."""
    blank = np.full(n, np.nan)
    return {
        "statistic": blank if statistic is None else statistic,
        "se": blank if se is None else se,
        "ci_low": blank if low is None else low,
        "ci_high": blank if high is None else high,
        "limit": limit,
        "verdict": verdict,
        "detail": detail,
    }


def per_row(ev_ids: np.ndarray, values: np.ndarray, ids: pd.Series) -> np.ndarray:
    """`values` (one per evaluation row, `ev_ids`) looked up for each of `ids`."""
    return pd.Series(values, index=pd.Index(ev_ids)).groupby(level=0).first().reindex(ids).to_numpy()
