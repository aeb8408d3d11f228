"""A full disk as an operator message: one line that names the path and the space left.

Why a module of its own: a full disk surfaces as many different exceptions, raised in the
runner, the scorer and Dagster's storage: OSError with ENOSPC or EDQUOT from a write (pyarrow's
too), the warehouse's WarehouseError around one, sqlite3's "database or disk is full" (or its
"disk I/O error" when the journal could not grow) under Dagster's run and event storage, and
SQLAlchemy or Dagster wrapping those. The runner and the CLI recognise them all here, the same
way, and say the same thing: `disk full: could not write PATH (12.0 KiB free of 32.0 MiB)`, so
that an operator knows what to free and a full disk is never a traceback.

`atomic.py` raises `DiskFull` (an OSError, so `except OSError` still holds) naming the file
it could not write: a write error from the kernel does not name it.
"""

from __future__ import annotations

import errno
import os
import shutil
import sqlite3
from collections import deque
from pathlib import Path

from speculator_arena.errors import ArenaError

FULL_ERRNOS = frozenset(e for e in (errno.ENOSPC, getattr(errno, "EDQUOT", None)) if e is not None)
# sqlite3 reports a full disk as SQLITE_FULL, or as SQLITE_IOERR when a journal or WAL write
# failed; the second is a full disk only when the filesystem is (nearly) full (see full_disk).
_FULL_TEXTS = ("database or disk is full", "no space left on device", "disk quota exceeded")
_SQLITE_IO = ("disk i/o error",)
NEARLY_FULL_BYTES = 1 << 20


class DiskFull(OSError, ArenaError):
    """A write failed because its filesystem is full. str() is the operator's one line."""

    def __init__(self, path: str | os.PathLike, detail: str = "", hint: str = ""):
        self.path = str(path)
        line = f"disk full: could not write {self.path} ({space_left(self.path)})" + (f"; {hint}" if hint else "")
        super().__init__(errno.ENOSPC, line, self.path)
        self.detail, self.hint = detail, hint

    def __str__(self) -> str:
        return self.strerror


def space_left(path: str | os.PathLike) -> str:
    """`<free> free of <size>` on the filesystem holding `path` (its nearest existing parent)."""
    p = Path(path)
    while not p.exists() and p != p.parent:
        p = p.parent
    try:
        u = shutil.disk_usage(p)
    except OSError:
        return "free space unknown"
    return f"{_size(u.free)} free of {_size(u.total)}"


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def _chain(exc: BaseException):
    """`exc` and everything it was raised from, nearest first."""
    seen = set()
    stack = deque([exc])
    while stack:
        e = stack.popleft()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        stack += [e.__cause__, e.__context__]
        stack += list(getattr(e, "exceptions", ()) or ())  # an ExceptionGroup's members
        orig = getattr(e, "orig", None)  # SQLAlchemy's DBAPIError keeps the driver's error here
        if isinstance(orig, BaseException):
            stack.append(orig)


def full_disk(exc: BaseException, home: str | os.PathLike | None = None) -> DiskFull | None:
    """The DiskFull behind `exc` (or one made for the path it names, else for `home`), when
    `exc` or anything it was raised from is a full disk; None otherwise."""
    for e in _chain(exc):
        if isinstance(e, DiskFull):
            return e
    for e in _chain(exc):
        if isinstance(e, OSError) and e.errno in FULL_ERRNOS:
            return DiskFull(e.filename or home or os.getcwd(), str(e))
    for e in _chain(exc):
        text = str(e).lower()
        if any(m in text for m in _FULL_TEXTS):  # sqlite3's, DuckDB's, or a wrapper's copy of either
            return DiskFull(home or os.getcwd(), str(e))
        if isinstance(e, sqlite3.Error) and any(m in text for m in _SQLITE_IO) and home and _nearly_full(home):
            return DiskFull(home, str(e))
    return None


def _nearly_full(path: str | os.PathLike) -> bool:
    p = Path(path)
    while not p.exists() and p != p.parent:
        p = p.parent
    try:
        return shutil.disk_usage(p).free < NEARLY_FULL_BYTES
    except OSError:
        return False


def full_disk_text(text: str) -> bool:
    """Whether a message (a library's own report, not an exception) is about a full disk, or the
    sqlite "disk I/O error" a full disk gives."""
    low = text.lower()
    return any(m in low for m in _FULL_TEXTS) or any(m in low for m in _SQLITE_IO)
