"""The scorer's fast path to the busy windows: the requests' Parquet read directly, in batches.

Why: at the protocol's scale the chunk lists are most of the warehouse (about 90 million chunk
times and token counts for 1,000 evaluations). Passing them through DuckDB's join and into one
Arrow table cost as much as the sweep itself and held gigabytes at once; read here a batch of
evaluations at a time (a pack's row group, warehouse/packs.py, or one evaluation's parts), in a
few threads (pyarrow and numpy release the GIL), only the columns the window needs are decoded
and memory stays at one batch per thread. A batch is joined to its pass rows and counted with
whole-column operations (one Python step per evaluation cost 1-2 ms: seconds at 870).

The rows are exactly those of sql/busy_inputs.sql (the view `staged_requests`): timed requests
(pass_id not 'warmup%') joined to their pass row on (pass_id, engine), `counted` by the rule of
rules/counted.py with the slack of the evaluation's task (sql/busy_pass_rows.sql). Where that join would not be one pass row per request (duplicate
pass rows) the evaluation is handed back to the SQL path, so results never depend on which
path ran. The same read also yields the scalar columns of the staged requests (STAGED) that
every other query of the scorer reads, so the requests' Parquet is decoded once per scoring.
tests/scoring/test_busy_scan.py checks both against the views and busy_windows.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from functools import partial

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from speculator_arena.rules.counted import counted as counted_rule
from speculator_arena.scoring.busy import COLUMNS, pass_windows
from speculator_arena.warehouse import packs, parts
from speculator_arena.warehouse.schema import TABLES

REQUEST_COLUMNS = (
    "pass_id",
    "engine",
    "sent_at",
    "last_token_at",
    "ended_at",
    "done",
    "output_tokens",
    "max_tokens",
    "chunk_times",
    "chunk_tokens",
    "workload",
    "session_id",
    "turn",
    "first_token_at",
    "usage_prompt_tokens",
    "cached_tokens",
)

READ_COLUMNS = ["evaluation_id", *REQUEST_COLUMNS]  # what a batch reader returns

# The scalar columns of the staged requests the scorer's queries use, in the order and types
# of sql/staged_requests_cached.sql: built here from the same read, so the requests' Parquet
# is decoded once for the busy windows and every other query.
STAGED = pa.schema(
    [
        ("evaluation_id", pa.string()),
        ("pass_id", pa.string()),
        ("engine", pa.string()),
        ("workload", pa.string()),
        ("session_id", pa.string()),
        ("turn", pa.int64()),
        ("sent_at", pa.float64()),
        ("first_token_at", pa.float64()),
        ("last_token_at", pa.float64()),
        ("ended_at", pa.float64()),
        ("usage_prompt_tokens", pa.int64()),
        ("cached_tokens", pa.int64()),
        ("output_tokens", pa.int64()),
        ("chunks", pa.int64()),
        ("counted", pa.bool_()),
    ]
)


def _floats(col) -> np.ndarray:
    """A numeric column as float64, NULL as NaN (which the counted rule never counts)."""
    return np.asarray(pc.cast(col, pa.float64()).to_numpy(zero_copy_only=False), dtype=float)


def _definitely(cond) -> np.ndarray:
    """SQL's coalesce(<condition>, false): true only where the condition is true and not null."""
    return pc.fill_null(cond, False).to_numpy(zero_copy_only=False).astype(bool)


def _bad_rows(t: pa.Table) -> np.ndarray:
    """Rows the fast path does not reproduce (their evaluation goes to the SQL path): a stored
    NaN in a time column (SQL orders it above every number, numpy does not), a null chunk time
    or token, or chunk lists of unequal length (SQL's unnest decides those)."""
    bad = np.zeros(t.num_rows, dtype=bool)
    for name in ("sent_at", "last_token_at", "ended_at"):
        c = t[name]
        arr = np.asarray(c.to_numpy(zero_copy_only=False), dtype=float)
        bad |= np.isnan(arr) & ~pc.is_null(c).to_numpy(zero_copy_only=False)
    ct, ck = t["chunk_times"], t["chunk_tokens"]
    lt = pc.list_value_length(ct).fill_null(0).to_numpy(zero_copy_only=False)
    lk = pc.list_value_length(ck).fill_null(0).to_numpy(zero_copy_only=False)
    bad |= lt != lk
    for c in (ct, ck):
        flat = pc.list_flatten(c)
        if flat.null_count:
            nulls = pc.is_null(flat).to_numpy(zero_copy_only=False)
            rows = np.repeat(np.arange(t.num_rows), pc.list_value_length(c).fill_null(0).to_numpy(zero_copy_only=False))
            bad[np.unique(rows[nulls])] = True
    return bad


