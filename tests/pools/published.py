"""Writers of source files as datasets are published, for the tests: the same records as JSON
Lines, a JSON array or Parquet, compressed with gzip, bz2, xz or zstd or not (by the standard
library and pyarrow, the libraries the arena reads them with)."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

CODECS = ("gzip", "bz2", "xz", "zstd")


def compress(data: bytes, codec: str | None) -> bytes:
    if codec is None:
        return data
    if codec == "gzip":  # the fastest levels: what is tested is the reading, not the ratio
        return gzip.compress(data, compresslevel=1)
    if codec == "bz2":
        return bz2.compress(data, compresslevel=1)
    if codec == "xz":
        return lzma.compress(data, preset=0)
    out = pa.BufferOutputStream()
    with pa.CompressedOutputStream(out, "zstd") as z:
        z.write(data)
    return out.getvalue().to_pybytes()


def write(path: Path, records: list[dict], container: str, codec: str | None = None) -> Path:
    """`records` into `path` as `container` ("jsonl", "json", "parquet"), compressed by `codec`."""
    if container == "parquet":
        pq.write_table(pa.Table.from_pylist(records), path)
        return path
    if container == "jsonl":
        text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
    else:  # an indented array, as json.dump(..., indent=...) publishes one
        text = json.dumps(records, ensure_ascii=False, indent=1)
    path.write_bytes(compress(text.encode("utf-8"), codec))
    return path


def read_jsonl(path: Path) -> list[dict]:
    """Records of a JSON Lines file (split at newlines only: str.splitlines would also split at
    the U+2028 that some texts hold)."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n") if line.strip()]
