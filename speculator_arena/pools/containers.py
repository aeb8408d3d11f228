"""How a source file holds its records: JSON Lines, one JSON array, or Parquet, and compressed
with gzip, bz2, xz or zstd or not, told by the file's first bytes, never by its name.

Why this module: datasets are published as they are published (tau-bench's trajectories as one
JSON array, hh-rlhf as `.jsonl.gz`, the Hugging Face hub as Parquet), and a reader that assumes
JSON Lines refuses them with an error about the wrong thing ("not UTF-8" for a gzip file). The
decoding is done by well-kept readers: the standard library's gzip, bz2 and lzma, pyarrow for
zstd streams and for Parquet (`ParquetFile.iter_batches`), and ijson (yajl's C parser) for a
JSON array, element by element. What is written here is the glue they lack: `look` says what a
file is, so a declaration that does not match it is told what to declare; every reader streams
and holds at most one record (`ARENA_MAX_RECORD_BYTES`) in memory; and every error names the
file, the place in it and, where one can be read, the record's id.
"""

from __future__ import annotations

import bz2
import contextlib
import datetime as _dt
import gzip
import io
import itertools
import json
import lzma
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import IO

from speculator_arena import settings

CONTAINERS = ("jsonl", "json", "parquet")
_CHUNK = 1 << 16  # bytes read at a time, and the head `look` reads


class SourceFormatError(ValueError):
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


