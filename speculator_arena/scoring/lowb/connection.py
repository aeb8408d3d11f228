"""The LowBArena scorer's DuckDB connection: in memory, the raw rows of the evaluations scored.

Why a connection of its own and not `Warehouse.connect`: that one defines every view of the
speculator arena (and loads its protocol) over every part; the LowBArena scorer reads only its
seven raw tables, `evaluations` and `engine_starts`, and only of the evaluations it scores, copied
once into memory so that its queries (sql/, read with sqlfiles as the speculator scorer's are) do
not re-read the Parquet footers each time. The copy is `raw_<table>` with the schema's columns, as
the warehouse's views are named, so an analyst can run sql/ on `Warehouse.connect()` unchanged.
"""

from __future__ import annotations

from speculator_arena import sqlfiles
from speculator_arena.warehouse import parts
from speculator_arena.warehouse.schema import RAW_TABLES
from speculator_arena.warehouse.store import Warehouse, column_list, empty_select, quote, warehouse_sql

SCORED_TABLES = (
    "engine_starts",
    "lowb_requests",
    "lowb_memory",
    "lowb_items",
    "lowb_kl_prompts",
    "lowb_logprobs",
    "lowb_tensors",
    "lowb_checkpoints",
)
UNREAD = {"engine_starts": ("log_text",)}  # start-up logs: text no figure is computed from


def sql_text(name: str) -> str:
    """One of the LowBArena scorer's statements (scoring/lowb/sql/)."""
    return sqlfiles.read("speculator_arena.scoring.lowb", name)


def connect():
    import duckdb

    return duckdb.connect(":memory:")


def copy_table(con, wh: Warehouse, table: str, ids: list[str] | None) -> None:
    """raw_<table> on `con`: the rows of the evaluations `ids` (None: every evaluation's), in memory."""
    schema = RAW_TABLES[table]
    if ids is None:
        select = wh.raw_select(table)
    else:
        files = [f for eid in ids for f in parts.part_files(wh.home, table, eid)]
        if files:
            listed = "[" + ", ".join(quote(f) for f in files) + "]"
            select = warehouse_sql(
                "raw_parts.sql", columns=column_list(schema), empty=empty_select(schema), paths=listed
            )
        else:
            select = empty_select(schema)
    rel = con.sql(select)
    drop = UNREAD.get(table, ())
    if drop:
        import duckdb

        rel = rel.project(*[duckdb.ColumnExpression(c) for c in schema.names if c not in drop])
    rel.create(f"raw_{table}")
