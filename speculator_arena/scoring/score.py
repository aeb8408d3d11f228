"""Score every stored evaluation under one protocol version, from the raw rows only.

This module reads: the evaluations' raw rows (through the warehouse's packs where those are
current, warehouse/packs.py), the busy-window scan of their requests (busy_scan.py), and the
SQL views and queries of sql/ (speeds, pass ratios, the failure rule, the sums behind every
gate). assemble.py turns those rows into gates, SpecScore (its docstring states the order of
precedence), figures and the dev/test gap flag, for all evaluations at once (docs/scoring.md
gives each formula). Nothing is stored: the result is recomputed whenever it is asked for,
under whichever version is asked for.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pandas as pd

from speculator_arena import settings, sqlfiles
from speculator_arena.protocol import load_protocol
from speculator_arena.protocol.model import protocol_digest
from speculator_arena.scoring import busy_scan
from speculator_arena.scoring.assemble import assemble
from speculator_arena.scoring.busy import busy_windows
from speculator_arena.scoring.limits import protocol_limits, protocol_workloads
from speculator_arena.scoring.result import Scores
from speculator_arena.warehouse import packs, parts
from speculator_arena.warehouse.schema import TABLES
from speculator_arena.warehouse.store import Warehouse, define_scoring_rules, sql_statements


def sql_text(name: str) -> str:
    """One of the scorer's queries (scoring/sql/, parameters `$ids`)."""
    return sqlfiles.read("speculator_arena.scoring", name)


def _tick(label: str, t0: list) -> None:
    """With ARENA_SCORE_TIMING=1, print how long each step took (the benchmark's breakdown)."""
    if settings.flag("ARENA_SCORE_TIMING"):
        import sys
        import time

        now = time.perf_counter()
        if t0:
            print(f"  score step {label}: {now - t0[0]:.2f} s", file=sys.stderr, flush=True)
        t0[:] = [now]


def _q(con, name: str, ids, t0=None) -> pd.DataFrame:
    df = con.execute(sql_text(name), {"ids": ids}).df()
    if t0 is not None:
        _tick(name, t0)
    return df


# Read once per scoring into memory, through the packs (warehouse/packs.py) where they are
# current and from the evaluations' own parts otherwise: a union_by_name view over the parts
# re-reads the footer of every part at every query, and a copy made from such a view reads them
# again. `replies` (text) is never read; `requests` is read once, in batches, by the scan of
# scoring/busy_scan.py, which returns both the busy windows and the scalar columns of the staged
# requests every query reads (sql/staged_requests_cached.sql is the same rows from the view
# raw_requests, used for the evaluations the scan hands back).
_CACHED = (
    "evaluations",
    "passes",
    "metrics",
    "memory",
    "contention",
    "probe_greedy",
    "probe_scored",
    "probe_fidelity",
    "engine_starts",
)
# Free text no score is computed from (a greedy reply's text, an engine's start-up log): not read
# at all, which also keeps hidden text out of the scorer's memory.
_UNREAD = {"probe_greedy": ("text",), "engine_starts": ("log_text",)}


def _evaluation_ids(wh: Warehouse, ids) -> list[str]:
    """`ids`, or (None) every evaluation with a partition in any table."""
    if ids is not None:
        return sorted(set(ids))
    from speculator_arena.warehouse.catalog import partition_mtimes

    return sorted(set().union(*(partition_mtimes(wh.raw / t) for t in TABLES)))


