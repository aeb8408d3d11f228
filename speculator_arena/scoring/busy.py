"""The busy window (SCORING.md) for every pass at once, with numpy.

Why not only SQL: the definition is the view `pass_busy` (warehouse/sql/21_pass_busy.sql), a
window-function sweep over every chunk. At the protocol's scale (about 90 million chunk events
for 1,000 evaluations) that sort dominates scoring on a 2-core machine, while the same numbers
follow from counting events: in flight at time t = starts <= t - ends < t (starts before
chunks before ends at equal times, closed intervals). tests/scoring checks that this and the
view agree.

Two entry points share one kernel over every pass at once (`pass_windows`):
- `busy_windows(table)`: from the rows of sql/busy_inputs.sql (one Arrow table in memory);
- `busy_scan.busy_windows_from_batches`: the scorer's fast path, which reads the requests'
  Parquet directly in batches, in threads, so the chunk lists never pass through DuckDB or
  Python lists.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

COLUMNS = ["evaluation_id", "pass_id", "engine", "busy_seconds", "busy_tokens"]


def pass_windows(
    req_group: np.ndarray,
    sent: np.ndarray,
    end: np.ndarray,
    lanes: np.ndarray,
    chunk_group: np.ndarray,
    times: np.ndarray,
    toks: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """(busy seconds, busy tokens) of every pass and engine at once: `lanes[g]` of group g.

    `req_group`, `sent`, `end`: each request's group and its start and end (+inf both when
    either is missing: such a request is no event at all, its start and end cancel at every
    finite time); `chunk_group`, `times`, `toks`: the chunks of counted requests (the tokens of
    others zeroed). One sort of every group's events replaces a handful of sorts and binary
    searches per pass (15,660 passes cost 0.7 s one by one). In flight at an event time t:
    starts <= t - ends <= t (the run of equal times ends there); at a chunk time t: starts <= t
    - ends < t (starts before chunks before ends at equal times). The seconds of each group are
    summed with numpy's own sum over that group's segments in time order, exactly as the
    per-pass computation summed them, so the float result is the same to the last bit.
    """
    n_groups = len(lanes)
    lanes = np.asarray(lanes)
    # -- seconds: the segments between consecutive event times while >= lanes are in flight
    vals = np.concatenate([sent, end])
    grp = np.concatenate([req_group, req_group])
    step = np.concatenate([np.ones(len(sent), np.int64), -np.ones(len(end), np.int64)])
    order = np.lexsort((vals, grp))
    v, g, step = vals[order], grp[order], step[order]
    running = np.cumsum(step)
    n = len(v)
    secs = np.zeros(n_groups)
    if n:
        new_group = np.empty(n, dtype=bool)
        new_group[0] = True
        new_group[1:] = g[1:] != g[:-1]
        before = np.zeros(n_groups, np.int64)  # running count before each group's first event
        first = np.flatnonzero(new_group)
        before[g[first]] = running[first] - step[first]
        new_run = new_group.copy()
        new_run[1:] |= v[1:] != v[:-1]
        run_last = np.append(np.flatnonzero(new_run)[1:] - 1, n - 1)
        inflight = running[run_last[np.cumsum(new_run) - 1]] - before[g]
        last_of_group = np.append(new_group[1:], True)
        with np.errstate(invalid="ignore"):  # inf - inf between two missing requests: NaN, not taken
            seg = np.append(v[1:] - v[:-1], np.nan)
            take = (inflight >= lanes[g]) & np.isfinite(seg) & ~last_of_group
        sel_seg, sel_g = seg[take], g[take]
        cuts = np.searchsorted(sel_g, np.arange(n_groups + 1))
        secs = np.array([sel_seg[cuts[k] : cuts[k + 1]].sum() for k in range(n_groups)], dtype=float)
    tokens = np.zeros(n_groups, dtype=np.int64)
    if len(times):
        # -- tokens: the chunks that arrive while >= lanes are in flight
        vals = np.concatenate([sent, times, end])
        grp = np.concatenate([req_group, chunk_group, req_group])
        kind = np.concatenate(
            [np.zeros(len(sent), np.int8), np.ones(len(times), np.int8), np.full(len(end), 2, np.int8)]
        )
        order = np.lexsort((kind, vals, grp))
        kind_s, g = kind[order], grp[order]
        running = np.cumsum(np.where(kind_s == 0, 1, np.where(kind_s == 2, -1, 0)))
        new_group = np.empty(len(g), dtype=bool)
        new_group[0] = True
        new_group[1:] = g[1:] != g[:-1]
        before = np.zeros(n_groups, np.int64)
        first = np.flatnonzero(new_group)
        before[g[first]] = running[first] - np.where(kind_s[first] == 0, 1, np.where(kind_s[first] == 2, -1, 0))
        is_chunk = kind_s == 1
        chunk_g = g[is_chunk]
        count = running[is_chunk] - before[chunk_g]
        busy = count >= lanes[chunk_g]
        chunk_toks = np.concatenate([np.zeros(len(sent), toks.dtype), toks, np.zeros(len(end), toks.dtype)])[order][
            is_chunk
        ]
        tokens = np.bincount(chunk_g[busy], weights=chunk_toks[busy], minlength=n_groups).astype(np.int64)
    return secs, tokens


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
    req_group = np.repeat(np.arange(len(starts_idx)), stops_idx - starts_idx)
    sec_out, tok_out = pass_windows(
        req_group, sent, end, lanes[starts_idx], np.repeat(req_group, np.diff(new_off)), times, toks
    )
    first = pa.array(perm[starts_idx])
    return pd.DataFrame(
        {
            "evaluation_id": table["evaluation_id"].take(first).to_pylist(),
            "pass_id": table["pass_id"].take(first).to_pylist(),
            "engine": table["engine"].take(first).to_pylist(),
            "busy_seconds": sec_out,
            "busy_tokens": tok_out,
        }
    )


def request_bounds(sent_at, end_at) -> tuple[np.ndarray, np.ndarray]:
    """Start and end times as float arrays, +inf both where either is missing (no event)."""
    sent = np.asarray(sent_at.to_numpy(zero_copy_only=False), dtype=float).copy()
    end = np.asarray(end_at.to_numpy(zero_copy_only=False), dtype=float).copy()
    missing = np.isnan(sent) | np.isnan(end)
    sent[missing] = np.inf
    end[missing] = np.inf
    return sent, end
