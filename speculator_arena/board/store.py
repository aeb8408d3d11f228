"""The board's score store: what the scorer already computed, per evaluation, kept on disk.

Why: a board of hundreds of accounts shows what the scorer computed from each account's last
evaluations; computing it again from the raw rows in every fresh process (a server restart,
each `arena board --text`) cost seconds per render at 10,000 evaluations
(docs/benchmarks/board.md). The memo (board/memo.py) keeps the scorer's rows in memory; this
store keeps the same rows across processes, so a process re-scores only the evaluations that
landed or changed since any process last scored them.

What: `$ARENA_HOME/scores/board-store/v<N>-<key>/`, one directory per generation, each holding
the scorer's four frames (evaluations, passes, gates, figures) of the evaluations it keeps,
their bootstrap intervals as drawn (scoring/intervals.py: each depends on the evaluation's own
passes and seed alone) and, per evaluation, the fingerprint it was scored at (the mtime of each raw partition
directory, board/memo.py `_fingerprints`). `<key>` digests the protocol document and the
scorer's own source (scoring/, rules/, protocol/, warehouse/), so a changed document, a staged
version or a changed scorer never reads another's rows: it starts an empty store.

It is never authoritative. A row is used only when its evaluation's fingerprint equals the one
the reader has just taken (a racy fingerprint is never stored); anything unreadable, from
another key or not yet complete counts as absent and is scored again. Deleting it is always
safe, and a store no current key names (another scorer's source, a document no longer here) is
deleted an hour after its last write, at the next save (`prune`). A generation is written whole
under a temporary name and renamed (atomic.py), so a reader sees a complete one or the previous
one; writers are best effort (a read-only or full disk leaves the board scoring in memory as
before). `ARENA_SCORE_STORE=0` turns it off.

Exact: pandas' dtypes travel in the Parquet's pandas metadata and floats are stored as their
64 bits; a missing value in an object column is NaN or None as the scorer made it (a side
column records which), so a frame read back equals the frame written, value for value.
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

from speculator_arena import settings
from speculator_arena.atomic import atomic_path
from speculator_arena.warehouse.schema import TABLES

FRAMES = ("evaluations", "passes", "gates", "figures", "intervals")  # the scorer's four, the drawn intervals
PRINTS = "prints"
KEEP_GENERATIONS = 2  # the newest, and the one a reader may still be reading
OBJECTS = b"arena_object_columns"  # schema metadata: the columns that were of dtype object
NAN_MARK = "__nan__"  # side column: which missing cells of an object column were NaN, not None
CODE_DIRS = ("scoring", "rules", "protocol", "warehouse")
STALE_AFTER_SECONDS = 3600.0  # a store no current key names is removed once unwritten this long (`prune`)


def enabled() -> bool:
    return settings.flag("ARENA_SCORE_STORE")


@lru_cache(maxsize=1)
def code_digest() -> str:
    """A digest of the source the stored rows came from (the scorer and what it reads): rows
    scored by other code are not this code's rows."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for sub in CODE_DIRS:
        for p in sorted((root / sub).rglob("*")):
            if p.is_file() and p.suffix in (".py", ".sql", ".yaml", ".yml", ".json"):
                h.update(p.relative_to(root).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def store_dir(home: str | os.PathLike, version: int, digest: str) -> Path:
    key = hashlib.sha256(f"{digest}\0{code_digest()}".encode()).hexdigest()[:16]
    return Path(home) / "scores" / "board-store" / f"v{version}-{key}"


def _generations(d: Path) -> list[Path]:
    """Complete generations, newest first (a generation's name starts with its write time)."""
    try:
        names = [n for n in os.listdir(d) if n.startswith("g-")]
    except (FileNotFoundError, NotADirectoryError):
        return []
    return [d / n for n in sorted(names, reverse=True)]


def _to_table(df: pd.DataFrame) -> pa.Table:
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


def _to_frame(t: pa.Table) -> pd.DataFrame:
    """The frame `_to_table` was given. Object columns come back as object columns (pandas may
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


def _prints_table(prints: dict[str, tuple]) -> pa.Table:
    ids = sorted(prints)
    cols = {"evaluation_id": pa.array(ids, pa.string())}
    m = np.array([prints[i] for i in ids], dtype=np.int64).reshape(len(ids), len(TABLES))
    for k, table in enumerate(TABLES):
        cols[f"mtime_{table}"] = pa.array(m[:, k], pa.int64())
    return pa.table(cols)


def load(home: str | os.PathLike, version: int, digest: str) -> tuple[dict[str, pd.DataFrame], dict[str, tuple]] | None:
    """The newest generation's frames and fingerprints, or None (none, unreadable, or off)."""
    if not enabled():
        return None
    for gen in _generations(store_dir(home, version, digest))[:KEEP_GENERATIONS]:
        try:
            p = pq.read_table(gen / f"{PRINTS}.parquet")
            want = ["evaluation_id"] + [f"mtime_{t}" for t in TABLES]
            if p.column_names != want:
                return None
            ids = p.column("evaluation_id").to_pylist()
            m = np.column_stack([p.column(c).to_numpy() for c in want[1:]]) if ids else np.zeros((0, len(TABLES)))
            prints = {eid: tuple(row) for eid, row in zip(ids, m.astype(np.int64).tolist())}
            frames = {name: _to_frame(pq.read_table(gen / f"{name}.parquet")) for name in FRAMES}
            return frames, prints
        except (OSError, pa.ArrowException, ValueError, KeyError):
            continue  # removed under us by a writer, or torn by a disk error: the previous one
    return None


def save(
    home: str | os.PathLike, version: int, digest: str, frames: dict[str, pd.DataFrame], prints: dict[str, tuple]
) -> Path | None:
    """Write a new generation holding `frames` (the scorer's rows of the evaluations `prints`
    names, which hold only trustworthy fingerprints) and drop all but the newest few. Returns
    its directory, or None when the store is off or could not be written (reading goes on)."""
    if not enabled():
        return None
    d = store_dir(home, version, digest)
    try:
        tables = {name: _to_table(df) for name, df in frames.items()}
        for name, df in frames.items():  # a frame that would not read back as it is is not kept
            pd.testing.assert_frame_equal(_to_frame(tables[name]), df.reset_index(drop=True), check_exact=True)
        tables[PRINTS] = _prints_table(prints)
        gen = d / f"g-{time.time_ns():020d}-{uuid.uuid4().hex[:8]}"
        with atomic_path(gen, durable=False) as tmp:
            tmp.mkdir()
            for name, t in tables.items():
                pq.write_table(t, tmp / f"{name}.parquet")
    except (OSError, pa.ArrowException, ValueError, TypeError, AssertionError):
        return None  # a read-only home, a full disk, a frame Parquet cannot hold: score in memory
    for old in _generations(d)[KEEP_GENERATIONS:]:
        _remove_generation(old)
    prune(home)
    return gen


def _remove_generation(gen: Path) -> None:
    try:
        for f in gen.iterdir():
            f.unlink(missing_ok=True)
        gen.rmdir()
    except OSError:
        pass  # another writer removed it first


def prune(home: str | os.PathLike, stale_after: float = STALE_AFTER_SECONDS) -> list[Path]:
    """Remove the stores no current key names (rows scored under a protocol document or by
    scorer code that no longer exist here: they can never be read again) once their newest
    write is `stale_after` seconds old, so that a process still running the old code (a server
    not yet restarted after an upgrade) is not robbed of its store mid-session. Without it,
    every change of the scorer's source left its whole store behind. Returns what it removed."""
    from speculator_arena.protocol import available_versions, protocol_digest

    root = Path(home) / "scores" / "board-store"
    try:
        names = os.listdir(root)
    except (FileNotFoundError, NotADirectoryError):
        return []
    current = {store_dir(home, v, protocol_digest(v)).name for v in available_versions()}
    removed = []
    now = time.time()
    for name in sorted(set(names) - current):
        d = root / name
        if not name.startswith("v") or not d.is_dir():
            continue  # not a store of this module's making
        gens = _generations(d)
        try:
            newest = max([d.stat().st_mtime] + [g.stat().st_mtime for g in gens])
        except OSError:
            continue
        if now - newest < stale_after:
            continue
        try:
            for entry in d.iterdir():  # its generations, and any temporary a crashed writer left
                if entry.is_dir():
                    _remove_generation(entry)
                else:
                    entry.unlink(missing_ok=True)
            d.rmdir()
            removed.append(d)
        except OSError:
            pass  # written to meanwhile: kept
    return removed