def _batch(t: pa.Table, passes: pa.Table, pass_index: dict):
    """The busy windows and staged rows of every evaluation in `t` (request rows of one or more
    evaluations, none of which needs the SQL path), joined to `passes` through `pass_index`
    ({(evaluation_id, pass_id, engine): row of passes}).

    Returns (evaluation ids, pass ids, engines, busy seconds, busy tokens) per timed pass and
    engine with requests, and the staged rows (schema STAGED)."""
    # the pass row of each (evaluation, pass_id, engine) combination present: the join on the
    # combinations, not on every row; warm-up and unmatched rows get -1 (dropped, as by the join)
    key = pc.binary_join_element_wise(t["evaluation_id"], t["pass_id"], t["engine"], "\x1f")
    enc = (key.combine_chunks() if isinstance(key, pa.ChunkedArray) else key).dictionary_encode()
    lookup = np.array(
        [pass_index.get(tuple(k.split("\x1f")), -1) if k is not None else -1 for k in enc.dictionary.to_pylist()]
        + [-1],
        dtype=np.int64,
    )
    codes = enc.indices.fill_null(len(enc.dictionary)).to_numpy(zero_copy_only=False).astype(np.int64)
    rows = lookup[codes]
    keep = rows >= 0
    # per-pass values with one NaN sentinel at the end, which the dropped rows index (an
    # evaluation that stopped in its warm-ups has requests and no pass at all)
    ends = np.append(np.asarray(passes["ends_at"].to_numpy(zero_copy_only=False), dtype=float), np.nan)
    grace = np.append(np.asarray(passes["grace_ends_at"].to_numpy(zero_copy_only=False), dtype=float), np.nan)
    lanes = passes["lanes"].to_numpy(zero_copy_only=False)
    sent = np.asarray(t["sent_at"].to_numpy(zero_copy_only=False), dtype=float)
    last = np.asarray(t["last_token_at"].to_numpy(zero_copy_only=False), dtype=float)
    ended = np.asarray(t["ended_at"].to_numpy(zero_copy_only=False), dtype=float)
    safe = np.where(keep, rows, len(ends) - 1)
    slack = np.append(np.asarray(passes["count_slack_tokens"].to_numpy(zero_copy_only=False), dtype=float), np.nan)
    counted = counted_rule(
        _definitely(t["done"]),
        _floats(t["output_tokens"]),
        _floats(t["max_tokens"]),
        slack[safe],
        sent,
        np.where(keep, ends[safe], np.nan),
        ended,
        grace[safe],
    )
    end = np.where(np.isnan(last), ended, last)
    ct, ck = t["chunk_times"], t["chunk_tokens"]
    lengths = pc.list_value_length(ct).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    times = pc.list_flatten(ct).to_numpy(zero_copy_only=False)
    toks = pc.list_flatten(ck).to_numpy(zero_copy_only=False)
    mask = pa.array(keep)
    staged = pa.table(
        {
            name: (t[name].filter(mask) if name not in ("counted", "chunks") else None)
            for name in STAGED.names
            if name not in ("counted", "chunks")
        }
    )
    staged = staged.append_column("chunks", pc.list_value_length(ct).cast(pa.int64()).filter(mask))  # len(NULL) is NULL
    staged = staged.append_column("counted", pa.array(counted[keep])).select(STAGED.names).cast(STAGED)
    if not keep.all():
        chunk_keep = np.repeat(keep, lengths)
        times, toks = times[chunk_keep], toks[chunk_keep]
        rows, counted, sent, end, lengths = rows[keep], counted[keep], sent[keep], end[keep], lengths[keep]
    if len(rows) == 0:
        return [], [], [], np.zeros(0), np.zeros(0, dtype=np.int64), staged
    missing = np.isnan(sent) | np.isnan(end)
    sent = np.where(missing, np.inf, sent)
    end = np.where(missing, np.inf, end)
    # tokens of requests that do not count are zeroed instead of masked out
    toks = toks * np.repeat(counted, lengths)
    # one group per pass row, in the pass rows' order (the kernel sorts each group's events itself)
    g_rows, req_group = np.unique(rows, return_inverse=True)
    secs, tokens = pass_windows(
        req_group.ravel(), sent, end, lanes[g_rows], np.repeat(req_group.ravel(), lengths), times, toks
    )
    pick = pa.array(g_rows)
    return (
        passes["evaluation_id"].take(pick).to_pylist(),
        passes["pass_id"].take(pick).to_pylist(),
        passes["engine"].take(pick).to_pylist(),
        secs,
        tokens,
        staged,
    )


def pass_index(passes: pa.Table) -> tuple[dict, set]:
    """({(evaluation_id, pass_id, engine): row of `passes`}, the evaluations with two pass rows
    for one pass, whose requests the SQL join would repeat: those go to the SQL path)."""
    keys = zip(passes["evaluation_id"].to_pylist(), passes["pass_id"].to_pylist(), passes["engine"].to_pylist())
    index, dup = {}, set()
    for i, k in enumerate(keys):
        if None in k:
            continue
        if k in index:
            dup.add(k[0])
        index[k] = i
    return index, dup


