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
# Free text no score is computed from (a greedy reply's text, an engine's start-up log): not read
# at all, which also keeps hidden text out of the scorer's memory.
UNREAD = {"probe_greedy": ("text",), "engine_starts": ("log_text",)}


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
        columns = [c for c in TABLES[table].names if c not in UNREAD.get(table, ())]
        con.from_arrow(packs.read_rows(wh.home, table, wanted, columns, resolved=resolved)).create(f"raw_{table}")
        if table == "passes" and after_passes is not None:
            after_passes(con, resolved)
    con.sql(packs.duck_select(con, wh.home, "requests", resolved)).create_view("raw_requests")
    for stmt in sql_statements(temporary=True):
        con.execute(stmt)
    return con


def threads(con) -> int:
    """The connection's threads (the busy-window scan uses as many)."""
    # fetchall, not fetchone: an unfinished result would block the connection's next statement
    return max(1, int(con.execute(sql_text("threads.sql")).fetchall()[0][0]))
