"""The dev/test gap flag (SCORING.md "Dev/test gap flag"): per task and account, whether the
last scored test SpecScore falls below (1 - gap) x the last scored dev SpecScore. A flag, never
a score: it is shown beside the evaluations and changes no number.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def gap_flags(ev: pd.DataFrame, lim_e: pd.DataFrame) -> None:
    """Per task and account: last scored test SpecScore < (1 - gap) x last scored dev SpecScore.

    Sets `gap_flag` and `gap_detail` on every evaluation of a task and account that has both a
    scored dev and a scored test evaluation (blank elsewhere); `lim_e`: each row's task limits,
    row for row with `ev`. Ties in created_at are broken by the rows' order (a stable sort).
    """
    ev["gap_flag"] = pd.array([pd.NA] * len(ev), dtype="boolean")
    ev["gap_detail"] = None
    rows = np.flatnonzero(ev["specscore"].notna() & ev["task_id"].notna() & ev["account_id"].notna())
    if not len(rows):
        return
    scored = ev.iloc[rows]
    group = scored.groupby(["task_id", "account_id"], sort=False).ngroup().to_numpy()
    first = np.unique(group, return_index=True)[1]  # each group's first scored row
    keys, first_row = scored[["task_id", "account_id"]].iloc[first], rows[first]
    dev, test = (_last_scores(scored, group, split) for split in ("dev", "test"))
    both = np.flatnonzero(pd.notna(dev) & pd.notna(test))
    if not len(both):
        return
    gap = lim_e["dev_test_gap"].to_numpy(dtype=float)[first_row[both]]
    flags, details = [], []
    for g, d, t in zip(gap.tolist(), dev[both].tolist(), test[both].tolist()):
        flags.append(t < (1.0 - g) * d)
        details.append(f"last test {t:.4f} vs last dev {d:.4f} (flag below {(1 - g) * d:.4f})")
    flagged = pd.MultiIndex.from_frame(keys.iloc[both])
    hit = flagged.get_indexer(pd.MultiIndex.from_frame(ev[["task_id", "account_id"]]))
    on = hit >= 0
    if on.any():
        ev.loc[on, "gap_flag"] = np.array(flags, dtype=bool)[hit[on]]
        ev.loc[on, "gap_detail"] = np.array(details, dtype=object)[hit[on]]


def _last_scores(scored: pd.DataFrame, group: np.ndarray, split: str) -> np.ndarray:
    """Per group, the SpecScore of its last `split` evaluation by created_at (NaN where it has none).

    A group whose latest created_at is unique and never blank takes that row; the others (ties,
    blanks) are sorted stably by created_at (blanks last) and the last row is taken."""
    out = np.full(group.max() + 1, np.nan)
    sel = (scored["split"] == split).to_numpy(dtype=bool, na_value=False)
    if not sel.any():
        return out
    sub, g = scored[sel], group[sel]
    created = sub["created_at"]
    latest = created.groupby(g).transform("max")
    at_latest = (created == latest).to_numpy()
    clear = (pd.Series(at_latest).groupby(g).transform("sum").to_numpy() == 1) & ~created.isna().groupby(g).transform(
        "any"
    ).to_numpy()
    take = clear & at_latest
    out[g[take]] = sub["specscore"].to_numpy(dtype=float)[take]
    for k in np.unique(g[~clear]):
        out[k] = float(sub[g == k].sort_values("created_at", kind="stable")["specscore"].iloc[-1])
    return out