def scan_batch(read, passes: pa.Table, index: tuple[dict, set]):
    """One batch of `busy_windows_from_batches`: (evaluations left to the SQL path, `_batch`'s
    result for the others). `read()` returns the batch's request rows; `index`: pass_index(passes)."""
    rows_of_pass, dup = index
    t = parts.conform(read(), TABLES["requests"], READ_COLUMNS)  # as read_rows returns them: no copy
    ids = set(pc.unique(t["evaluation_id"]).to_pylist())  # not one Python string per request row
    bad = _bad_rows(t)
    sql = (set(pc.unique(pc.filter(t["evaluation_id"], pa.array(bad))).to_pylist()) if bad.any() else set()) | (
        ids & dup
    )
    if sql:
        t = t.filter(pc.invert(pc.is_in(t["evaluation_id"], pa.array(sorted(sql), pa.string()))))
    return sql, _batch(t, passes, rows_of_pass)


def busy_windows_from_batches(batches, passes: pa.Table, threads: int = 2, progress=None, staged: bool = False):
    """Busy windows from request rows read in batches.

    `batches`: callables, each returning the request rows (with `evaluation_id`) of some
    evaluations, every evaluation's rows in one batch; batches are read and computed in
    `threads` threads (pyarrow and numpy release the GIL), so memory holds a batch per thread.
    `passes`: the raw pass rows (evaluation_id, pass_id, engine, lanes, ends_at, grace_ends_at)
    of those evaluations, with their task's count_slack_tokens (sql/busy_pass_rows.sql). Returns the frame of `busy_windows` and the evaluations left to the
    SQL path (see the module docstring); with `staged=True` also the staged requests of the
    evaluations it scanned (schema STAGED; None when there are none).
    """
    passes = passes.filter(pc.fill_null(pc.invert(pc.starts_with(passes["pass_id"], "warmup")), False))
    work = partial(scan_batch, passes=passes, index=pass_index(passes))
    out, to_sql, staged_parts = [], set(), []
    with ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
        for n, (sql, res) in enumerate(pool.map(work, batches), 1):
            to_sql |= sql
            out.append(res[:5])
            if staged and res[5].num_rows:
                staged_parts.append(res[5])
            if progress is not None:
                progress(n, len(batches))
    staged_table = pa.concat_tables(staged_parts) if staged_parts else None
    frame = pd.DataFrame(
        {
            "evaluation_id": [x for r in out for x in r[0]],
            "pass_id": [x for r in out for x in r[1]],
            "engine": [x for r in out for x in r[2]],
            "busy_seconds": np.concatenate([r[3] for r in out]) if out else np.zeros(0),
            "busy_tokens": np.concatenate([r[4] for r in out]) if out else np.zeros(0, dtype=np.int64),
        },
        columns=COLUMNS,
    )
    frame = frame.sort_values(["evaluation_id"], kind="stable").reset_index(drop=True)
    return (frame, sorted(to_sql), staged_table) if staged else (frame, sorted(to_sql))


def busy_windows_from_parquet(
    partitions: dict, passes: pa.Table, threads: int = 2, progress=None, staged: bool = False
):
    """Busy windows of the evaluations in `partitions` ({evaluation_id: [request Parquet files]}),
    one evaluation per batch (see `busy_windows_from_batches`)."""

    def reader(eid, files):
        def read():
            tables = []
            for f in files:
                pf = pq.ParquetFile(f)
                t = pf.read(columns=[c for c in REQUEST_COLUMNS if c in pf.schema_arrow.names], use_threads=False)
                t = t.append_column("evaluation_id", pa.array([eid] * t.num_rows, pa.string()))
                tables.append(parts.conform(t, TABLES["requests"], READ_COLUMNS))
            return pa.concat_tables(tables) if tables else TABLES["requests"].empty_table().select(READ_COLUMNS)

        return read

    return busy_windows_from_batches(
        [reader(e, partitions[e]) for e in sorted(partitions)], passes, threads, progress, staged
    )


def request_batches(home, resolved: packs.Resolved, batch: int = packs.GROUP_SIZE) -> list:
    """Readers of the requests of the resolved evaluations (`busy_windows_from_batches`'s
    batches): a pack's row group at a time, and the unpacked evaluations' parts `batch`
    evaluations at a time."""
    out = []
    for pack, per in resolved.packed.items():
        by_group: dict[int, dict] = {}
        for eid, groups in per.items():
            if groups.get("requests", -1) >= 0:
                by_group.setdefault(groups["requests"], {})[eid] = groups
        for _, sub in sorted(by_group.items()):
            out.append(lambda pack=pack, sub=sub: packs.read_packed(pack, "requests", sub, READ_COLUMNS))
    ids = resolved.unpacked
    for i in range(0, len(ids), batch):
        out.append(lambda sub=ids[i : i + batch]: parts.read_parts(home, "requests", sub, READ_COLUMNS))
    return out
