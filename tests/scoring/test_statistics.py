import math

import numpy as np
import pytest
from synthetic import busy_window

from speculator_arena.scoring.statistics import (
    cluster_ratio,
    cluster_ratio_direct,
    percentile,
    two_sided_fails,
)


def test_cluster_se_hand_case_and_sums_agree_with_direct():
    y, n = np.array([1.0, 2.0, 3.0]), np.array([2.0, 2.0, 4.0])
    # est = 6/8; residuals -0.5, 0.5, 0 -> sum of squares 0.5; SE = sqrt(3/2 * 0.5) / 8
    est, se = cluster_ratio_direct(y, n)
    assert est == 0.75
    assert se == pytest.approx(math.sqrt(0.75) / 8)
    e2, s2 = cluster_ratio(y.sum(), n.sum(), (y * y).sum(), (y * n).sum(), (n * n).sum(), 3)
    assert float(e2) == pytest.approx(est) and float(s2) == pytest.approx(se)


def test_cluster_se_random_matches_direct():
    rng = np.random.default_rng(3)
    y, n = rng.normal(-5, 2, 50), rng.integers(5, 20, 50).astype(float)
    est, se = cluster_ratio_direct(y, n)
    e2, s2 = cluster_ratio(y.sum(), n.sum(), (y * y).sum(), (y * n).sum(), (n * n).sum(), 50)
    assert float(e2) == pytest.approx(est) and float(s2) == pytest.approx(se, rel=1e-9)


def test_cluster_se_blank_with_one_cluster():
    _, se = cluster_ratio(1.0, 2.0, 1.0, 2.0, 4.0, 1)
    assert math.isnan(float(se))


@pytest.mark.parametrize(
    "stat,se,fails",
    [(0.05, 0.01, True), (0.03, 0.01, False), (-0.05, 0.01, True), (-0.03, 0.01, False), (0.0, 0.0, False)],
)
def test_two_sided_rule_both_sides(stat, se, fails):
    f, low, high = two_sided_fails(stat, se, 0.02, 1.96)
    assert bool(f) is fails
    assert low == pytest.approx(stat - 1.96 * se) and high == pytest.approx(stat + 1.96 * se)


def test_percentile_linear_interpolation():
    assert percentile([4, 1, 3, 2], 0.5) == 2.5
    assert percentile([1, 2, 3, 4], 0.95) == pytest.approx(3.85)
    assert percentile([7], 0.99) == 7
    assert percentile([1, 2, 3, 4], 0.95) == pytest.approx(float(np.percentile([1, 2, 3, 4], 95)))


def test_busy_window_overlapping_and_gapped_lanes():
    # lane 0: [0, 10]; lane 1: [2, 5] then [6, 12] -> both busy on [2, 5] and [6, 10]: 7 s
    intervals = [(0, 10), (2, 5), (6, 12)]
    chunks = [(1, 5), (3, 5), (9, 5), (10, 5), (4, 2), (5, 3), (7, 4), (12, 4), (5.5, 100)]
    seconds, tokens = busy_window(intervals, 2, chunks)
    assert seconds == 7
    assert tokens == 5 + 5 + 5 + 2 + 3 + 4  # 1, 12 and the gap at 5.5 are outside
    assert busy_window(intervals, 3, chunks) == (0, 0)
