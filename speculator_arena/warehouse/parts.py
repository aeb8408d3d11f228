"""Raw rows read straight from evaluations' Parquet parts, with pyarrow only (no DuckDB).

Why one module: `Warehouse.read_table`, the evaluations catalog (catalog.py) and the packs
(packs.py, and through them the scorer) all read parts the same way: list a partition's
finished parts (never a `.tmp-` file a writer is still renaming), read the columns asked for,
put `evaluation_id` back from the folder name (it lives in the path, not in the file body), and
give a part written under an older schema the newer columns as nulls. The GPU image, which has
pyarrow but not DuckDB, reads through it too.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from speculator_arena.warehouse.schema import RAW_TABLES

PREFIX = "evaluation_id="


def partition_mtime(home: str | os.PathLike, table: str, evaluation_id: str) -> int:
    """mtime_ns of one partition directory, -1 when it does not exist. The store writes by
    create-and-rename, which moves it: the catalog, the packs and the board's memo compare it.
    (os.stat on a string: for thousands of evaluations, pathlib's joins cost as much as the stats.)"""
    try:
        return os.stat(f"{home}/raw/{table}/{PREFIX}{evaluation_id}").st_mtime_ns
    except FileNotFoundError:
        return -1


def part_files(home: str | os.PathLike, table: str, evaluation_id: str) -> list[Path]:
    """The finished parts of one partition, in name order ([] when it does not exist)."""
    d = Path(home) / "raw" / table / f"{PREFIX}{evaluation_id}"
    try:
        return sorted(d / n for n in os.listdir(d) if n.endswith(".parquet") and not n.startswith(".tmp-"))
    except FileNotFoundError:
        return []


def conform(t: pa.Table, schema: pa.Schema, columns: list[str]) -> pa.Table:
    """`t` with exactly `columns` of `schema`, of its types (missing ones as nulls)."""
    for name in columns:
        if name not in t.column_names:
            t = t.append_column(name, pa.nulls(t.num_rows, schema.field(name).type))
    t = t.select(columns)
    want = pa.schema([schema.field(c) for c in columns])
    return t if t.schema.equals(want) else t.cast(want)


def read_parts(
    home: str | os.PathLike, table: str, ids: list[str], columns: list[str] | None = None, *, vanished_ok: bool = False
) -> pa.Table:
    """Rows of these evaluations from their parts, evaluation by evaluation in `ids` order.

    `vanished_ok`: a part removed between listing and reading (a writer replaced the partition's
    parts) is skipped instead of raising; for readers that re-check the partition's mtime later
    (the catalog)."""
    schema = RAW_TABLES[table]
    columns = list(columns or schema.names)
    body = [c for c in columns if c != "evaluation_id"]
    out = []
    for eid in ids:
        for f in part_files(home, table, eid):
            try:
                pf = pq.ParquetFile(f)
            except FileNotFoundError:
                if vanished_ok:
                    continue
                raise
            t = pf.read(columns=[c for c in body if c in pf.schema_arrow.names], use_threads=False)
            t = t.append_column("evaluation_id", pa.array([eid] * t.num_rows, pa.string()))
            out.append(conform(t, schema, columns))
    return pa.concat_tables(out) if out else pa.schema([schema.field(c) for c in columns]).empty_table()
