"""What a file is, read from its first bytes (decompressed): JSON Lines, a JSON array, Parquet,
one JSON document, or something no container reads (an LFS pointer, an HTML page, an archive,
UTF-16 text), so a declaration that does not match its file is told what to declare.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from speculator_arena.pools.ingest.compression import ARCHIVES, CHUNK, CodecError, open_decoded

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
    for m, name in ARCHIVES:
        if magic.startswith(m):
            return Look(name)
    head = b""
    with open_decoded(path) as (fh, codec):
        try:
            while len(head) < CHUNK and (piece := fh.read1(CHUNK - len(head))):
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
