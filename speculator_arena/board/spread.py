"""Acceptance spread (shown, never scored; docs/scoring.md "Acceptance spread").

Why: the mean acceptance length of an evaluation (the scorer's figure, 1 + accepted / drafts over
all its timed passes) hides how much it moves: serving engines with speculation on vary from
run to run far more than without it, and a participant cannot tell a real change from noise
without the spread beside the mean. Two spreads, both of the candidate's counters:

- across passes, per evaluation: each timed pass's acceptance length, 1 + accepted / drafts of the
  counters differenced around that pass (board/sql/pass_acceptance.sql), over the passes that
  proposed drafts; shown as the sample standard deviation (n − 1), the minimum and maximum, and n.
  Blank with the mean's reason where the mean is blank, blank where a pass lacks a side of a
  counter or a count went down during it (a figure over fewer passes than run is no figure,
  ADR-0009), and blank where fewer than 2 passes proposed drafts.
- across evaluations, per entry: the sample standard deviation of its history's mean acceptance
  lengths (board/history.py), with their minimum, maximum and n; blank where fewer than 2
  evaluations have a mean.
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd

from speculator_arena.board.data import board_sql, scoped_connection

PASS_COLUMNS = [
    "evaluation_id",
    "acceptance_pass_sd",
    "acceptance_pass_min",
    "acceptance_pass_max",
    "acceptance_passes",
    "acceptance_pass_reason",
]


def pass_acceptance(home: str | os.PathLike | None, evaluation_ids) -> pd.DataFrame:
    """Per evaluation and timed pass: the candidate's drafts and accepted tokens over the pass
    (NULL where a side was not read) and whether a count went down; one scoped read."""
    ids = sorted(set(evaluation_ids))
    if not ids:
        return pd.DataFrame(columns=["evaluation_id", "workload", "pass_id", "drafts", "accepted", "down"])
    with scoped_connection(home, ids) as con:
        return con.execute(board_sql("pass_acceptance.sql"), [ids]).fetchdf()


def pass_spread(per_pass: pd.DataFrame, points: pd.DataFrame) -> pd.DataFrame:
    """PASS_COLUMNS for each of `points` (evaluation_id, mean_acceptance_length and its reason),
    from `pass_acceptance`'s rows."""
    rows = []
    for eid, mean, why in zip(
        points["evaluation_id"], points["mean_acceptance_length"], points["mean_acceptance_length_reason"]
    ):
        p = per_pass[per_pass["evaluation_id"] == eid]
        sd = lo = hi = np.nan
        n = 0
        if pd.isna(mean):
            reason = why if isinstance(why, str) and why else "no mean acceptance length"
        elif p["drafts"].isna().any() or p["accepted"].isna().any():
            reason = "counters not read before and after every pass"
        elif p["down"].fillna(False).astype(bool).any():
            reason = "a counter went down during a pass"
        else:
            drafts = p["drafts"].to_numpy(dtype=float)
            length = 1.0 + p["accepted"].to_numpy(dtype=float)[drafts > 0] / drafts[drafts > 0]
            n = len(length)
            if n < 2:
                reason = f"{n} pass(es) proposed drafts: a spread needs 2"
            else:
                sd, lo, hi, reason = float(np.std(length, ddof=1)), float(length.min()), float(length.max()), None
        rows.append((eid, sd, lo, hi, n, reason))
    return pd.DataFrame(rows, columns=PASS_COLUMNS)


def evaluation_spread(history: pd.DataFrame) -> dict:
    """The spread of an entry's mean acceptance lengths across its evaluations (history rows)."""
    values = history["mean_acceptance_length"].to_numpy(dtype=float, na_value=np.nan) if len(history) else np.array([])
    values = values[~np.isnan(values)]
    n = int(len(values))
    out = {"n": n, "mean": None, "sd": None, "min": None, "max": None, "reason": None}
    if n:
        out.update(mean=float(values.mean()), min=float(values.min()), max=float(values.max()))
    if n < 2:
        out["reason"] = f"{n} evaluation(s) with a mean acceptance length: a spread needs 2"
    else:
        out["sd"] = float(np.std(values, ddof=1))
    return out


def with_pass_spread(home: str | os.PathLike | None, history: pd.DataFrame) -> pd.DataFrame:
    """`history` (board/history.py rows) with PASS_COLUMNS beside its mean acceptance length."""
    if history.empty:
        return history.assign(**{c: pd.Series(dtype=object) for c in PASS_COLUMNS[1:]})
    spread = pass_spread(pass_acceptance(home, history["evaluation_id"]), history)
    return history.merge(spread, on="evaluation_id", how="left")
