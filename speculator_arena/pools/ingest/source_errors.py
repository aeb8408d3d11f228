"""The error a source file that does not follow its format raises, the memory bound of one
record, and the pieces every container reader uses to name a bad record (its id, its JSON).

Why its own module: every reader of a source (containers.py, readers.py, conversations.py and
the trace and app readers) raises the same error with the same message shape: the file, the
place in it, the record's id, and what to change.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from speculator_arena import settings
from speculator_arena.errors import ArenaError


class SourceFormatError(ValueError, ArenaError):
    """A source file that does not follow its format; `.partial` holds what was read before.

    The message names the file, where in it (line and byte offset, element, row), the record's
    id when one could be read, and `hint`: what to change. A declared set's reader adds the
    set's name and format and how many records were read and kept before the error (`within`).
    """

    def __init__(self, path: Path | str, where: str, why: str, partial: list | None = None, *, hint: str = ""):
        self.path = str(path)
        self.where = where
        self.why = why
        self.partial = partial or []
        self.hint = hint
        self.source: str | None = None
        self.format: str | None = None
        self.read: int | None = None
        self.kept: int | None = None
        super().__init__(path, where, why)

    def within(self, source: str, fmt: str, read: int, kept: int) -> SourceFormatError:
        """The declared set this error happened in, and its records read and kept before it."""
        self.source, self.format, self.read, self.kept = source, fmt, read, kept
        return self

    def __str__(self) -> str:
        head = f"declared source {self.source!r} (format: {self.format}): " if self.source else ""
        if self.read is not None:
            counts = f"{self.read} records read and {self.kept} kept before it"
        else:
            counts = f"{len(self.partial)} records read before it are kept in .partial"
        tail = f"; {self.hint}" if self.hint else ""
        return f"{head}{self.path}: {self.where}: {self.why} ({counts}){tail}"


def max_record_bytes() -> int:
    """The memory bound of one record (one JSONL line, one array element, one Parquet row, one
    JSON file): `ARENA_MAX_RECORD_BYTES`, else 64 MiB. A larger record is refused with its file,
    place and id, never read whole."""
    return int(settings.number("ARENA_MAX_RECORD_BYTES"))


TOO_LARGE_HINT = "raise ARENA_MAX_RECORD_BYTES if a record this large is real"

_RECORD_ID = re.compile(rb'"(?:instance_id|question_id|conversation_id|task_id|id)"\s*:\s*"?([^",}\s]{1,80})')


def record_id(head: bytes) -> str:
    """The record's id as it appears near the start of its raw bytes, for error messages
    (the record itself may be unreadable: cut, not UTF-8, too large)."""
    m = _RECORD_ID.search(head[:65536])
    return m.group(1).decode("utf-8", "replace") if m else "?"


def parse_record(path: Path, raw: bytes, where, rid: str):
    """One record's bytes as JSON; an error names the file, `where(byte offset)` and the id."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SourceFormatError(
            path, f"{where(exc.start)}, record {rid}", f"not UTF-8 ({exc.reason})", hint=NOT_UTF8_HINT
        ) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise SourceFormatError(
            path,
            f"{where(len(text[: exc.pos].encode()))}, record {rid}",
            f"not JSON ({exc.msg}); a cut or broken record",
            hint="a file that ends inside a record was cut (download it again); elsewhere, mend or remove the record",
        ) from None


NOT_UTF8_HINT = (
    "the readers read UTF-8 text, and gzip, bz2, xz or zstd compression by the file's first bytes: "
    "re-encode the file as UTF-8"
)


INCOMPLETE_HINT = "the file is incomplete: download it again"
