"""P's inputs for one evaluation: how many of a workload's requests each engine holds at once.

Definitions (the arena's reading of the rules' Profit axis), on each capacity workload w (serve, long):
- idle_e = the median of engine e's idle memory samples (its weights and other memory);
- peak_e,w = the largest of its pass samples on w; running_e,w = the most of its requests running
  at once (first_token_at <= t < finished_at) in any of its passes of w;
- k_e,w = (peak_e,w - idle_e) / running_e,w: the KV cache and state one running request holds;
- M_w = peak_stock,w (the memory BF16's run reserved); c_e,w = (M_w - idle_e) / k_e,w; c'_w = c_stock,w.
So an engine that runs fewer requests at once and queues the rest holds the same memory per running
request and earns no capacity by it. A k <= 0 or missing samples leave P NaN with the reason
(never a smaller or larger number).
"""

from __future__ import annotations

import math

import pandas as pd

from speculator_arena.protocol.lowb import LowbProtocol
from speculator_arena.scoring.lowb.axes import capacity_axis, requests_held


def _value(rows: list[dict], column: str, **match) -> float:
    hit = next((r for r in rows if all(r[k] == v for k, v in match.items())), None)
    return math.nan if hit is None or pd.isna(hit[column]) else float(hit[column])


def capacities(memory: list[dict], running: list[dict], proto: LowbProtocol) -> tuple[dict, str | None]:
    """Per capacity workload: c of each engine and the ratio c / c'; the first reason one is NaN."""
    out: dict[str, dict[str, float]] = {}
    reason = None
    for w in proto.capacity.workloads:
        reserved = _value(memory, "bytes", engine="stock", phase="pass", workload=w)
        held = {}
        for e in ("candidate", "stock"):
            idle = _value(memory, "bytes", engine=e, phase="idle")
            peak = _value(memory, "bytes", engine=e, phase="pass", workload=w)
            at_once = _value(running, "most_at_once", engine=e, workload=w)
            held[e] = requests_held(reserved, idle, peak, at_once)
            if math.isnan(held[e]) and reason is None:
                if math.isnan(idle) or math.isnan(peak) or math.isnan(reserved):
                    reason = f"P: no {'idle' if math.isnan(idle) else 'pass'} memory samples of the {e} on {w}"
                elif math.isnan(at_once) or at_once <= 0:
                    reason = f"P: no request of the {e} ran on {w}"
                else:
                    reason = f"P: k <= 0 for the {e} on {w} (its pass peak is not above its idle memory)"
        ratio = held["candidate"] / held["stock"] if held["stock"] and not math.isnan(held["stock"]) else math.nan
        out[w] = {"c": held["candidate"], "c_bf16": held["stock"], "ratio": ratio}
    return out, reason


def capacity(per_workload: dict) -> float:
    return capacity_axis([v["ratio"] for v in per_workload.values()])
