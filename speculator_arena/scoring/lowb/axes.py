"""LowBScore's axes and score as plain functions of numbers.

Why plain functions: the scorer (score.py) and the rules' worked example (example.py) call the
same code, so the example recomputed on a submission's page is the scorer's arithmetic, not a copy
of it. Each returns NaN when an input is NaN (a figure that lacks its rows stays blank, never
becomes a smaller or larger number); the callers say why.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def geometric_mean(values: Sequence[float]) -> float:
    """The geometric mean; 0 when any value is 0 (a workload that failed earns nothing)."""
    if any(math.isnan(v) for v in values) or not values:
        return math.nan
    if any(v <= 0 for v in values):
        return 0.0
    return math.exp(sum(math.log(v) for v in values) / len(values))


def throughput_axis(speedups: Sequence[float], length_change: float) -> float:
    """T = (s_serve * s_interactive * s_long)^(1/3) / max(1, 1 + dL): longer answers divide T,
    shorter ones earn nothing."""
    if math.isnan(length_change):
        return math.nan
    return geometric_mean(speedups) / max(1.0, 1.0 + length_change)


def requests_held(reserved: float, idle: float, peak: float, running: float) -> float:
    """c = (M - idle) / k with k = (peak - idle) / running: how many requests the memory BF16's run
    reserved (M) holds, less the engine's weights and other memory (idle), at the memory one running
    request holds (k). NaN when k is not positive or running is not (no memory per request to divide)."""
    if any(math.isnan(x) for x in (reserved, idle, peak, running)) or running <= 0:
        return math.nan
    per_request = (peak - idle) / running
    if per_request <= 0:
        return math.nan
    return (reserved - idle) / per_request


def capacity_axis(ratios: Sequence[float]) -> float:
    """P = (c_serve / c'_serve * c_long / c'_long)^(1/2): the geometric mean of the capacity ratios."""
    return geometric_mean(ratios)


def accuracy_distance(drop: float, kl: float, drop_weight: float, kl_weight: float, points_per_nat: float) -> float:
    """D = 0.79 * drop + 0.21 * 42.8 * KL, in points."""
    return drop_weight * drop + kl_weight * points_per_nat * kl


def accuracy_axis(distance: float, scale: float) -> float:
    """A = exp(-max(D, 0) / 10): no drift keeps 1, and A never exceeds 1."""
    if math.isnan(distance):
        return math.nan
    return math.exp(-max(distance, 0.0) / scale)


def drop_upper_bound(mean: float, sd: float, n: int, z: float) -> float:
    """The one-sided upper bound on a domain's paired drop: mean + z * sd / sqrt(n) (NaN under 2 items)."""
    if n < 2 or math.isnan(mean) or math.isnan(sd):
        return math.nan
    return mean + z * sd / math.sqrt(n)


def speed_gate_statistic(speed_gmean: float, z: float, noise: float, workloads_root: int) -> float:
    """The gains' geometric mean less z * noise / sqrt(workloads): shown no slower than the floor."""
    return speed_gmean - z * noise / math.sqrt(workloads_root)


def lowbscore(g: float, t: float, p: float, a: float, exponents: dict[str, float]) -> float:
    """LowBScore = g * T^(1/3) * P^(1/3) * A^(1/3); g = 0 (a contract or engine rule missed) scores 0
    whatever the axes."""
    if g == 0:
        return 0.0
    if any(math.isnan(x) for x in (g, t, p, a)):
        return math.nan
    return g * t ** exponents["T"] * p ** exponents["P"] * a ** exponents["A"]
