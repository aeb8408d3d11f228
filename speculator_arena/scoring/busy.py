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
    either is missing); `chunk_group`, `times`, `toks`: the chunks of counted requests (the
    tokens of others zeroed). The runner's times are the epoch's seconds, where
    `_keyed_windows` applies (one sort of the requests' events, each chunk placed among them by
    one search, about 1.7x faster at the protocol's scale than sorting the chunks with them:
    docs/benchmarks/scoring.md); any other times (near zero, negative) take `_sorted_windows`.
    Both give the same seconds and tokens to the last bit (tests/scoring/test_busy_scan.py).
    """
    keyed = _keyed_windows(req_group, sent, end, lanes, chunk_group, times, toks)
    if keyed is not None:
        return keyed
    return _sorted_windows(req_group, sent, end, lanes, chunk_group, times, toks)


def _keyed_windows(req_group, sent, end, lanes, chunk_group, times, toks):
    """`pass_windows` by int64 keys (group, time, kind): None where the key cannot hold them.

    A non-negative double's bits, read as an int64, order exactly as the doubles do, so the
    time's bits less the batch's smallest (plus one: code 0 is each group's sentinel), shifted
    over two kind bits (start 0, chunk 1, end 2: starts before chunks before ends at equal
    times) under the group's bits, is one int64 per event that sorts exactly as
    `_sorted_windows`'s lexsort of (group, time, kind). Only the requests' starts and ends (and a
    sentinel per group, below them) are sorted; each chunk's count in flight is the running
    count of the last event below its key (starts <= t - ends < t), found by one search, and the
    sentinel makes that event one of its own group's. Missing requests (+inf) take the largest
    time code; a chunk time that is NaN or -inf takes code 0 (nothing in flight, as its place
    after (NaN) or before (-inf) every event of its group gives in the sort).
    """
    n_groups = len(lanes)
    lanes = np.asarray(lanes)
    if not len(sent):
        return None
    fin_r = np.isfinite(sent) & np.isfinite(end)
    if not (np.isposinf(sent[~fin_r]).all() and np.isposinf(end[~fin_r]).all()):
        return None
    fin_c = np.isfinite(times)
    finite = [np.ascontiguousarray(a, dtype=np.float64).view(np.int64) for a in (sent[fin_r], end[fin_r], times[fin_c])]
    finite = [a for a in finite if len(a)]
    if not finite:
        return None
    lo = min(a.min() for a in finite) - 1  # code 0: the groups' sentinels
    if lo < -1:  # a negative time or -0.0: the bits order them backwards
        return None
    span = int(max(a.max() for a in finite) - lo) + 2  # the last code: +inf
    tbits = span.bit_length() + 2
    if tbits + max(1, int(n_groups).bit_length()) > 62:
        return None
    top = np.int64(span - 1)
    shift = np.int64(tbits)

    def codes(x, fin, other):
        out = np.ascontiguousarray(x, dtype=np.float64).view(np.int64) - lo
        if not fin.all():
            out[~fin] = other
        return out << 2

    g = np.asarray(req_group).astype(np.int64, copy=False) << shift
    ev = np.concatenate([g | codes(sent, fin_r, top), g | codes(end, fin_r, top) | 2, np.arange(n_groups) << shift])
    ev.sort()
    low = ev & ((np.int64(1) << shift) - 1)
    running = np.cumsum(np.where(low == 0, 0, 1 - (ev & 3)))  # start +1, end -1, sentinel 0
    eg = ev >> shift
    # -- seconds: the segments between consecutive event times while >= lanes are in flight
    real = low != 0
    code = low[real] >> 2
    v = np.where(code == top, np.inf, (code + lo).view(np.float64))
    secs = _segment_seconds(eg[real], v, running[real], lanes, n_groups)
    tokens = np.zeros(n_groups, dtype=np.int64)
    if len(times):
        # -- tokens: the chunks that arrive while >= lanes are in flight
        cg = np.asarray(chunk_group).astype(np.int64, copy=False)
        key = codes(times, fin_c, 0)
        if not fin_c.all():
            key[np.isposinf(times)] = top << 2
        key |= 1
        key |= cg << shift
        at = np.searchsorted(ev, key)
        at -= 1  # the last event below: the sentinel at least
        busy = (running - lanes[eg])[at] >= 0
        tokens = np.bincount(cg, weights=toks * busy, minlength=n_groups).astype(np.int64)
    return secs, tokens


def _segment_seconds(g, v, running, lanes, n_groups) -> np.ndarray:
    """Busy seconds per group from its request events sorted by (group, time, start before end):
    `g` their groups, `v` their times, `running` the count in flight after each event, 0
    between groups. The seconds of each group are summed with numpy's own sum over that group's
    segments in time order, exactly as the per-pass computation summed them, so the float
    result is the same to the last bit."""
    n = len(v)
    if not n:
        return np.zeros(n_groups)
    new_group = np.empty(n, dtype=bool)
    new_group[0] = True
    new_group[1:] = g[1:] != g[:-1]
    new_run = new_group.copy()
    new_run[1:] |= v[1:] != v[:-1]
    run_last = np.append(np.flatnonzero(new_run)[1:] - 1, n - 1)
    inflight = running[run_last[np.cumsum(new_run) - 1]]
    last_of_group = np.append(new_group[1:], True)
    with np.errstate(invalid="ignore"):  # inf - inf between two missing requests: NaN, not taken
        seg = np.append(v[1:] - v[:-1], np.nan)
        take = (inflight >= lanes[g]) & np.isfinite(seg) & ~last_of_group
    sel_seg, sel_g = seg[take], g[take]
    cuts = np.searchsorted(sel_g, np.arange(n_groups + 1))
    return np.array([sel_seg[cuts[k] : cuts[k + 1]].sum() for k in range(n_groups)], dtype=float)


def _sorted_windows(req_group, sent, end, lanes, chunk_group, times, toks):
    """`pass_windows` for any times: the requests' events sorted by (group, time, start before
    end), then again with the chunks among them (starts before chunks before ends at equal
    times). One sort of every group's events replaces a handful of sorts and binary searches
    per pass (15,660 passes cost 0.7 s one by one). Every group's starts and ends balance, so
    the running count is 0 between groups."""
    n_groups = len(lanes)
    lanes = np.asarray(lanes)
    vals = np.concatenate([sent, end])
    grp = np.concatenate([req_group, req_group])
    step = np.concatenate([np.ones(len(sent), np.int64), -np.ones(len(end), np.int64)])
    order = np.lexsort((vals, grp))
    secs = _segment_seconds(grp[order], vals[order], np.cumsum(step[order]), lanes, n_groups)
    tokens = np.zeros(n_groups, dtype=np.int64)
    if len(times):
        vals = np.concatenate([sent, times, end])
        grp = np.concatenate([req_group, chunk_group, req_group])
        kind = np.concatenate(
            [np.zeros(len(sent), np.int8), np.ones(len(times), np.int8), np.full(len(end), 2, np.int8)]
        )
        order = np.lexsort((kind, vals, grp))
        kind_s, g = kind[order], grp[order]
        running = np.cumsum(np.where(kind_s == 0, 1, np.where(kind_s == 2, -1, 0)))
        is_chunk = kind_s == 1
        chunk_g = g[is_chunk]
        busy = running[is_chunk] >= lanes[chunk_g]
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
