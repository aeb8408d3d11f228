"""How a source file holds its records: JSON Lines, one JSON array, or Parquet, and compressed
with gzip, bz2, xz or zstd or not, told by the file's first bytes, never by its name.

Why this module: datasets are published as they are published (tau-bench's trajectories as one
JSON array, hh-rlhf as `.jsonl.gz`, the Hugging Face hub as Parquet), and a reader that assumes
JSON Lines refuses them with an error about the wrong thing ("not UTF-8" for a gzip file). The
decoding is done by well-kept readers: the standard library's gzip, bz2 and lzma, pyarrow for
zstd streams and for Parquet (`ParquetFile.iter_batches`), and ijson (yajl's C parser) for a
JSON array, element by element. What is written here is the glue they lack: every reader
streams and holds at most one record (`ARENA_MAX_RECORD_BYTES`) in memory, and every error
names the file, the place in it and, where one can be read, the record's id. Beside it:
`file_kinds.look` says what a file is, so a declaration that does not match it is told what to
declare; `compression.open_decoded` decompresses as the first bytes say; `source_errors` holds
the error and the record bound every reader shares.
"""

from __future__ import annotations

import datetime as _dt
import itertools
from decimal import Decimal
from pathlib import Path

from speculator_arena.errors import ArenaError
from speculator_arena.pools.ingest.compression import CHUNK, CodecError, open_decoded
from speculator_arena.pools.ingest.source_errors import (
    INCOMPLETE_HINT,
    NOT_UTF8_HINT,
    TOO_LARGE_HINT,
    SourceFormatError,
    max_record_bytes,
    parse_record,
    record_id,
)

CONTAINERS = ("jsonl", "json", "parquet")


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
class _TooLarge(ArenaError):
    pass


class _Metered:
    """The stream ijson reads, counting bytes: more than the record bound read since the last
    element was yielded (plus the one read that may hold that element's end) means the element
    being built is too large, and reading stops: an element is refused once the bound and at
    most two reads (of 64 KiB, fewer under a bound that small) of it are read."""

    def __init__(self, fh, limit: int):
        self.fh, self.limit = fh, limit
        self.size = max(1024, min(CHUNK, limit))
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
            f"whole file (more than {limit} bytes), record {record_id(raw[:CHUNK])}",
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
