"""The rules' worked example (Qwen3.5-27B, the best participant), recomputed by the scorer's own functions.

Why: the rules promise that "every rule and constant on this page is quoted from the code that
scores"; the example's axes are computed here by axes.py, the functions score.py calls, with the
constants of the protocol version, from the figures the rules quote (to 2 or 3 digits, so the axes
agree with the rules' to that rounding: T 1.996 against the quoted 1.998, P 4.765 against 4.762).
"""

from __future__ import annotations

from speculator_arena.protocol.lowb import load_lowb_protocol
from speculator_arena.scoring.lowb.accuracy import accuracy
from speculator_arena.scoring.lowb.axes import capacity_axis, geometric_mean, lowbscore, throughput_axis

QUOTED = {
    "s": {"serve": 2.04, "interactive": 1.83, "long": 2.13},
    "length_change": -0.014,
    "capacity_ratios": {"serve": 4.83, "long": 4.70},
    "drop": 0.56,
    "kl": 0.0267,
    "axes": {"T": 1.998, "P": 4.762, "A": 0.934},
    "score": 2.071,
}


def worked_example(version: int | None = None) -> dict[str, float]:
    """The example's figures: T, P, D, A, g and the LowBScore from the quoted measurements, and the
    score from the rules' quoted (rounded) axes."""
    proto = load_lowb_protocol(version)
    s = [QUOTED["s"][w] for w in proto.throughput.workloads]
    t = throughput_axis(s, QUOTED["length_change"])
    p = capacity_axis([QUOTED["capacity_ratios"][w] for w in proto.capacity.workloads])
    distance, a = accuracy(QUOTED["drop"], QUOTED["kl"], proto)
    exps = proto.score.axis_exponents
    axes = QUOTED["axes"]
    return {
        "speed_gmean": geometric_mean(s),
        "T": t,
        "P": p,
        "D": distance,
        "A": a,
        "g": 1.0,
        "lowbscore": lowbscore(1.0, t, p, a, exps),
        "lowbscore_from_quoted_axes": lowbscore(1.0, axes["T"], axes["P"], axes["A"], exps),
    }
