"""The scorer's fast path to the busy windows: each evaluation's request Parquet read directly.

Why: at the protocol's scale the chunk lists are most of the warehouse (about 90 million chunk
times and token counts for 1,000 evaluations). Passing them through DuckDB's join and into one
Arrow table cost as much as the sweep itself and held gigabytes at once; read here one
evaluation at a time, in a few threads (pyarrow and numpy release the GIL), only the columns
the window needs are decoded and memory stays at one evaluation per thread.

The rows are exactly those of sql/busy_inputs.sql (the view `staged_requests`): timed requests
(pass_id not 'warmup%') joined to their pass row on (pass_id, engine), `counted` = coalesce(done
AND output_tokens <= max_tokens AND sent_at < ends_at AND ended_at <= grace_ends_at, false)
with SQL's three-valued AND. Where that join would not be one pass row per request (duplicate
pass rows) the evaluation is handed back to the SQL path, so results never depend on which
path ran. The same read also yields the scalar columns of the staged requests (STAGED) that
every other query of the scorer reads, so the requests' Parquet is decoded once per scoring.
tests/scoring/test_busy_scan.py checks both against the views and busy_windows.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from speculator_arena.scoring.busy import COLUMNS, _pass_window
from speculator_arena.warehouse.schema import TABLES

_REQUEST_COLUMNS = ("pass_id", "engine", "sent_at", "last_token_at", "ended_at", "done", "output_tokens",
                    "max_tokens", "chunk_times", "chunk_tokens", "workload", "session_id", "turn", "first_token_at",
                    "usage_prompt_tokens", "cached_tokens")

# The scalar columns of the staged requests the scorer's queries use, in the order and types
# of sql/staged_requests_cached.sql: built here from the same read, so the requests' Parquet
# is decoded once for the busy windows and every other query.
STAGED = pa.schema([("evaluation_id", pa.string()), ("pass_id", pa.string()), ("engine", pa.string()),
                    ("workload", pa.string()), ("session_id", pa.string()), ("turn", pa.int64()),
                    ("sent_at", pa.float64()), ("first_token_at", pa.float64()), ("last_token_at", pa.float64()),
                    ("ended_at", pa.float64()), ("usage_prompt_tokens", pa.int64()), ("cached_tokens", pa.int64()),
                    ("output_tokens", pa.int64()), ("chunks", pa.int64()), ("counted", pa.bool_())])


class _NeedsSql(Exception):
    """This evaluation's rows fall outside what the fast path reproduces; use the SQL path."""


def _floats(col) -> np.ndarray:
    """A float column as numpy, null -> NaN; a stored NaN (which SQL orders above every number,
    unlike numpy) sends the evaluation to the SQL path."""
    arr = np.asarray(col.to_numpy(zero_copy_only=False), dtype=float)
    if col.null_count != np.count_nonzero(np.isnan(arr)):
        raise _NeedsSql()
    return arr


def _definitely(cond) -> np.ndarray:
    """SQL's coalesce(<condition>, false): true only where the condition is true and not null."""
    return pc.fill_null(cond, False).to_numpy(zero_copy_only=False).astype(bool)


