"""The statistics of SCORING.md that SQL does badly, as small pure functions.

Why our own: each is a few lines of numpy whose exact form SCORING.md fixes (replies or pairs
as clusters with the R/(R-1) factor, the two-sided "beyond the bound" rule); a library's
estimator would differ in its small-sample factor. Every function works on whole arrays so
that the scorer evaluates 1,000 evaluations at once.
"""

from __future__ import annotations

import numpy as np


def cluster_ratio(sum_y, sum_n, sum_yy, sum_yn, sum_nn, clusters):
    """Ratio estimate Y/N with its cluster standard error, from per-group sums.

    SE = sqrt(R/(R-1) * sum_r (y_r - est * n_r)^2) / sum_r n_r, expanded as
    sum yy - 2 est sum yn + est^2 sum nn so whole groups are computed from sums at once.
    NaN where fewer than 2 clusters or no tokens.
    """
    sum_y, sum_n, sum_yy, sum_yn, sum_nn, clusters = (
        np.asarray(a, dtype=float) for a in (sum_y, sum_n, sum_yy, sum_yn, sum_nn, clusters)
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        est = np.where(sum_n > 0, sum_y / sum_n, np.nan)
        ss = sum_yy - 2 * est * sum_yn + est * est * sum_nn
        ss = np.maximum(ss, 0.0)
        se = np.where(clusters > 1, np.sqrt(clusters / (clusters - 1) * ss) / sum_n, np.nan)
    return est, se


def cluster_ratio_direct(y, n):
    """The same estimate from the cluster values themselves (the definition, for tests)."""
    y = np.asarray(y, dtype=float)
    n = np.asarray(n, dtype=float)
    r = len(y)
    est = y.sum() / n.sum()
    se = np.sqrt(r / (r - 1) * np.sum((y - est * n) ** 2)) / n.sum()
    return est, se


def two_sided_fails(stat, se, bound, z):
    """Fail when CI(stat) = stat +- z*SE lies entirely above +bound or entirely below -bound."""
    low, high = stat - z * se, stat + z * se
    return (low > bound) | (high < -bound), low, high


def percentile(values, q):
    """Linear interpolation between order statistics (numpy's default, DuckDB's quantile_cont)."""
    v = np.sort(np.asarray(values, dtype=float))
    if len(v) == 0:
        return float("nan")
    pos = (len(v) - 1) * q
    lo = int(np.floor(pos))
    hi = min(lo + 1, len(v) - 1)
    return float(v[lo] + (v[hi] - v[lo]) * (pos - lo))