def _open(wh: Warehouse, ids=None, after_passes=None, proto=None):
    """An in-memory DuckDB with the warehouse's views over the evaluations `ids` (None: all).

    The same views as `wh.connect(read_only=True)` (temporary ones), except that raw_<table> of
    the small tables is a view over an in-memory copy of these evaluations' rows (without the
    `_UNREAD` text columns), raw_requests reads only theirs, and raw_replies is not defined (the
    scorer reads no reply text).
    `after_passes(con, resolved)` runs as soon as the pass rows are in (the busy scan starts there).
    `proto`: the protocol version whose rules the views apply (the latest when None).
    """
    import duckdb

    con = duckdb.connect(":memory:")
    con.execute("SET parquet_metadata_cache = true")
    con.execute("SET enable_progress_bar = false")
    threads = settings.get("ARENA_DUCKDB_THREADS")
    if threads:
        con.execute("SET threads = " + str(int(threads)))
    define_scoring_rules(con, proto or load_protocol())
    wanted = _evaluation_ids(wh, ids)
    resolved = packs.resolve(wh.home, wanted)
    for table in _CACHED:
        columns = [c for c in TABLES[table].names if c not in _UNREAD.get(table, ())]
        con.register("_rows", packs.read_rows(wh.home, table, wanted, columns, resolved=resolved))
        # identifiers from our own schema list, never user input
        con.execute(f"CREATE OR REPLACE TEMP TABLE cached_{table} AS SELECT * FROM _rows")
        con.unregister("_rows")
        con.execute(f"CREATE OR REPLACE TEMP VIEW raw_{table} AS SELECT * FROM cached_{table}")
        if table == "passes" and after_passes is not None:
            after_passes(con, resolved)
    con.execute(f"CREATE OR REPLACE TEMP VIEW raw_requests AS {packs.duck_select(con, wh.home, 'requests', resolved)}")
    for stmt in sql_statements():
        con.execute(stmt.replace("CREATE OR REPLACE VIEW", "CREATE OR REPLACE TEMPORARY VIEW"))
    return con


def _threads(con) -> int:
    # fetchall, not fetchone: an unfinished result would block the connection's next statement
    return max(1, int(con.execute("SELECT current_setting('threads')").fetchall()[0][0]))


def _request_batches(home, resolved: packs.Resolved, batch: int = packs.GROUP_SIZE) -> list:
    """Readers of the requests of the resolved evaluations: a pack's row group at a time, and the
    unpacked evaluations' parts `batch` evaluations at a time."""
    cols = busy_scan.READ_COLUMNS
    out = []
    for pack, per in resolved.packed.items():
        by_group: dict[int, dict] = {}
        for eid, groups in per.items():
            if groups.get("requests", -1) >= 0:
                by_group.setdefault(groups["requests"], {})[eid] = groups
        for _, sub in sorted(by_group.items()):
            out.append(lambda pack=pack, sub=sub: packs.read_packed(pack, "requests", sub, cols))
    ids = resolved.unpacked
    for i in range(0, len(ids), batch):
        out.append(lambda sub=ids[i : i + batch]: parts.read_parts(home, "requests", sub, cols))
    return out


def _busy_start(con, wh: Warehouse, resolved: packs.Resolved, pool: ThreadPoolExecutor):
    """Start the scan of the busy windows in `pool`; DuckDB runs the other queries meanwhile
    (both release the GIL), and `_busy_finish` collects it."""
    passes = con.sql(sql_text("busy_pass_rows.sql")).to_arrow_table()
    batches, threads = _request_batches(wh.home, resolved), _threads(con)

    def scan():
        import time

        t = time.perf_counter()
        out = busy_scan.busy_windows_from_batches(batches, passes, threads, staged=True)
        if settings.flag("ARENA_SCORE_TIMING"):
            import sys

            print(
                f"  score step (in its thread) busy-window scan of {len(batches)} batches "
                f"({len(resolved.packed_ids)} evaluations from packs, {len(resolved.unpacked)} from parts): "
                f"{time.perf_counter() - t:.2f} s",
                file=sys.stderr,
                flush=True,
            )
        return out

    return pool.submit(scan)


def _busy_finish(con, future):
    """(busy windows, staged requests of the scanned evaluations, evaluations handed back):
    the scan's results, plus the SQL path's windows for the evaluations it handed back."""
    fast, to_sql, staged = future.result()
    if not to_sql:
        return fast, staged, to_sql
    slow = busy_windows(con.sql(sql_text("busy_inputs.sql"), params={"ids": to_sql}).to_arrow_table())
    return (pd.concat([fast, slow], ignore_index=True) if len(fast) else slow), staged, to_sql


def _busy(con, wh: Warehouse, ids) -> pd.DataFrame:  # (tests call it on an open connection)
    """Busy windows of the evaluations `ids` (all: None), as the scorer computes them."""
    resolved = packs.resolve(wh.home, _evaluation_ids(wh, ids))
    with ThreadPoolExecutor(max_workers=1) as pool:
        return _busy_finish(con, _busy_start(con, wh, resolved, pool))[0]