def _part(path, pass_index: dict, lanes, ends, grace):
    """One Parquet part of the requests: (pass row per request, counted, sent, end, chunk lengths,
    chunk times, chunk tokens), over the requests that join a timed pass row."""
    pf = pq.ParquetFile(path, read_dictionary=["pass_id", "engine"])
    have = set(pf.schema_arrow.names)
    t = pf.read(columns=[c for c in _REQUEST_COLUMNS if c in have], use_threads=False)
    schema = TABLES["requests"]
    n = t.num_rows

    def col(name):
        if name not in have:
            return pa.nulls(n, schema.field(name).type)
        c = t[name].combine_chunks()
        return c if name in ("pass_id", "engine") else c.cast(schema.field(name).type)

    pid, eng = col("pass_id"), col("engine")
    if not isinstance(pid, pa.DictionaryArray):
        pid = pid.dictionary_encode()
    if not isinstance(eng, pa.DictionaryArray):
        eng = eng.dictionary_encode()
    # the pass row of each (pass_id, engine) combination present (the join on the small
    # dictionaries, not on every row); warm-up and unmatched rows get -1 (dropped, as by the join)
    p_vals, e_vals = pid.dictionary.to_pylist(), eng.dictionary.to_pylist()
    combo = np.full((len(p_vals) + 1, len(e_vals) + 1), -1, dtype=np.int64)
    for i, pv in enumerate(p_vals):
        for j, evv in enumerate(e_vals):
            if pv is not None and evv is not None and not pv.startswith("warmup"):
                combo[i, j] = pass_index.get((pv, evv), -1)
    pi = pid.indices.fill_null(len(p_vals)).to_numpy(zero_copy_only=False).astype(np.int64)
    ei = eng.indices.fill_null(len(e_vals)).to_numpy(zero_copy_only=False).astype(np.int64)
    rows = combo[pi, ei]
    keep = rows >= 0
    sent = _floats(col("sent_at"))
    last = _floats(col("last_token_at"))
    ended = _floats(col("ended_at"))
    out_t, max_t = col("output_tokens"), col("max_tokens")
    safe = np.where(keep, rows, 0)
    counted = (_definitely(col("done")) & _definitely(pc.less_equal(out_t, max_t))
               & (sent < ends[safe]) & (ended <= grace[safe]))
    end = np.where(np.isnan(last), ended, last)
    ct, ck = col("chunk_times"), col("chunk_tokens")
    ct_flat, ck_flat = ct.flatten(), ck.flatten()
    lengths = ct.value_lengths().fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    if ct_flat.null_count or ck_flat.null_count or not np.array_equal(
            lengths, ck.value_lengths().fill_null(0).to_numpy(zero_copy_only=False)):
        raise _NeedsSql()        # null chunk times, or lists of unequal length: SQL's unnest decides
    times, toks = ct_flat.to_numpy(), ck_flat.to_numpy()
    mask = pa.array(keep)
    staged = {name: (col(name).filter(mask) if name != "pass_id" and name != "engine" else None)
              for name in STAGED.names if name not in ("evaluation_id", "counted", "chunks")}
    staged["pass_id"] = pid.dictionary_decode().filter(mask)
    staged["engine"] = eng.dictionary_decode().filter(mask)
    staged["chunks"] = ct.value_lengths().cast(pa.int64()).filter(mask)      # len(NULL) is NULL, as in SQL
    staged["counted"] = pa.array(counted[keep])
    if not keep.all():
        chunk_keep = np.repeat(keep, lengths)
        times, toks = times[chunk_keep], toks[chunk_keep]
        rows, counted, sent, end, lengths = rows[keep], counted[keep], sent[keep], end[keep], lengths[keep]
    return rows, counted, sent, end, lengths, times, toks, staged


def _one_evaluation(files, passes: pa.Table) -> tuple[list, list, np.ndarray, np.ndarray]:
    """(pass_ids, engines, busy_seconds, busy_tokens) of one evaluation's passes."""
    empty = ([], [], np.zeros(0), np.zeros(0, dtype=np.int64), None)
    keys = list(zip(passes["pass_id"].to_pylist(), passes["engine"].to_pylist()))
    pass_index = {}
    for i, k in enumerate(keys):
        if None in k:
            continue
        if k in pass_index:      # two pass rows for one pass: the join would repeat requests
            raise _NeedsSql()
        pass_index[k] = i
    lanes = passes["lanes"].to_numpy(zero_copy_only=False)
    ends = _floats(passes["ends_at"])
    grace = _floats(passes["grace_ends_at"])
    parts = [_part(f, pass_index, lanes, ends, grace) for f in files]
    if not parts:
        return empty
    staged = pa.concat_tables([pa.table({n: (p[7][n] if n != "evaluation_id" else pa.nulls(len(p[7]["counted"]), pa.string()))
                                          for n in STAGED.names}, schema=STAGED) for p in parts])
    codes, counted, sent, end, lengths, times, toks = (np.concatenate([p[i] for p in parts]) for i in range(7))
    if len(codes) == 0:
        return empty[:4] + (staged,)
    sent, end = sent.copy(), end.copy()
    missing = np.isnan(sent) | np.isnan(end)
    sent[missing] = np.inf
    end[missing] = np.inf
    # tokens of requests that do not count are zeroed instead of masked out
    toks = toks * np.repeat(counted, lengths)
    if len(codes) > 1 and not (codes[1:] >= codes[:-1]).all():
        # rows not grouped by pass (the writer groups them; nothing relies on it): sort them
        order = np.argsort(codes, kind="stable")
        c_order = np.argsort(np.repeat(codes, lengths), kind="stable")
        codes, sent, end, lengths = codes[order], sent[order], end[order], lengths[order]
        times, toks = times[c_order], toks[c_order]
    off = np.zeros(len(codes) + 1, dtype=np.int64)
    np.cumsum(lengths, out=off[1:])
    bounds = np.flatnonzero(np.diff(codes)) + 1
    g_start = np.concatenate([[0], bounds])
    g_stop = np.concatenate([bounds, [len(codes)]])
    g_codes = codes[g_start]
    secs = np.zeros(len(g_start))
    tokens = np.zeros(len(g_start), dtype=np.int64)
    for j in range(len(g_start)):
        a, b = g_start[j], g_stop[j]
        ca, cb = off[a], off[b]
        secs[j], tokens[j] = _pass_window(sent[a:b], end[a:b], lanes[g_codes[j]], times[ca:cb], toks[ca:cb])
    return [keys[c][0] for c in g_codes], [keys[c][1] for c in g_codes], secs, tokens, staged


