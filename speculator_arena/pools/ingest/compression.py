"""Compression told by a file's first bytes, never by its name: gzip, bz2 and xz by the
standard library, zstd by pyarrow; archives recognized only to say what they are.

Why a wrapper (`_Decoded`): each decompressor fails its own way on a cut or broken stream
(EOFError, OSError, zlib, lzma, pyarrow); the readers meet one `CodecError` instead.
"""

from __future__ import annotations

import bz2
import contextlib
import gzip
import io
import lzma
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from speculator_arena.errors import ArenaError

CHUNK = 1 << 16  # bytes read at a time, and the head `file_kinds.look` reads


_CODECS = (
    (b"\x1f\x8b", "gzip"),
    (b"BZh", "bz2"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"\x28\xb5\x2f\xfd", "zstd"),
)
# recognized to say what they are, not read: an archive holds files, not records
ARCHIVES = (
    (b"PK\x03\x04", "a zip archive"),
    (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive"),
    (b"\x04\x22\x4d\x18", "lz4-compressed data"),
)


class CodecError(ArenaError):
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
            stream = io.BufferedReader(_Decoded(gzip.GzipFile(fileobj=raw, mode="rb"), codec), CHUNK)
        elif codec == "bz2":
            stream = io.BufferedReader(_Decoded(bz2.BZ2File(raw, "rb"), codec), CHUNK)
        elif codec == "xz":
            stream = io.BufferedReader(_Decoded(lzma.LZMAFile(raw, "rb"), codec), CHUNK)
        else:  # zstd: the standard library has it only from Python 3.14; pyarrow has it
            import pyarrow as pa

            inner = pa.CompressedInputStream(pa.PythonFile(raw, mode="r"), "zstd")
            stream = io.BufferedReader(_Decoded(inner, codec), CHUNK)
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
