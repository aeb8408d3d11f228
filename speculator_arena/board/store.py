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
directory, warehouse/catalog.py `fingerprints`). `<key>` digests the protocol document and the
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
import os
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from speculator_arena import settings
from speculator_arena.warehouse.frame_files import (
    exact_tables,
    generations,
    prints_table,
    prune_stores,
    read_prints,
    source_digest,
    to_frame,
    write_generation,
)

FRAMES = ("evaluations", "passes", "gates", "figures", "intervals")  # the scorer's four, the drawn intervals
PRINTS = "prints"
KEEP_GENERATIONS = 2  # the newest, and the one a reader may still be reading
CODE_DIRS = ("scoring", "rules", "protocol", "warehouse")
STALE_AFTER_SECONDS = 3600.0  # a store no current key names is removed once unwritten this long (`prune`)


def enabled() -> bool:
    return settings.flag("ARENA_SCORE_STORE")


def code_digest() -> str:
    """A digest of the source the stored rows came from (the scorer and what it reads): rows
    scored by other code are not this code's rows."""
    return source_digest(CODE_DIRS)


def store_dir(home: str | os.PathLike, version: int, digest: str) -> Path:
    key = hashlib.sha256(f"{digest}\0{code_digest()}".encode()).hexdigest()[:16]
    return Path(home) / "scores" / "board-store" / f"v{version}-{key}"


def load(home: str | os.PathLike, version: int, digest: str) -> tuple[dict[str, pd.DataFrame], dict[str, tuple]] | None:
    """The newest generation's frames and fingerprints, or None (none, unreadable, or off)."""
    if not enabled():
        return None
    for gen in generations(store_dir(home, version, digest))[:KEEP_GENERATIONS]:
        try:
            prints = read_prints(pq.read_table(gen / f"{PRINTS}.parquet"))
            frames = {name: to_frame(pq.read_table(gen / f"{name}.parquet")) for name in FRAMES}
            return frames, prints
        except (OSError, pa.ArrowException, ValueError, KeyError):
            continue  # removed under us by a writer, torn by a disk error, another layout: the previous one
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
        tables = exact_tables(frames)  # a frame that would not read back as it is is not kept
        tables[PRINTS] = prints_table(prints)
        gen = write_generation(d, tables, KEEP_GENERATIONS)
    except (OSError, pa.ArrowException, ValueError, TypeError, AssertionError):
        return None  # a read-only home, a full disk, a frame Parquet cannot hold: score in memory
    prune(home)
    return gen


def prune(home: str | os.PathLike, stale_after: float = STALE_AFTER_SECONDS) -> list[Path]:
    """Remove the stores no current key names (rows scored under a protocol document or by
    scorer code that no longer exist here: they can never be read again) once their newest
    write is `stale_after` seconds old, so that a process still running the old code (a server
    not yet restarted after an upgrade) is not robbed of its store mid-session. Without it,
    every change of the scorer's source left its whole store behind. Returns what it removed."""
    from speculator_arena.protocol import available_versions, protocol_digest

    current = {store_dir(home, v, protocol_digest(v)).name for v in available_versions()}
    return prune_stores(Path(home) / "scores" / "board-store", current, stale_after, lambda name: name.startswith("v"))
