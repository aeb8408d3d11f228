"""The warehouse's change marker: one small file every writer of raw rows replaces after it writes.

Why: the board re-checks the warehouse after each cache expiry, and checking means a stat per
partition directory (10,040 for the listing, 870 x 12 for the scores' fingerprints at 10,000
evaluations: 0.3-0.5 s on a loaded 2-core machine, against an empty board's 0.02 s). One read
of one file tells a reader whether anything could have changed since its last full check.

The rule: `$ARENA_HOME/catalog/generation` holds a value no bump ever wrote before (the time
and a random suffix), replaced atomically (`atomic_path`). Every code path that lands,
rewrites, repacks or deletes an evaluation's raw rows calls `bump` AFTER its change is in place
(`Warehouse.write_rows`, `Warehouse.drop_evaluation`, the Kubernetes landing's moves, the
packer), and publishing a protocol version (`calibration/publish.py`: a board of the latest
version must score under the new one). A reader reads the value BEFORE it walks the folders and keeps it with what it read;
while the value is the same, nothing that bumped can have changed since the walk, so it may
skip the next walk. A missing file is a value too (None): deleting it is always safe (readers
walk once), and a home no writer has bumped yet compares None to None (nothing bumped since).

What the marker cannot see, and what bounds it:
- a change made by hand (files copied into `raw/`, a partition removed with `rm`), or by a
  writer that crashed between its write and its bump: readers see it at their next full check.
  Readers that skip walks on this marker walk anyway once `ARENA_BOARD_FULL_CHECK` seconds
  (default 300) passed since their last walk; `ARENA_BOARD_FULL_CHECK=0` walks on every read
  (the behaviour before the marker), and `python -m speculator_arena.warehouse.generation
  [ARENA_HOME]` (or deleting the file) makes every reader walk at its next read.
- a bump that cannot be written (a read-only or full disk) is ignored: the write it follows
  succeeded, so it must not fail; the same full check bounds how long it goes unseen.

Stdlib only: the runner writes rows (and so bumps) on machines without DuckDB.
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

NAME = "generation"


def marker_path(home: str | os.PathLike) -> Path:
    return Path(home) / "catalog" / NAME


def read(home: str | os.PathLike) -> str | None:
    """The marker's value now (None: no marker). One open and read of a few bytes."""
    try:
        with open(marker_path(home), encoding="utf-8") as fh:
            return fh.read()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError:
        return f"unreadable-{uuid.uuid4().hex}"  # never equal to a value seen before: walk


def bump(home: str | os.PathLike) -> None:
    """Replace the marker with a value never written before. Call after the change is in place."""
    from speculator_arena.atomic import atomic_path

    try:
        with atomic_path(marker_path(home), durable=False) as tmp:
            tmp.write_text(f"{time.time_ns()}-{uuid.uuid4().hex}", encoding="utf-8")
    except OSError:
        pass  # see the module's docstring: readers' full check bounds what this leaves unseen


if __name__ == "__main__":  # python -m speculator_arena.warehouse.generation [ARENA_HOME]: readers walk next time
    import sys

    from speculator_arena import settings

    h = settings.arena_home(sys.argv[1] if len(sys.argv) > 1 else None)
    bump(h)
    print(f"bumped {marker_path(h)}")
