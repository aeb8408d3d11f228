"""T's inputs for one evaluation: the speed-up s on each workload, and the change in generated length.

Definitions (the arena's reading of the rules' "throughput over BF16 in the same pod"):
- batch workloads (serve, long): speed = the ok requests' output tokens / the sum over passes of
  (the pass's last finished_at - its first sent_at), s = speed_candidate / speed_stock;
- one request at a time (interactive): TPOT = sum(finished_at - first_token_at) / sum(output_tokens
  - 1) over ok requests, s = TPOT_stock / TPOT_candidate;
- any failed (ok false) candidate request on a workload makes its s = 0: a candidate gains nothing
  by failing the requests that would have cost it time;
- dL = (the candidate's generated tokens - the stock's) / the stock's, over the accuracy items both
  engines answered in the same run (lowb_items, paired by run and item).
Every s or dL that lacks its rows is NaN with the reason.
"""

from __future__ import annotations

import math

import pandas as pd

from speculator_arena.protocol.lowb import LowbProtocol


def _engine_row(rows: list[dict], engine: str, workload: str):
    return next((r for r in rows if r["engine"] == engine and r["workload"] == workload), None)


def _rate(row, single: bool) -> float:
    """Time per output token (single) or output tokens per second; NaN when not measurable."""
    if single:
        seconds, tokens = row["decode_seconds"], row["decode_tokens"]
        if pd.isna(seconds) or pd.isna(tokens) or tokens <= 0 or seconds <= 0:
            return math.nan
        return float(seconds) / float(tokens)
    tokens, seconds = row["ok_tokens"], row["pass_seconds"]
    if pd.isna(tokens) or pd.isna(seconds) or seconds <= 0 or tokens <= 0:
        return math.nan
    return float(tokens) / float(seconds)


def speedups(rows: list[dict], proto: LowbProtocol) -> tuple[dict[str, float], str | None]:
    """s per throughput workload from one evaluation's rows of sql/workload_requests.sql, and the
    first reason one is NaN."""
    out: dict[str, float] = {}
    reason = None
    for w in proto.throughput.workloads:
        single = w in proto.throughput.single_speed_workloads
        cand, stock = _engine_row(rows, "candidate", w), _engine_row(rows, "stock", w)
        if cand is None or stock is None:
            out[w] = math.nan
            reason = reason or f"T: no lowb_requests rows of the {'candidate' if cand is None else 'stock'} on {w}"
            continue
        if cand["failed"] > 0:
            out[w] = 0.0
            continue
        rc, rs = _rate(cand, single), _rate(stock, single)
        if math.isnan(rc) or math.isnan(rs):
            out[w] = math.nan
            reason = (
                reason
                or f"T: no ok request with tokens and time of the {'candidate' if math.isnan(rc) else 'stock'} on {w}"
            )
            continue
        out[w] = rs / rc if single else rc / rs
    return out, reason


def length_change(row) -> tuple[float, str | None]:
    """dL from one evaluation's row of sql/length_change.sql (None: no pair)."""
    if row is None or pd.isna(row["stock_tokens"]) or row["stock_tokens"] <= 0:
        return math.nan, "dL: no accuracy item answered by both engines"
    return (float(row["candidate_tokens"]) - float(row["stock_tokens"])) / float(row["stock_tokens"]), None
