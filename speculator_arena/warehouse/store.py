"""Writing raw rows atomically and opening the DuckDB views over them.

Why files and not DuckDB tables: Parquet parts written as temp-file-then-rename can never be
half-written, a runner that dies leaves whole files or none, and DuckDB reads them through
views defined per connection, so any number of readers can read while a runner writes. The
analysts' DuckDB file (`arena.duckdb`, warehouse/analysts.py) is a copy without hidden text.
"""

from __future__ import annotations

import errno
import os
import shutil
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from speculator_arena import settings, sqlfiles
from speculator_arena.atomic import atomic_path
from speculator_arena.errors import ArenaError
from speculator_arena.warehouse import generation
from speculator_arena.warehouse.schema import RAW_TABLES

if TYPE_CHECKING:  # the runner writes rows on machines without DuckDB (the GPU image)
    import duckdb


class WarehouseError(RuntimeError, ArenaError):
    """A write that could not complete; nothing already stored was changed."""


def arena_home(home: str | os.PathLike | None = None) -> Path:
    """`ARENA_HOME` (default `./arena_home`), the one place configuration of the home is read."""
    return settings.arena_home(home)


def _safe_id(value: str) -> str:
    if not value or any(c in value for c in "/\\=\0") or value in (".", ".."):
        raise ValueError(f"unsafe identifier for a partition: {value!r}")
    return value


class Warehouse:
    """One ARENA_HOME: `raw/<table>/evaluation_id=<id>/*.parquet` (plus the analysts' `arena.duckdb`)."""

    def __init__(self, home: str | os.PathLike | None = None):
        self.home = arena_home(home)
        self.raw = self.home / "raw"
        self.db_path = self.home / "arena.duckdb"

    # ---- writing -------------------------------------------------------------------------
    def partition_dir(self, table: str, evaluation_id: str) -> Path:
        if table not in RAW_TABLES:
            raise KeyError(f"unknown table {table!r}; tables: {sorted(RAW_TABLES)}")
        return self.raw / table / f"evaluation_id={_safe_id(evaluation_id)}"

    def write_rows(
        self,
        table: str,
        evaluation_id: str,
        rows: Iterable[Mapping[str, Any]] | pa.Table,
        *,
        part: str | None = None,
        replace: bool = False,
    ) -> Path | None:
        """Write rows as one new Parquet part, atomically.

        `part` names the file (a rewrite of the same part replaces it atomically, which is how
        the evaluation's status row changes); `replace=True` drops the partition's other parts
        after the new one is in place. Rows are validated against the table's schema first.
        """
        schema = RAW_TABLES[table]
        if isinstance(rows, pa.Table):
            tbl = rows
        else:
            rows = list(rows)
            if not rows:
                return None
            for r in rows:
                r_eval = r.get("evaluation_id", evaluation_id)
                if r_eval != evaluation_id:
                    raise ValueError(f"row for {r_eval!r} written to partition {evaluation_id!r}")
            cols = {
                name: [r.get(name, evaluation_id if name == "evaluation_id" else None) for r in rows]
                for name in schema.names
            }
            unknown = set().union(*(r.keys() for r in rows)) - set(schema.names)
            if unknown:
                raise ValueError(f"{table}: unknown columns {sorted(unknown)}")
            tbl = pa.table(cols, schema=schema)
        # evaluation_id lives in the path (hive partitioning); keep it out of the file body.
        body = tbl.cast(schema).drop_columns(["evaluation_id"])
        dest_dir = self.partition_dir(table, evaluation_id)
        dest_dir.mkdir(parents=True, exist_ok=True)
        name = f"{part or uuid.uuid4().hex}.parquet"
        dest = dest_dir / name
        try:
            with atomic_path(dest) as tmp:
                pq.write_table(body, tmp)
        except OSError as exc:
            hint = " (disk full)" if exc.errno == errno.ENOSPC else ""
            raise WarehouseError(f"could not write {table} rows of {evaluation_id}{hint}: {exc}") from exc
        if replace:
            for other in dest_dir.glob("*.parquet"):
                if other.name != name:
                    other.unlink()
        if table == "evaluations":
            self._refresh_catalog(evaluation_id)
        generation.bump(self.home)  # after the part is in place: readers re-check (generation.py)
        return dest

    def _refresh_catalog(self, evaluation_id: str) -> None:
        """Keep the evaluations catalog (catalog.py) current. It is a cache, never the truth:
        when it cannot be written, readers read the raw parts instead, so a failure here must
        not fail a write that already succeeded."""
        from speculator_arena.warehouse import catalog

        if not catalog.enabled():
            return
        try:
            catalog.upsert(self.home, evaluation_id)
        except (OSError, pa.ArrowException):
            pass

    def drop_evaluation(self, evaluation_id: str) -> None:
        """Remove every raw row of one evaluation (an operator's explicit act, never automatic)."""
        for table in RAW_TABLES:
            d = self.partition_dir(table, evaluation_id)
            if d.exists():
                shutil.rmtree(d)
        generation.bump(self.home)

    def read_table(self, table: str, evaluation_id: str | None = None) -> pa.Table:
        """Read one raw table (or one evaluation's rows) straight from Parquet, with the id column."""
        from speculator_arena.warehouse import catalog, parts

        if evaluation_id is None:
            self.partition_dir(table, "x")  # an unknown table is a KeyError, as for one evaluation
            ids = sorted(catalog.partition_mtimes(self.raw / table))
        else:
            self.partition_dir(table, evaluation_id)  # checks the table and that the id is a safe name
            ids = [evaluation_id]
        return parts.read_parts(self.home, table, ids)

    # ---- reading -------------------------------------------------------------------------
    def glob(self, table: str) -> str:
        return str(self.raw / table / "*" / "*.parquet")

    def connect(self, *, read_only: bool = False) -> duckdb.DuckDBPyConnection:
        """The operators' connection: an in-memory DuckDB with every view of sql/ over the raw
        Parquet (text of every split included). It never writes a database file: `arena.duckdb`
        is the analysts' file (warehouse/analysts.py), tables without hidden text.
        `read_only` is kept for callers that state their intent; both open the same views."""
        import duckdb

        self.home.mkdir(parents=True, exist_ok=True)
        con = duckdb.connect(":memory:")
        self._define_views(con, temporary=True)
        return con

    def raw_select(self, table: str) -> str:
        """The SELECT behind the view raw_<table>: every column of the schema from the table's
        Parquet parts, or no rows of the right types when it has none. Identifiers and paths are
        our own (schema and home), never user input."""
        schema = RAW_TABLES[table]
        root = self.raw / table
        if root.exists() and any(not f.name.startswith(".tmp-") for f in root.glob("*/*.parquet")):
            return warehouse_sql(
                "raw_parts.sql", columns=column_list(schema), empty=empty_select(schema), paths=quote(self.glob(table))
            )
        return empty_select(schema)

    def _define_views(self, con: duckdb.DuckDBPyConnection, *, temporary: bool) -> None:
        """The raw_* views are generated from the schemas (raw_select); every derived view is a
        file of warehouse/sql/ (sqlfiles.py)."""
        kw = "TEMPORARY VIEW" if temporary else "VIEW"
        for table in RAW_TABLES:
            con.execute(warehouse_sql("raw_view.sql", kind=kw, table=table, select=self.raw_select(table)))
        from speculator_arena.protocol import load_protocol

        define_scoring_rules(con, load_protocol(), temporary=temporary)
        for stmt in sql_statements(temporary=temporary):
            con.execute(stmt)


