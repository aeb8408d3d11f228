"""What the two stores of derived rows share: frames on disk exactly, fingerprints, generations.

Two stores keep what the scorer derived from the raw rows so that it is not derived again: the
board's score store (board/store.py: the scorer's output per protocol version) and the
scorer's request store (scoring/request_store.py: per-request work that no protocol rule but
the count slack enters). Both are caches that are never authoritative, and both need the same
four things, written once here:

- a pandas frame written to Parquet and read back equal value for value (`to_table`,
  `to_frame`): dtypes travel in the pandas metadata, floats as their 64 bits, and a missing
  cell of an object column comes back None or NaN as it was (a side column records which);
- the fingerprint table (`prints_table`, `read_prints`): per evaluation, the mtime of each raw
  partition directory when it was read (warehouse/catalog.py `fingerprints`), plus any
  integer key columns the store adds;
- the digest of the source the rows came from (`source_digest`): rows another version of the
  code derived are not this code's rows;
- generations (`generations`, `write_generation`, `remove_generation`): a store writes a whole
  new directory under a temporary name and renames it, so a reader sees a complete generation
  or the previous one, and keeps the newest few; `prune_stores` removes the stores of keys no
  longer current once nothing in them was written for a while.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import uuid
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from speculator_arena.atomic import atomic_path
from speculator_arena.warehouse.schema import TABLES

OBJECTS = b"arena_object_columns"  # schema metadata: the columns that were of dtype object
NAN_MARK = "__nan__"  # side column: which missing cells of an object column were NaN, not None
PACKAGE = Path(__file__).resolve().parents[1]


@lru_cache(maxsize=8)
def source_digest(dirs: tuple[str, ...]) -> str:
    """A digest of the package's source under `dirs` (its .py, .sql, .yaml, .yml and .json files)."""
    h = hashlib.sha256()
    for sub in dirs:
        for p in sorted((PACKAGE / sub).rglob("*")):
            if p.is_file() and p.suffix in (".py", ".sql", ".yaml", ".yml", ".json"):
                h.update(p.relative_to(PACKAGE).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def to_table(df: pd.DataFrame) -> pa.Table:
    """`df` as an Arrow table that `to_frame` turns back into `df`, value for value."""
    marks, objects = {}, []
    for c in df.columns:
        if df[c].dtype == object:
            objects.append(c)
            nan = df[c].map(lambda v: isinstance(v, float) and v != v).to_numpy(dtype=bool)
            if nan.any():
                marks[f"{NAN_MARK}{c}"] = nan
    out = df.reset_index(drop=True)
    if marks:
        out = out.assign(**marks)
    t = pa.Table.from_pandas(out, preserve_index=False)
    return t.replace_schema_metadata({**(t.schema.metadata or {}), OBJECTS: json.dumps(objects).encode()})


def to_frame(t: pa.Table) -> pd.DataFrame:
    """The frame `to_table` was given. Object columns come back as object columns (pandas may
    read text as its string dtype), their missing cells None or NaN as they were."""
    objects = json.loads((t.schema.metadata or {}).get(OBJECTS, b"[]"))
    df = t.to_pandas()
    for col in objects:
        mark = f"{NAN_MARK}{col}"
        nan = df.pop(mark).to_numpy(dtype=bool) if mark in df.columns else None
        if df[col].dtype == object and nan is None:
            continue
        values = df[col].to_numpy(dtype=object, copy=True)
        values[pd.isna(df[col]).to_numpy(dtype=bool)] = None
        if nan is not None:
            values[nan] = np.nan
        df[col] = pd.Series(values, index=df.index, dtype=object)
    return df


def exact_tables(frames: dict[str, pd.DataFrame]) -> dict[str, pa.Table]:
    """`frames` as tables, each checked to read back as it is (AssertionError: not storable)."""
    tables = {name: to_table(df) for name, df in frames.items()}
    for name, df in frames.items():
        pd.testing.assert_frame_equal(to_frame(tables[name]), df.reset_index(drop=True), check_exact=True)
    return tables


def prints_table(prints: dict[str, tuple], extra: dict[str, dict[str, int]] | None = None) -> pa.Table:
    """The fingerprints (evaluation id -> one mtime per raw table) as a table, with the integer
    key columns `extra` ({column: {evaluation id: value}}) beside them."""
    ids = sorted(prints)
    cols = {"evaluation_id": pa.array(ids, pa.string())}
    m = np.array([prints[i] for i in ids], dtype=np.int64).reshape(len(ids), len(TABLES))
    for k, table in enumerate(TABLES):
        cols[f"mtime_{table}"] = pa.array(m[:, k], pa.int64())
    for name, values in (extra or {}).items():
        cols[name] = pa.array([int(values[i]) for i in ids], pa.int64())
    return pa.table(cols)


def read_prints(t: pa.Table, extra: tuple[str, ...] = ()) -> dict[str, tuple]:
    """`prints_table`'s rows back: {evaluation id: (mtime per raw table..., extra columns...)}.
    ValueError when the table's columns are not those (another layout)."""
    want = ["evaluation_id"] + [f"mtime_{t}" for t in TABLES] + list(extra)
    if t.column_names != want:
        raise ValueError(f"fingerprint columns {t.column_names}, expected {want}")
    ids = t.column("evaluation_id").to_pylist()
    if not ids:
        return {}
    m = np.column_stack([t.column(c).to_numpy() for c in want[1:]]).astype(np.int64)
    return {eid: tuple(row) for eid, row in zip(ids, m.tolist())}


def generations(d: Path) -> list[Path]:
    """Complete generations of the store `d`, newest first (a name starts with its write time)."""
    try:
        names = [n for n in os.listdir(d) if n.startswith("g-")]
    except (FileNotFoundError, NotADirectoryError):
        return []
    return [d / n for n in sorted(names, reverse=True)]


def write_generation(d: Path, tables: dict[str, pa.Table], keep: int) -> Path:
    """A new generation of `d` holding `tables` (<name>.parquet each), written whole and renamed;
    all but the newest `keep` generations removed. OSError and Arrow errors pass to the caller."""
    gen = d / f"g-{time.time_ns():020d}-{uuid.uuid4().hex[:8]}"
    with atomic_path(gen, durable=False) as tmp:
        tmp.mkdir()
        for name, t in tables.items():
            pq.write_table(t, tmp / f"{name}.parquet")
    for old in generations(d)[keep:]:
        remove_generation(old)
    return gen


def remove_generation(gen: Path) -> None:
    try:
        for f in gen.iterdir():
            f.unlink(missing_ok=True)
        gen.rmdir()
    except OSError:
        pass  # another writer removed it first


def prune_stores(root: Path, current: set[str], stale_after: float, mine=lambda name: True) -> list[Path]:
    """Remove the stores under `root` (one directory per key) that `current` does not name and
    `mine(name)` claims, once neither the store nor anything in it two levels down (its
    generations, or its shards and theirs) was written for `stale_after` seconds: a process still
    running the old code is not robbed of its store mid-session. A store written to while being
    removed is kept. Returns what it removed."""
    try:
        names = os.listdir(root)
    except (FileNotFoundError, NotADirectoryError):
        return []
    removed, now = [], time.time()
    for name in sorted(set(names) - current):
        d = root / name
        if not mine(name) or not d.is_dir():
            continue  # not a store of its owner's making
        try:
            newest = max(p.stat().st_mtime for p in [d, *d.glob("*"), *d.glob("*/*")] if p.is_dir())
        except OSError:
            continue
        if now - newest < stale_after:
            continue
        try:
            _remove_tree(d)
            removed.append(d)
        except OSError:
            pass  # written to meanwhile: kept
    return removed


def _remove_tree(d: Path) -> None:
    """`d` and everything in it; an entry appearing meanwhile makes the last rmdir fail (OSError)."""
    for entry in d.iterdir():  # generations, shards, and any temporary a crashed writer left
        if entry.is_dir():
            _remove_tree(entry)
        else:
            entry.unlink(missing_ok=True)
    d.rmdir()
