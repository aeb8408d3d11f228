"""The arena's one atomic write: a file (or a directory) appears whole under its name, or not at all.

Every stored thing is written this way (warehouse parts, the evaluations snapshot, the analysts'
database, score registries, pool files, manifests, run state, journals): a crash, a full disk or
a kill mid-write leaves the previous version in place and never a torn file that a reader would
take for a complete one. `atomic_path` yields a fresh name beside the destination that does not
exist yet, so any writer (open(), `pq.write_table`, `duckdb.connect`, `mkdir`) can fill it; on
success the result is flushed to disk and renamed over the destination (rename is atomic within
one filesystem, which the name beside the destination guarantees), then the directory entry is
flushed; on any error the temporary is removed and the destination is untouched. A full disk
is raised as `diskspace.DiskFull` naming the destination (an OSError with ENOSPC).
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from speculator_arena.diskspace import FULL_ERRNOS, DiskFull


def fsync_dir(path: str | os.PathLike) -> None:
    """Flush a directory's entries (a rename into it survives a power cut). Best effort: some
    filesystems refuse to open a directory for reading."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_file(path: Path) -> None:
    with open(path, "rb") as fh:
        os.fsync(fh.fileno())


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


@contextmanager
def atomic_path(dest: str | os.PathLike, *, durable: bool = True) -> Iterator[Path]:
    """Yield a temporary path beside `dest` (not yet existing); fill it; it replaces `dest` on exit.

    `durable=False` skips the fsyncs (caches that can be recomputed). A directory may be written
    too; it replaces `dest` only when `dest` does not exist or is an empty directory (rename's rule).
    """
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".tmp-{dest.name}-{uuid.uuid4().hex[:12]}")
    try:
        yield tmp
        if durable and tmp.is_file():
            _fsync_file(tmp)
        os.replace(tmp, dest)
        if durable:
            fsync_dir(dest.parent)
    except BaseException as exc:
        _remove(tmp)
        Path(f"{tmp}.wal").unlink(missing_ok=True)  # DuckDB's write-ahead log beside a database
        if isinstance(exc, OSError) and exc.errno in FULL_ERRNOS and not isinstance(exc, DiskFull):
            raise DiskFull(dest, str(exc)) from exc  # the kernel's error does not name the file
        raise


def write_atomic(dest: str | os.PathLike, data: str | bytes, *, durable: bool = True) -> Path:
    """Write bytes (or UTF-8 text) to `dest` atomically; returns `dest`."""
    with atomic_path(dest, durable=durable) as tmp:
        tmp.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return Path(dest)


def write_json_atomic(dest: str | os.PathLike, obj: Any, **dumps: Any) -> Path:
    """`json.dumps(obj, **dumps)` written atomically (a trailing newline added)."""
    return write_atomic(dest, json.dumps(obj, **dumps) + "\n")