def define_scoring_rules(con: duckdb.DuckDBPyConnection, proto, *, temporary: bool = True) -> None:
    """The relation `scoring_rules` (task_id, count_slack_tokens) that the views of sql/ read:
    the rules of the protocol version being read (the latest for the warehouse's own views; the
    scorer defines it for the version it scores under)."""
    con.execute(warehouse_sql("scoring_rules.sql", kind="TEMP TABLE" if temporary else "TABLE"))
    con.executemany(
        warehouse_sql("insert_scoring_rule.sql"), [(task_id, int(proto.count_slack_tokens)) for task_id in proto.tasks]
    )


def empty_select(schema: pa.Schema) -> str:
    """A SELECT of no rows with the schema's columns and DuckDB types (a table with no rows yet)."""
    cols = ", ".join(f'CAST(NULL AS {_duck_type(f.type)}) AS "{f.name}"' for f in schema)
    return warehouse_sql("empty_rows.sql", columns=cols)


def warehouse_sql(name: str, **parts: str) -> str:
    """One of the warehouse's statement templates (sql/templates/), its parts formatted in."""
    return sqlfiles.template("speculator_arena.warehouse", name, **parts)


def column_list(schema: pa.Schema) -> str:
    """A schema's columns, quoted, for a SELECT list."""
    return ", ".join(f'"{n}"' for n in schema.names)


def quote(path) -> str:
    """A path as a SQL string literal."""
    return "'" + str(path).replace("'", "''") + "'"


def _duck_type(t: pa.DataType) -> str:
    if pa.types.is_list(t):
        return _duck_type(t.value_type) + "[]"
    return {pa.string(): "VARCHAR", pa.int64(): "BIGINT", pa.float64(): "DOUBLE", pa.bool_(): "BOOLEAN"}[t]


def macro_statements() -> list[str]:
    """The warehouse's macros (`sql/macros/`): functions the views and the analysts' copy rules share."""
    return sqlfiles.numbered("speculator_arena.warehouse", "sql/macros")


def sql_statements(*, temporary: bool = False) -> list[str]:
    """The warehouse's macros and views, then the analysts' views (sqlfiles.py): every connection
    defines them (the scorer's too). `temporary`: the views as temporary views (a read-only or
    in-memory connection), the one rewrite of the files' own `CREATE OR REPLACE VIEW` prefix."""
    views = sqlfiles.numbered("speculator_arena.warehouse") + sqlfiles.numbered(
        "speculator_arena.warehouse", "sql/analysts"
    )
    if temporary:
        views = [s.replace("CREATE OR REPLACE VIEW", "CREATE OR REPLACE TEMPORARY VIEW") for s in views]
    return macro_statements() + views
