"""The busy window (SCORING.md) for every pass at once, with numpy.

Why not only SQL: the definition is the view `pass_busy` (sql/21_scores_pass_busy.sql), a
window-function sweep over every chunk. At the protocol's scale (about 90 million chunk events
for 1,000 evaluations) that sort dominates scoring on a 2-core machine, while the same numbers
follow from binary searches per pass: in flight at time t = starts <= t - ends < t (starts
before chunks before ends at equal times, closed intervals). tests/scoring checks that this and
the view agree.

Two entry points share one per-pass kernel (`_pass_window`):
- `busy_windows(table)`: from the rows of sql/busy_inputs.sql (one Arrow table in memory);
- `busy_scan.busy_windows_from_parquet`: the scorer's fast path, which reads each evaluation's
  Parquet directly, in threads, so the chunk lists never pass through DuckDB or Python lists.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

COLUMNS = ["evaluation_id", "pass_id", "engine", "busy_seconds", "busy_tokens"]


def _pass_window(sent: np.ndarray, end: np.ndarray, lanes, times: np.ndarray, toks: np.ndarray) -> tuple[float, int]:
    """(busy seconds, busy tokens) of one pass and engine.

    `sent`/`end`: every request's start and end (+inf both when either is missing: such a
    request is no event at all, its start and end cancel at every finite time); `times`/`toks`:
    the chunks of its counted requests. The seconds are summed over every event time, repeats
    included (a repeat adds a segment of length 0), in the order the first implementation
    summed them, so the float result is the same to the last bit.
    """
    S = np.sort(sent)
    E = np.sort(end)
    pts = np.sort(np.concatenate([S, E]))
    inflight = np.searchsorted(S, pts[:-1], "right") - np.searchsorted(E, pts[:-1], "right")
    seg = np.diff(pts)
    secs = float(seg[(inflight >= lanes) & np.isfinite(seg)].sum())
    if len(times) == 0:
        return secs, 0
    # A chunk at t is in the window when starts <= t - ends < t >= lanes. One binary search per
    # chunk instead of two: locate t among the distinct event times U; at t == U[k] the count
    # is starts <= U[k] - ends < U[k], strictly between U[k] and U[k+1] it is starts <= U[k] -
    # ends <= U[k]; before U[0] nothing is in flight. NaN sorts last and lands on "strictly
    # after the last event" (count 0), as it did with two searches.
    U = np.unique(pts)
    s_le = np.searchsorted(S, U, "right")
    at_point = np.empty(len(U) + 1, dtype=bool)
    between = np.empty(len(U) + 1, dtype=bool)
    at_point[0] = between[0] = 0 >= lanes
    at_point[1:] = (s_le - np.searchsorted(E, U, "left")) >= lanes
    between[1:] = (s_le - np.searchsorted(E, U, "right")) >= lanes
    k = np.searchsorted(U, times, "right")          # index into the padded arrays (0: before U[0])
    U_pad = np.concatenate([[np.nan], U])
    busy = np.where(U_pad[k] == times, at_point[k], between[k])
    return secs, int(toks[busy].sum())


def busy_windows(table: pa.Table) -> pd.DataFrame:
    """Per (evaluation_id, pass_id, engine): busy_seconds and busy_tokens.

    `table` holds one row per timed request, in any order (sql/busy_inputs.sql).
    """
    n = table.num_rows
    if n == 0:
        return pd.DataFrame(columns=COLUMNS)
    key = pc.binary_join_element_wise(table["evaluation_id"], table["pass_id"], table["engine"], "\x1f")
    key = key.combine_chunks() if isinstance(key, pa.ChunkedArray) else key
    codes = key.dictionary_encode().indices.to_numpy(zero_copy_only=False)
    # Group rows by pass here rather than with ORDER BY in SQL: sorting rows that carry chunk
    # lists costs DuckDB more than the whole sweep (23 s against 8 s at 1,000 evaluations).
    grouped = 1 + np.count_nonzero(np.diff(codes)) == len(np.unique(codes))
    perm = np.arange(n) if grouped else np.argsort(codes, kind="stable")
    codes_s = codes[perm]
    bounds = np.flatnonzero(np.diff(codes_s)) + 1
    starts_idx = np.concatenate([[0], bounds]).astype(np.int64)
    stops_idx = np.concatenate([bounds, [n]]).astype(np.int64)
    sent, end = request_bounds(table["sent_at"], table["end_at"])
    sent, end = sent[perm], end[perm]
    lanes = table["lanes"].to_numpy(zero_copy_only=False)[perm]
    counted = table["counted"].to_numpy(zero_copy_only=False).astype(bool)
    ct = table["chunk_times"].combine_chunks()
    ck = table["chunk_tokens"].combine_chunks()
    offsets = ct.offsets.to_numpy().astype(np.int64)
    offsets = offsets - offsets[0]
    times = ct.flatten().to_numpy()
    lengths = np.diff(offsets)
    # tokens of requests that do not count are zeroed instead of masked out
    toks = ck.flatten().to_numpy() * np.repeat(counted, lengths)
    if grouped:
        new_off = offsets
    else:
        new_lengths = lengths[perm]
        new_off = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(new_lengths, out=new_off[1:])
        gather = np.repeat(offsets[:-1][perm] - new_off[:-1], new_lengths) + np.arange(new_off[-1])
        times = times[gather]
        toks = toks[gather]
        del gather
    sec_out = np.zeros(len(starts_idx))
    tok_out = np.zeros(len(starts_idx), dtype=np.int64)
    for j, (a, b) in enumerate(zip(starts_idx.tolist(), stops_idx.tolist())):
        ca, cb = new_off[a], new_off[b]
        sec_out[j], tok_out[j] = _pass_window(sent[a:b], end[a:b], lanes[a], times[ca:cb], toks[ca:cb])
    first = pa.array(perm[starts_idx])
    return pd.DataFrame({
        "evaluation_id": table["evaluation_id"].take(first).to_pylist(),
        "pass_id": table["pass_id"].take(first).to_pylist(),
        "engine": table["engine"].take(first).to_pylist(),
        "busy_seconds": sec_out,
        "busy_tokens": tok_out,
    })


def request_bounds(sent_at, end_at) -> tuple[np.ndarray, np.ndarray]:
    """Start and end times as float arrays, +inf both where either is missing (no event)."""
    sent = np.asarray(sent_at.to_numpy(zero_copy_only=False), dtype=float).copy()
    end = np.asarray(end_at.to_numpy(zero_copy_only=False), dtype=float).copy()
    missing = np.isnan(sent) | np.isnan(end)
    sent[missing] = np.inf
    end[missing] = np.inf
    return sent, end