# ---- compression ----------------------------------------------------------------------------
_CODECS = (
    (b"\x1f\x8b", "gzip"),
    (b"BZh", "bz2"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"\x28\xb5\x2f\xfd", "zstd"),
)
# recognized to say what they are, not read: an archive holds files, not records
_ARCHIVES = (
    (b"PK\x03\x04", "a zip archive"),
    (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive"),
    (b"\x04\x22\x4d\x18", "lz4-compressed data"),
)


class CodecError(Exception):
    """The compressed stream is cut or broken (the codec's own error, as `.why`)."""

    def __init__(self, codec: str, exc: BaseException):
        self.codec = codec
        self.why = f"the {codec} stream is cut or broken ({type(exc).__name__}: {exc})"
        super().__init__(self.why)


class _Decoded(io.RawIOBase):
    """A decompressor's stream whose errors (EOFError, OSError, zlib, lzma, pyarrow) all become
    `CodecError`, so the readers meet one exception for a cut or broken compressed file."""

    def __init__(self, inner, codec: str):
        self.inner, self.codec = inner, codec

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        try:  # read1: what decompresses before a cut is returned before the cut raises
            data = self.inner.read1(len(b)) if hasattr(self.inner, "read1") else self.inner.read(len(b))
        except (EOFError, OSError, zlib.error, lzma.LZMAError, ValueError) as exc:
            raise CodecError(self.codec, exc) from None
        b[: len(data)] = data
        return len(data)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.inner.close()
        super().close()


def codec_of(head: bytes) -> str | None:
    return next((name for magic, name in _CODECS if head.startswith(magic)), None)


@contextlib.contextmanager
def open_decoded(path: Path | str) -> Iterator[tuple[IO[bytes], str | None]]:
    """(a binary stream of the file's content, the codec it was compressed with or None); a
    UTF-8 byte-order mark at the start is skipped."""
    path = Path(path)
    with open(path, "rb") as raw:
        codec = codec_of(raw.peek(8)[:8])
        if codec is None:
            stream = raw
        elif codec == "gzip":
            stream = io.BufferedReader(_Decoded(gzip.GzipFile(fileobj=raw, mode="rb"), codec), _CHUNK)
        elif codec == "bz2":
            stream = io.BufferedReader(_Decoded(bz2.BZ2File(raw, "rb"), codec), _CHUNK)
        elif codec == "xz":
            stream = io.BufferedReader(_Decoded(lzma.LZMAFile(raw, "rb"), codec), _CHUNK)
        else:  # zstd: the standard library has it only from Python 3.14; pyarrow has it
            import pyarrow as pa

            inner = pa.CompressedInputStream(pa.PythonFile(raw, mode="r"), "zstd")
            stream = io.BufferedReader(_Decoded(inner, codec), _CHUNK)
        try:
            if _peek(stream, 3) == b"\xef\xbb\xbf":
                stream.read(3)
            yield stream, codec
        finally:
            if stream is not raw:
                stream.close()


def _peek(stream: io.BufferedReader, n: int) -> bytes:
    try:
        return stream.peek(n)[:n]
    except CodecError:
        return b""  # the first read raises again, where the reader names the place


# ---- what a file is ----------------------------------------------------------------------------
KIND_TEXT = {
    "jsonl": "JSON Lines (one record per line)",
    "json-line": "one JSON object on one line",
    "object-start": "JSON text starting with an object",
    "json": "a JSON array",
    "json-object": "one JSON object over several lines (pretty-printed JSON: one record, or records nested under a key)",
    "parquet": "a Parquet file",
    "empty": "an empty file",
    "lfs-pointer": "a Git LFS pointer, not the data",
    "html": "an HTML page, not a data file",
    "tar": "a tar archive",
    "text": "text that is not JSON",
    "binary": "binary data that is none of JSON Lines, JSON, Parquet, gzip, bz2, xz and zstd",
    "utf-16": "UTF-16 text (the readers read UTF-8)",
}


@dataclass(frozen=True)
class Look:
    """What a file is, read from its first bytes (decompressed): `kind` (KIND_TEXT's keys, or an
    archive's name), the codec, and a short preview of its first line for the error message."""

    kind: str
    codec: str | None = None
    preview: str = ""

    def describe(self) -> str:
        what = KIND_TEXT.get(self.kind, self.kind)
        if self.kind == "broken-stream":
            what = f"a {self.codec} stream that does not decompress (cut or broken)"
        elif self.codec:
            what = f"{what}, {self.codec}-compressed"
        return what + (f" (it begins {self.preview!r})" if self.preview else "")


def look(path: Path | str) -> Look:
    """What the file at `path` is, from at most its first 64 KiB after decompression."""
    path = Path(path)
    with open(path, "rb") as fh:
        magic = fh.read(8)
    for m, name in _ARCHIVES:
        if magic.startswith(m):
            return Look(name)
    head = b""
    with open_decoded(path) as (fh, codec):
        try:
            while len(head) < _CHUNK and (piece := fh.read1(_CHUNK - len(head))):
                head += piece
        except CodecError:
            if not head:
                return Look("broken-stream", codec)
    kind = _kind(head)
    preview = ""
    if kind in ("text", "html", "binary"):
        first = head.lstrip()[:60].split(b"\n", 1)[0]
        preview = first.decode("utf-8", "replace") if kind != "binary" else first[:8].hex(" ")
    return Look(kind, codec, preview)


def _kind(head: bytes) -> str:
    if head.startswith(b"PAR1"):
        return "parquet"
    if len(head) >= 262 and head[257:262] == b"ustar":
        return "tar"
    if head.startswith(b"version https://git-lfs.github.com/spec/"):
        return "lfs-pointer"
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "utf-16"
    if b"\x00" in head[:1024]:
        return "binary"
    body = head.lstrip()
    if not body:
        return "empty"
    if body[:15].lower().startswith((b"<!doctype html", b"<html")):
        return "html"
    if body[:1] not in (b"{", b"["):
        return "text"
    first, nl, rest = body.partition(b"\n")
    if not nl:  # one line, longer than the head or the whole file: the reader will say
        return "object-start" if body[:1] == b"{" else "json"
    try:
        complete = isinstance(json.loads(first), (dict, list))
    except ValueError:
        complete = False
    more = bool(rest.strip())
    if body[:1] == b"[":
        return "jsonl" if complete and more else "json"
    if complete:
        return "jsonl" if more else "json-line"
    # a first line that is no whole object: pretty-printed JSON, unless it looks like a broken record
    return "object-start" if first.rstrip().endswith(b"}") else "json-object"


# which kinds each container reads (`traj`: one JSON document per file)
READS = {
    "jsonl": {"jsonl", "json-line", "object-start"},
    "json": {"json"},
    "parquet": {"parquet"},
    "traj": {"json-object", "json-line", "object-start"},
}
CONTAINER_TEXT = {"jsonl": "JSON Lines", "json": "a JSON array", "parquet": "Parquet", "traj": "one JSON document"}


# the container that reads a file of each kind ("object-start": JSON Lines or one document)
KIND_CONTAINER = {"jsonl": "jsonl", "json-line": "jsonl", "json": "json", "parquet": "parquet", "json-object": "traj"}


# ---- JSON Lines ------------------------------------------------------------------------------
def iter_jsonl(path: Path | str):
    """(line number, byte offset, object) of every non-blank line, read one line at a time with
    at most `max_record_bytes()` in memory, decompressed as the file's first bytes say. Every
    error names the file, the line, the byte offset (of the decompressed text) and the record's
    id: a line too large, a line that is not UTF-8, a line that is not JSON (a file cut
    mid-record ends so), a compressed stream cut short."""
    path = Path(path)
    limit = max_record_bytes()
    offset = 0
    with open_decoded(path) as (fh, codec):
        of = f" of the {codec}-decompressed text" if codec else ""
        for lineno in itertools.count(1):
            try:
                line = fh.readline(limit + 1)
            except CodecError as exc:
                raise SourceFormatError(
                    path, f"line {lineno} (byte {offset}{of})", exc.why, hint=INCOMPLETE_HINT
                ) from None
            if not line:
                return
            start, offset = offset, offset + len(line)
            if len(line) > limit and not line.endswith(b"\n"):
                raise SourceFormatError(
                    path,
                    f"line {lineno} (byte {start}{of}), record {record_id(line)}",
                    f"record larger than {limit} bytes (ARENA_MAX_RECORD_BYTES); not read",
                    hint=TOO_LARGE_HINT,
                )
            if not line.strip():
                continue
            obj = parse_record(
                path, line, lambda off, n=lineno, at=start: f"line {n} (byte {at + off}{of})", record_id(line)
            )
            yield lineno, start, obj


# ---- a JSON array, element by element --------------------------------------------------------
class _TooLarge(Exception):
    pass


class _Metered:
    """The stream ijson reads, counting bytes: more than the record bound read since the last
    element was yielded (plus the one read that may hold that element's end) means the element
    being built is too large, and reading stops: an element is refused once the bound and at
    most two reads (of 64 KiB, fewer under a bound that small) of it are read."""

    def __init__(self, fh, limit: int):
        self.fh, self.limit = fh, limit
        self.size = max(1024, min(_CHUNK, limit))
        self.pos = self.mark = 0
        self.head = b""  # the first read after the mark, for the record's id

    def read(self, n: int = -1) -> bytes:
        if n == 0:
            return b""  # ijson's probe of what read() returns
        data = self.fh.read(self.size if n is None or n < 0 else min(n, self.size))
        if self.pos == self.mark:
            self.head = data
        self.pos += len(data)
        if self.pos - self.mark > self.limit + self.size:
            raise _TooLarge
        return data

    def yielded(self) -> None:
        self.mark = self.pos


def iter_json_array(path: Path | str):
    """(index, object) of every element of a top-level JSON array, parsed by ijson's C backend
    one element at a time (floats as floats, as `json.loads` gives them); an element larger
    than `max_record_bytes()` is refused before much more than that is read of it (`_Metered`)."""
    import ijson

    path = Path(path)
    limit = max_record_bytes()
    with open_decoded(path) as (fh, codec):
        src = _Metered(fh, limit)
        of = f" of the {codec}-decompressed text" if codec else ""
        items = ijson.items(src, "item", use_float=True, buf_size=src.size)
        for i in itertools.count():
            try:
                obj = next(items)
            except StopIteration:
                return
            except _TooLarge:
                raise SourceFormatError(
                    path,
                    f"element [{i}] (from about byte {src.mark}{of}), record {record_id(src.head)}",
                    f"record larger than {limit} bytes (ARENA_MAX_RECORD_BYTES); not read",
                    hint=TOO_LARGE_HINT,
                ) from None
            except CodecError as exc:
                raise SourceFormatError(
                    path, f"element [{i}] (before byte {src.pos}{of})", exc.why, hint=INCOMPLETE_HINT
                ) from None
            except ijson.JSONError as exc:
                raise _array_error(path, f"element [{i}] (before byte {src.pos}{of})", exc, i) from None
            yield i, obj
            src.yielded()


INCOMPLETE_HINT = "the file is incomplete: download it again"


def _array_error(path: Path, where: str, exc: Exception, i: int) -> SourceFormatError:
    msg = exc.args[0] if exc.args else str(exc)
    msg = (msg.decode("utf-8", "replace") if isinstance(msg, bytes) else str(msg)).strip().split("\n", 1)[0]
    if "UTF8" in msg or "UTF-8" in msg:
        return SourceFormatError(path, where, f"not UTF-8 ({msg})", hint=NOT_UTF8_HINT)
    if "premature EOF" in msg or "Incomplete" in msg:
        return SourceFormatError(
            path,
            where,
            f"the file ends inside the array, after {i} complete elements ({msg}): it was cut",
            hint=INCOMPLETE_HINT,
        )
    if "trailing garbage" in msg:
        return SourceFormatError(
            path,
            where,
            f"more after the array's end ({msg})",
            hint="one JSON array per file; JSON Lines hold one record per line",
        )
    return SourceFormatError(path, where, f"not JSON ({msg}); a broken record", hint="mend or remove the record")


# ---- Parquet ---------------------------------------------------------------------------------
def iter_parquet(path: Path | str):
    """(row, record) of every row of a Parquet file, decoded by pyarrow a batch at a time: at
    most 64 rows, and fewer where the row groups' sizes say 64 rows would pass the record
    bound. Parquet cannot tell a missing field from a null one (a column exists for every
    record), so null fields are left out, as a JSON record without them reads; timestamps become
    POSIX seconds and decimals floats, as a JSON record would hold them. A row larger than
    `max_record_bytes()` is refused."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = Path(path)
    limit = max_record_bytes()
    try:
        pf = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as exc:
        raise SourceFormatError(
            path,
            "footer",
            f"not a readable Parquet file ({exc})",
            hint="a Parquet file ends with its footer: one without it was cut; download it again",
        ) from None
    meta = pf.metadata
    widest = max(
        (rg.total_byte_size / max(rg.num_rows, 1) for rg in map(meta.row_group, range(meta.num_row_groups))), default=1
    )
    batches = pf.iter_batches(batch_size=int(max(1, min(64, limit // max(widest, 1)))))
    row = 0
    while True:
        try:
            batch = next(batches)
        except StopIteration:
            return
        except (pa.ArrowException, OSError) as exc:
            raise SourceFormatError(path, f"rows from [{row}]", f"unreadable ({exc})", hint=INCOMPLETE_HINT) from None
        rows = batch.to_pylist() if batch.nbytes <= limit else None
        for i in range(batch.num_rows):
            if rows is None:  # some row of this batch may pass the bound: one at a time
                one = batch.slice(i, 1)
                if one.nbytes > limit:
                    ids = [k for k in _ID_KEYS if k in one.schema.names]
                    rid = str(one.column(ids[0])[0].as_py()) if ids else "?"
                    raise SourceFormatError(
                        path,
                        f"row [{row}], record {rid}",
                        f"record larger than {limit} bytes (ARENA_MAX_RECORD_BYTES); not read",
                        hint=TOO_LARGE_HINT,
                    )
                rec = one.to_pylist()[0]
            else:
                rec = rows[i]
            yield row, _as_json(rec)
            row += 1


_ID_KEYS = ("instance_id", "question_id", "conversation_id", "task_id", "id")


def _as_json(v):
    """A Parquet value as the JSON record would hold it (see iter_parquet)."""
    if isinstance(v, dict):
        return {k: _as_json(x) for k, x in v.items() if x is not None}
    if isinstance(v, list):
        return [_as_json(x) for x in v]
    if isinstance(v, _dt.datetime):
        return (v if v.tzinfo else v.replace(tzinfo=_dt.UTC)).timestamp()
    if isinstance(v, _dt.date):
        return v.isoformat()
    if isinstance(v, _dt.timedelta):
        return v.total_seconds()
    if isinstance(v, Decimal):
        return float(v)
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    return v


# ---- one interface ---------------------------------------------------------------------------
def iter_records(path: Path | str, container: str):
    """(where, object) of every record of a file in `container` ("jsonl", "json", "parquet");
    `where` names the place for error messages ("line 3 (byte 512)", "element [2] ...", "row [7]")."""
    if container == "jsonl":
        for lineno, start, obj in iter_jsonl(path):
            yield f"line {lineno} (byte {start})", obj
    elif container == "json":
        for i, obj in iter_json_array(path):
            yield f"element [{i}]", obj
    elif container == "parquet":
        for row, obj in iter_parquet(path):
            yield f"row [{row}]", obj
    else:
        raise ValueError(f"unknown container {container!r}; containers: {CONTAINERS}")


def read_whole(path: Path | str) -> tuple[bytes, str | None]:
    """One JSON document's bytes (decompressed) and its codec, refused past `max_record_bytes()`."""
    limit = max_record_bytes()
    path = Path(path)
    with open_decoded(path) as (fh, codec):
        try:
            raw = fh.read(limit + 1)
        except CodecError as exc:
            raise SourceFormatError(path, "whole file", exc.why, hint=INCOMPLETE_HINT) from None
    if len(raw) > limit:
        raise SourceFormatError(
            path,
            f"whole file (more than {limit} bytes), record {record_id(raw[:_CHUNK])}",
            f"record larger than {limit} bytes (ARENA_MAX_RECORD_BYTES); not read",
            hint=TOO_LARGE_HINT,
        )
    return raw, codec


def read_all(path: Path | str) -> bytes:
    """A whole file's content, decompressed (for the readers that need it whole: ShareGPT's cut
    JSON list, whose cut they keep)."""
    path = Path(path)
    with open_decoded(path) as (fh, _codec):
        try:
            return fh.read()
        except CodecError as exc:
            raise SourceFormatError(path, "whole file", exc.why, hint=INCOMPLETE_HINT) from None
