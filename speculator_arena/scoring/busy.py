"""The busy window (SCORING.md) for every pass at once, with numpy.

Why not only SQL: the definition is the view `pass_busy` (sql/21_scores_pass_busy.sql), a
window-function sweep over every chunk. At the protocol's scale (about 90 million chunk events
for 1,000 evaluations) that sort dominates scoring on a 2-core machine, while the same numbers
follow from two binary searches per pass: in flight at time t = starts <= t - ends < t (starts before chunks before ends at equal times, closed intervals).
tests/scoring checks that this and the view agree.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc


def busy_windows(table: pa.Table) -> pd.DataFrame:
    """Per (evaluation_id, pass_id, engine): busy_seconds and busy_tokens.

    `table` holds one row per timed request, in any order (sql/busy_inputs.sql).
    """
    cols = ["evaluation_id", "pass_id", "engine", "busy_seconds", "busy_tokens"]
    n = table.num_rows
    if n == 0:
        return pd.DataFrame(columns=cols)
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
    sent = table["sent_at"].to_numpy(zero_copy_only=False).astype(float)[perm]
    end = table["end_at"].to_numpy(zero_copy_only=False).astype(float)[perm]
    # a request without a start or an end time is no event at all (as in the SQL view):
    # at +inf its start and end cancel at every finite time
    missing = np.isnan(sent) | np.isnan(end)
    sent[missing] = np.inf
    end[missing] = np.inf
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
        S = np.sort(sent[a:b])
        E = np.sort(end[a:b])
        L = lanes[a]
        # every event time, repeated ones included: a repeat adds a segment of length 0
        pts = np.sort(np.concatenate([S, E]))
        inflight = np.searchsorted(S, pts[:-1], "right") - np.searchsorted(E, pts[:-1], "right")
        seg = np.diff(pts)
        sec_out[j] = float(seg[(inflight >= L) & np.isfinite(seg)].sum())
        ca, cb = new_off[a], new_off[b]
        if cb > ca:
            T = times[ca:cb]
            inflight_c = np.searchsorted(S, T, "right") - np.searchsorted(E, T, "left")
            tok_out[j] = int(toks[ca:cb][inflight_c >= L].sum())
    first = pa.array(perm[starts_idx])
    return pd.DataFrame({
        "evaluation_id": table["evaluation_id"].take(first).to_pylist(),
        "pass_id": table["pass_id"].take(first).to_pylist(),
        "engine": table["engine"].take(first).to_pylist(),
        "busy_seconds": sec_out,
        "busy_tokens": tok_out,
    })