def _stage_requests(con, staged, to_sql) -> None:
    """`staged_requests` for every query that follows: the scan's rows (an Arrow table DuckDB
    reads in place, no copy), plus the SQL view's rows (sql/staged_requests_cached.sql) of the
    evaluations it handed back."""
    parts = []
    if to_sql or staged is None:
        con.execute(sql_text("staged_requests_cached.sql"), {"ids": to_sql})
        parts.append("SELECT * FROM cached_staged_requests")
    if staged is not None:
        con.register("staged_scan", staged)
        parts.append("SELECT * FROM staged_scan")
    con.execute("CREATE OR REPLACE TEMP VIEW staged_requests AS " + " UNION ALL ".join(parts))


def score_warehouse(
    warehouse, protocol_version: int | None = None, evaluation_ids=None, document: dict | None = None
) -> Scores:
    """Score the stored evaluations (all, or `evaluation_ids`) under `protocol_version` (latest).

    `document`: a protocol document that is not (yet) a version, e.g. a calibration's candidate,
    scored as it would be once published (its evidence shows the scorer's own verdicts)."""
    wh = warehouse if isinstance(warehouse, Warehouse) else Warehouse(warehouse)
    if document is not None:
        from speculator_arena.protocol.model import Protocol, document_digest

        proto, digest = Protocol.model_validate(document), document_digest(document)
    else:
        proto = load_protocol(protocol_version)
        digest = protocol_digest(proto.version)
    ids = None if evaluation_ids is None else [str(i) for i in evaluation_ids]
    t0: list = []
    _tick("start", t0)
    pool = ThreadPoolExecutor(max_workers=1)
    started = []
    try:
        con = _open(wh, ids, after_passes=lambda c, r: started.append(_busy_start(c, wh, r, pool)), proto=proto)
    except BaseException:
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    _tick("read small tables (busy scan starts after the passes)", t0)
    busy_future = started[0]
    try:
        limits = protocol_limits(proto)
        con.register("protocol_limits", limits)
        con.register("protocol_workloads", protocol_workloads(proto))
        ev = con.execute(
            "SELECT * FROM raw_evaluations WHERE $ids IS NULL OR list_contains($ids, evaluation_id) "
            "ORDER BY created_at, evaluation_id",
            {"ids": ids},
        ).df()
        ev = ev.drop_duplicates("evaluation_id", keep="last").reset_index(drop=True)
        greedy = _q(con, "gate_greedy.sql", ids, t0)
        scored = _q(con, "gate_scored.sql", ids, t0)
        fidelity = _q(con, "gate_fidelity.sql", ids, t0)
        memory = _q(con, "gate_memory.sql", ids, t0)
        contention = _q(con, "contention_passes.sql", ids, t0)
        timed_passes = _q(con, "timed_passes.sql", ids, t0)
        answering = _q(con, "gate_answering.sql", ids, t0)
        starts = _q(con, "engine_starts_summary.sql", ids, t0)
        fig_wall = _q(con, "figures_wall.sql", ids, t0)
        fig_acc = _q(con, "figures_acceptance.sql", ids, t0)
        engine_passes = con.execute(
            "SELECT evaluation_id, engine, workload, count(*) FILTER (WHERE status = 'complete') AS complete "
            "FROM raw_passes WHERE pass_id NOT LIKE 'warmup%' AND ($ids IS NULL OR list_contains($ids, evaluation_id)) "
            "GROUP BY ALL",
            {"ids": ids},
        ).df()
        _tick("remaining queries", t0)
        busy, staged, to_sql = _busy_finish(con, busy_future)
        _tick("waiting for the Parquet scan (busy windows, staged requests)", t0)
        _stage_requests(con, staged, to_sql)
        _tick("staged requests registered", t0)
        length = _q(con, "gate_length.sql", ids, t0)
        fig_req = _q(con, "figures_requests.sql", ids, t0)
        con.register("busy_windows", busy)
        passes = _q(con, "pass_ratios.sql", ids, t0)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        con.close()
    out = assemble(
        proto,
        digest,
        limits,
        ev,
        passes,
        greedy,
        scored,
        fidelity,
        length,
        memory,
        answering,
        starts,
        fig_req,
        fig_wall,
        fig_acc,
        engine_passes,
        contention,
        timed_passes,
    )
    _tick("gates, figures, SpecScore (pandas)", t0)
    return out