def busy_windows_from_parquet(partitions: dict, passes: pa.Table, threads: int = 2, progress=None,
                              staged: bool = False):
    """Busy windows of the evaluations in `partitions` ({evaluation_id: [request Parquet files]}).

    `passes`: the raw pass rows (evaluation_id, pass_id, engine, lanes, ends_at, grace_ends_at)
    of those evaluations. Returns the frame of `busy_windows` and the evaluations left to the
    SQL path (see the module docstring); with `staged=True` also the staged requests of the
    evaluations it scanned (schema STAGED; None when there are none).
    """
    passes = passes.filter(pc.fill_null(pc.invert(pc.starts_with(passes["pass_id"], "warmup")), False))
    eids = passes["evaluation_id"].to_numpy(zero_copy_only=False)
    order = np.argsort(eids, kind="stable")
    sorted_ids = eids[order]
    by_eval = {}
    if len(sorted_ids):
        cut = np.flatnonzero(sorted_ids[1:] != sorted_ids[:-1]) + 1
        for a, b in zip(np.concatenate([[0], cut]), np.concatenate([cut, [len(sorted_ids)]])):
            by_eval[sorted_ids[a]] = pa.array(order[a:b])

    def work(eid):
        rows = by_eval.get(eid)
        if rows is None:        # no timed pass rows: the inner join leaves nothing
            return eid, None
        try:
            return eid, _one_evaluation(partitions[eid], passes.take(rows))
        except _NeedsSql:
            return eid, "sql"

    frames, to_sql, staged_parts = [], [], []
    ids = sorted(partitions)
    with ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
        for n, (eid, res) in enumerate(pool.map(work, ids), 1):
            if res == "sql":
                to_sql.append(eid)
            elif res is not None:
                if len(res[0]):
                    frames.append((eid, *res[:4]))
                if staged and res[4] is not None and res[4].num_rows:
                    t = res[4]
                    staged_parts.append(t.set_column(0, "evaluation_id", pa.array([eid] * t.num_rows, pa.string())))
            if progress is not None:
                progress(n, len(ids))
    staged_table = pa.concat_tables(staged_parts) if staged_parts else None
    if not frames:
        out = pd.DataFrame(columns=COLUMNS)
        return (out, to_sql, staged_table) if staged else (out, to_sql)
    out = pd.DataFrame({
        "evaluation_id": [eid for eid, p, _, _, _ in frames for _ in p],
        "pass_id": [x for _, p, _, _, _ in frames for x in p],
        "engine": [x for _, _, e, _, _ in frames for x in e],
        "busy_seconds": np.concatenate([f[3] for f in frames]),
        "busy_tokens": np.concatenate([f[4] for f in frames]),
    })
    return (out, to_sql, staged_table) if staged else (out, to_sql)
