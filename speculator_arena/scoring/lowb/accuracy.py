"""A's inputs for one evaluation: the paired drop per domain and its upper bound, drop, D and A.

Definitions (the arena's reading of the rules' "Accuracy kept"):
- per domain, d = 100 * (score_stock - score_candidate) for each (run, item) both engines have a row
  for, the stock having answered (a candidate's unanswered item scores 0: it gains nothing by not
  answering); the domain's drop is the mean of d, its upper bound mean + 1.645 * sd(d, ddof 1) / sqrt(n);
- drop = the mean of the gated domains' drops (every gated domain present weighs the same);
- KL = the mean over every KL probe position both engines answered of kl.kl_topk;
- D = 0.79 * drop + 0.21 * 42.8 * KL; A = exp(-max(D, 0) / 10).
"""

from __future__ import annotations

import math

import pandas as pd

from speculator_arena.protocol.lowb import LowbProtocol
from speculator_arena.scoring.lowb.axes import accuracy_axis, accuracy_distance, drop_upper_bound


def domain_rows(evaluation_id: str, drops: list[dict], proto: LowbProtocol) -> list[dict]:
    """One row per domain with items: its drop, upper bound, n, and whether the protocol gates it."""
    z = proto.gates.accuracy.z_one_sided
    rows = []
    for r in drops:
        n = int(r["n"])
        sd = float(r["sd"]) if not pd.isna(r["sd"]) else math.nan
        rows.append(
            {
                "evaluation_id": evaluation_id,
                "domain": r["domain"],
                "gated": bool(proto.domains[r["domain"]].gated) if r["domain"] in proto.domains else False,
                "n": n,
                "drop": float(r["drop"]),
                "sd": sd,
                "upper": drop_upper_bound(float(r["drop"]), sd, n, z),
            }
        )
    return rows


def mean_drop(domains: list[dict]) -> tuple[float, str | None]:
    gated = [d["drop"] for d in domains if d["gated"]]
    if not gated:
        return math.nan, "A: no item of a gated domain answered by both engines"
    return sum(gated) / len(gated), None


def accuracy(drop: float, kl: float, proto: LowbProtocol) -> tuple[float, float]:
    """(D, A) from drop and KL, with the version's weights."""
    acc = proto.accuracy
    distance = accuracy_distance(drop, kl, acc.drop_weight, acc.kl_weight, acc.points_per_nat)
    return distance, accuracy_axis(distance, acc.scale)
