"""The scorer's DuckDB connection: in memory, over only the evaluations being scored.

Why a connection of its own and not `Warehouse.connect`: the small raw tables are read once per
scoring into memory, through the packs (warehouse/packs.py) where they are current and from the
evaluations' own parts otherwise; a union_by_name view over the parts re-reads the footer of
every part at every query, and a copy made from such a view reads them again. `replies` (text)
is never read; `requests` is read once, in batches, by the scan of scoring/busy_scan.py
(scoring/rows.py runs it), which returns both the busy windows and the scalar columns of the
staged requests every query reads.

Tables and views are named through DuckDB's relational API (`create`, `create_view`), not by
formatting SQL: every statement the scorer writes itself is a file of sql/ (`sql_text`). The
warehouse's own view files (warehouse/sql/) are defined as temporary views of this connection
(`sql_statements(temporary=True)`, the warehouse's one rewrite of them).
"""

from __future__ import annotations

import pandas as pd
import pyarrow as pa

from speculator_arena import settings, sqlfiles
from speculator_arena.protocol import load_protocol
from speculator_arena.warehouse import packs
from speculator_arena.warehouse.schema import TABLES
from speculator_arena.warehouse.store import Warehouse, define_scoring_rules, sql_statements

# The small tables, copied into memory (raw_<table> is that copy).
CACHED = (
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
# Columns no query of the scorer reads, not read at all: free text no score is computed from (a
# greedy reply's text, an engine's start-up log), which also keeps hidden text out of the
# scorer's memory, and the scored replies' token ids and context digests (the likelihood gate
# reads their log-probabilities and ranks: sql/gate_scored.sql), a third of that table's lists.
UNREAD = {
    "probe_greedy": ("text",),
    "engine_starts": ("log_text",),
    "probe_scored": ("token_ids", "context_sha256"),
}


def sql_text(name: str) -> str:
    """One of the scorer's statements (scoring/sql/; queries take the parameter `$ids`)."""
    return sqlfiles.read("speculator_arena.scoring", name)


def query(con, name: str, ids) -> pd.DataFrame:
    """The rows of one query of sql/ over the evaluations `ids` (None: all)."""
    return con.execute(sql_text(name), {"ids": ids}).df()


def evaluation_ids(wh: Warehouse, ids) -> list[str]:
    """`ids`, or (None) every evaluation with a partition in any table."""
    if ids is not None:
        return sorted(set(ids))
    from speculator_arena.warehouse.catalog import partition_mtimes

    return sorted(set().union(*(partition_mtimes(wh.raw / t) for t in TABLES)))


def open_connection(wh: Warehouse, ids=None, after_passes=None, proto=None):
    """An in-memory DuckDB with the warehouse's views over the evaluations `ids` (None: all).

    The same views as `wh.connect(read_only=True)` (temporary ones), except that raw_<table> of
    the small tables is an in-memory copy of these evaluations' rows (without the `UNREAD` text
    columns), raw_requests reads only theirs, and raw_replies is not defined (the scorer reads
    no reply text).
    `after_passes(con, resolved)` runs as soon as the pass rows are in (the busy scan starts there).
    `proto`: the protocol version whose rules the views apply (the latest when None).
    """
    import duckdb

    threads = settings.get("ARENA_DUCKDB_THREADS")
    con = duckdb.connect(":memory:", config={"threads": int(threads)} if threads else {})
    con.execute(sql_text("connection_settings.sql"))
    define_scoring_rules(con, proto or load_protocol())
    wanted = evaluation_ids(wh, ids)
    resolved = packs.resolve(wh.home, wanted)
    for table in CACHED:
        copy_rows(con, wh.home, table, resolved)
        if table == "passes" and after_passes is not None:
            after_passes(con, resolved)
    con.sql(packs.duck_select(con, wh.home, "requests", resolved)).create_view("raw_requests")
    for stmt in sql_statements(temporary=True):
        con.execute(stmt)
    return con


def copy_rows(con, home, table: str, resolved: packs.Resolved) -> None:
    """raw_<table> on `con`: an in-memory copy of the resolved evaluations' rows (without the
    `UNREAD` columns), the packed ones first, as packs.read_rows orders them.

    The packs' row groups holding them are read with pyarrow (only those groups); the unpacked
    evaluations' parts are read by DuckDB, one statement over the list of their files. Why not
    pyarrow one part at a time, as before: a warehouse without packs has one small part per
    evaluation and table (9 tables: 1,800 files at 200 evaluations), each opened from Python
    beside the busy scan's threads; read that way they took 30-33 s at 200 evaluations on a
    loaded 2-core machine, against 11-15 s read by DuckDB in the same runs
    (docs/benchmarks/scoring.md, issue 36)."""
    columns = [c for c in TABLES[table].names if c not in UNREAD.get(table, ())]
    name = f"raw_{table}"
    packed = [packs.read_packed(pack, table, per, columns) for pack, per in resolved.packed.items()]
    from_parts = packs.parts_select(home, table, resolved.unpacked)
    if packed or from_parts is None:
        first = (
            pa.concat_tables(packed) if packed else pa.schema([TABLES[table].field(c) for c in columns]).empty_table()
        )
        con.from_arrow(first).create(name)
    if from_parts is not None:
        import duckdb

        rows = con.sql(from_parts).project(*[duckdb.ColumnExpression(c) for c in columns])
        if packed:
            rows.insert_into(name)
        else:
            rows.create(name)


def threads(con) -> int:
    """The connection's threads (the busy-window scan uses as many)."""
    # fetchall, not fetchone: an unfinished result would block the connection's next statement
    return max(1, int(con.execute(sql_text("threads.sql")).fetchall()[0][0]))
