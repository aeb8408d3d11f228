"""The arena's HTTP/1.1 response reader: bytes off a socket to stamped `data:` lines.

Why so little: the client must never be the bottleneck, and its timestamps are the measured
times (TTFT, TPOT and the busy window's token attribution in SCORING.md all come from them).
So the arena reads its SSE streams through a small HTTP/1.1 client of its own on asyncio's
Protocol interface instead of a general HTTP library: the event loop hands each received
buffer straight to `_Connection.buffer_updated`, which stamps `time.time()` first, removes the
chunked framing, splits `data:` lines and keeps (stamp, raw payload). No task wakes up per
chunk, no coroutine resumes, no JSON is parsed while the stream is open. Payloads are decoded
after the stream ends by the SSE payload decoder (sse_decode.py, `StreamResult.parse_yielding`).
benchmarks/client_overhead.py measures it against aiohttp and httpx clients shaped like
`vllm bench serve` and GuideLLM (docs/benchmarks/client.md).

What a stamp means: a `data:` line's time is when the read that completed the line returned
(several events in one read share its time, and stay separate chunks). A stream is `done`
when its `data: [DONE]` line arrives; the request ends there, as before.

Every byte is the engine's responsibility (SCORING.md "Outcomes": a candidate can never cause
a void by what it returns). The reader is a total function of what the server sends: for any
status, head, framing, event shape, type, encoding, size or timing it fills its StreamResult,
and whatever it cannot read is that request's failure with a short reason in `error` (and
`done` false, so the request is not counted), never an exception out of the reader. The checks
sit where the work is already done: framing errors of any kind end the response in `_feed`, a
response is cut past MAX_RESPONSE_BYTES or MAX_EVENTS; what the payloads say is checked by the
decoder (sse_decode.py).

`time.time()` rather than a monotonic clock mapped to the epoch: its cost is the same (vDSO),
and every other time the arena compares these stamps with (pass ends, grace ends, `sent_at`,
the metric samplers) is `time.time()` too, so there is one clock throughout.

Why apart from the pool and the request (stream.py): this module is the per-chunk path, and
every name that path reads is a global of its own here, as before the split. `_Connection` is
package-private: only stream.py makes one (`SSEClient`'s keep-alive pool) and sends on it
(`stream_chat`); a connection tells its pool when it closes (`client._open`) and when its
response has ended and it may be kept (`client._park`), the two places it reaches into the pool.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from speculator_arena.errors import ArenaError
from speculator_arena.runners.sse_decode import StreamResult

DONE = "[DONE]"
ERROR_BODY_KEPT = 4096  # bytes of a non-200 body kept for the error text (300 are shown)
MAX_HEAD_BYTES = 65536  # a response head (or one chunk-size line) longer than this is refused
READ_BUFFER = 65536  # bytes one read may take (more waits for the next loop turn)
# Runner safeguards, not protocol values: one response may not hold the runner's memory hostage.
# An honest reply is far below both (8,192 tokens of vLLM chunks are about 2.5 MB, 8,192 events).
MAX_RESPONSE_BYTES = 16 * 2**20  # bytes of one response, framing included
MAX_EVENTS = 131072  # `data:` lines of one response
_clock = time.time


class StreamError(ArenaError):
    """A failure on the wire; `stream_chat` records it as `"<class name>: <text>"`."""


class ConnectError(StreamError):
    """The connection could not be opened (refused, unreachable, name not resolved)."""


class ConnectTimeout(StreamError):
    """The connection was not open within the client's connect timeout."""


class RemoteProtocolError(StreamError):
    """The server broke HTTP/1.1: it closed mid-response or sent malformed framing."""


# ---- the HTTP/1.1 response reader ----------------------------------------------------------
_HEAD, _CHUNKED, _TRAILERS, _LENGTH, _UNTIL_CLOSE = range(5)


class _Connection(asyncio.BufferedProtocol):
    """One keep-alive connection; reads one response at a time into a StreamResult.

    A BufferedProtocol: the loop reads into this connection's own buffer (`recv_into`) instead
    of `recv(256 KiB)`, which allocates and frees a 256 KiB block per read; that allocation
    (an mmap/munmap pair in glibc) cost more than everything else per chunk (measured in
    docs/benchmarks/client.md). Framing (chunked, Content-Length, or until close) is decoded
    as bytes arrive so that the end of a response is seen at once; a 200 body is split into
    SSE lines on the way, any other body is kept (its first bytes) for the error text."""

    def __init__(self) -> None:
        self._rbuf = memoryview(bytearray(READ_BUFFER))
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.client: Any = None  # the stream.SSEClient whose pool it is in (it opened it)
        self.key: tuple | None = None
        self._res: StreamResult | None = None
        self._lines: list | None = None
        self._waiter: asyncio.Future | None = None
        self._mode = _HEAD
        self._buf = b""  # an incomplete head, chunk-size line or trailer section
        self._left = 0  # bytes still to come: chunk payload + its CRLF, or Content-Length body
        self._sse = b""  # an incomplete SSE line
        self._ok = False  # status 200: the body is SSE
        self._stop = False  # [DONE] seen: later body bytes are framing to get through
        self._keep_alive = False
        self._ended = False  # the whole response has arrived
        self._released = False  # stream_chat is finished with it
        self._error_body = bytearray()
        self._got = 0  # bytes of this response so far (MAX_RESPONSE_BYTES)

    # asyncio.Protocol
    def connection_made(self, transport) -> None:
        self.transport = transport

    def connection_lost(self, exc) -> None:
        self.closed = True
        if self.client is not None:
            self.client._open.discard(self)
        if self._res is None or self._ended:
            return
        if self._mode == _UNTIL_CLOSE:
            self._end()
        elif self._mode == _HEAD and not self._buf:
            self._fail(RemoteProtocolError("server disconnected without sending a response"))
        else:
            why = {
                _HEAD: "incomplete response head",
                _CHUNKED: "incomplete chunked read",
                _TRAILERS: "incomplete chunked trailer",
                _LENGTH: "incomplete body",
            }[self._mode]
            self._fail(RemoteProtocolError(f"peer closed connection without sending complete message body ({why})"))

    def eof_received(self):
        return False  # close our side too; connection_lost decides what the EOF meant

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._rbuf

    def buffer_updated(self, nbytes: int) -> None:
        t = _clock()
        self._feed(self._rbuf[:nbytes].tobytes(), t)

    def data_received(self, data: bytes) -> None:  # transports that do not read into buffers
        self._feed(data, _clock())

    def _feed(self, data: bytes, t: float) -> None:
        """Every byte of a response goes through here: whatever the bytes make the framing
        code raise is the response's failure (the connection is closed), never the runner's."""
        self._got += len(data)
        try:
            if self._got > MAX_RESPONSE_BYTES:
                raise ValueError(f"response longer than {MAX_RESPONSE_BYTES} bytes")
            if self._mode == _CHUNKED:
                self._chunked(data, t)
            elif self._mode == _HEAD:
                self._head(data, t)
            elif self._mode == _LENGTH:
                self._length(data, t)
            elif self._mode == _UNTIL_CLOSE:
                self._body(data, t)
            else:
                self._trailers(data)
        except Exception as exc:  # noqa: BLE001 - any byte sequence at all is the server's failure
            self._fail(RemoteProtocolError(f"malformed response: {exc}"[:200]))

    # request
    def send(self, request: bytes, res: StreamResult) -> asyncio.Future:
        self._res, self._lines = res, res.lines
        self._mode, self._buf, self._left, self._sse = _HEAD, b"", 0, b""
        self._ok = self._stop = self._ended = self._released = False
        self._error_body = bytearray()
        self._got = 0
        self._waiter = asyncio.get_running_loop().create_future()
        self.transport.write(request)
        return self._waiter

    def release(self, ok: bool) -> None:
        """stream_chat is done with this connection: keep it for the next request once its
        response has fully arrived (at once, or when the bytes after [DONE] come), else close."""
        self._released = True
        if not ok or self.closed or not self._keep_alive:
            self.close()
        elif self._ended:
            self._idle()

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    @property
    def idle(self) -> bool:
        return self._res is None and not self.closed

    # response parsing
    def _head(self, data: bytes, t: float) -> None:
        if self._res is None:  # bytes on an idle connection: nothing to read them as
            self.close()
            return
        buf = self._buf + data if self._buf else data
        i = self._blank_line(buf, "response head")
        if i is None:
            return
        status_line, *header_lines = buf[:i].decode("latin-1").split("\r\n")
        rest = buf[i + 4 :]
        version, _, tail = status_line.partition(" ")
        if not version.startswith("HTTP/1."):
            raise ValueError(f"not an HTTP/1.x status line: {status_line[:80]!r}")
        status = int(tail[:3])
        if 100 <= status < 200 and status != 101:  # informational: the real head follows
            if rest:
                self._head(rest, t)
            return
        headers = {}
        for h in header_lines:
            name, sep, value = h.partition(":")
            if not sep:
                raise ValueError(f"malformed header line: {h[:80]!r}")
            name = name.strip().lower()
            headers[name] = f"{headers[name]}, {value.strip()}" if name in headers else value.strip()
        self._res.status_code = status
        self._ok = status == 200
        connection = headers.get("connection", "").lower()
        self._keep_alive = version == "HTTP/1.1" and "close" not in connection
        if "chunked" in headers.get("transfer-encoding", "").lower():
            self._mode = _CHUNKED
        elif "content-length" in headers:
            self._mode, self._left = _LENGTH, int(headers["content-length"])
            if self._left < 0:
                raise ValueError("negative Content-Length")
        elif status in (101, 204, 304):
            self._left = 0
            self._mode = _LENGTH
        else:
            self._mode, self._keep_alive = _UNTIL_CLOSE, False
        if self._mode == _LENGTH and self._left == 0:
            self._end(extra=rest)
        elif rest:
            self._rest(rest, t)

    def _rest(self, rest: bytes, t: float) -> None:
        if self._mode == _CHUNKED:
            self._chunked(rest, t)
        elif self._mode == _LENGTH:
            self._length(rest, t)
        else:
            self._body(rest, t)

    def _chunked(self, data: bytes, t: float) -> None:
        if self._buf:  # a chunk-size line split across reads
            data, self._buf = self._buf + data, b""
        pos, n = 0, len(data)
        while pos < n:
            left = self._left
            if left == 0:
                i = data.find(b"\r\n", pos)
                if i < 0:
                    if n - pos > MAX_HEAD_BYTES:
                        raise ValueError("chunk-size line too long")
                    self._buf = data[pos:]
                    return
                size = int(data[pos:i].split(b";", 1)[0], 16)
                if size < 0:
                    raise ValueError("negative chunk size")
                pos = i + 2
                if size == 0:
                    self._mode = _TRAILERS
                    self._trailers(data[pos:])
                    return
                left = size + 2
            if left > 2:
                end = pos + left - 2
                if end <= n:
                    self._body(data if pos == 0 and end == n else data[pos:end], t)
                    pos, left = end, 2
                else:
                    self._body(data[pos:] if pos else data, t)
                    self._left = left - (n - pos)
                    return
            take = min(left, n - pos)  # the CRLF that closes the chunk, maybe split
            if data[pos : pos + take] != b"\r\n"[2 - left : 2 - left + take]:
                raise ValueError("chunk not followed by CRLF")
            pos += take
            self._left = left - take

    def _trailers(self, data: bytes) -> None:
        buf = self._buf + data if self._buf else data
        if buf.startswith(b"\r\n"):
            self._buf = b""
            self._end(extra=buf[2:])
            return
        i = self._blank_line(buf, "chunked trailer")
        if i is not None:
            self._end(extra=buf[i + 4 :])

    def _blank_line(self, buf: bytes, what: str) -> int | None:
        """Where the header block at the start of `buf` ends (its blank line), or None: `buf` is
        kept until more bytes come, and a block longer than MAX_HEAD_BYTES is refused (an engine
        must not make the runner hold an unbounded head or trailer)."""
        i = buf.find(b"\r\n\r\n")
        if i < 0:
            if len(buf) > MAX_HEAD_BYTES:
                raise ValueError(f"{what} too large")
            self._buf = buf
            return None
        self._buf = b""
        return i

    def _length(self, data: bytes, t: float) -> None:
        left, n = self._left, len(data)
        if n < left:
            self._body(data, t)
            self._left = left - n
            return
        self._left = 0
        self._body(data[:left] if n > left else data, t)
        self._end(extra=data[left:])

    def _body(self, chunk: bytes, t: float) -> None:
        if not self._ok:
            room = ERROR_BODY_KEPT - len(self._error_body)
            if room > 0:
                self._error_body += chunk[:room]
            return
        if self._stop:
            return
        if b"\n" not in chunk:
            self._sse += chunk
            return
        if self._sse:
            chunk = self._sse + chunk
        parts = chunk.split(b"\n")
        self._sse = parts.pop()
        lines = self._lines
        for line in parts:
            if line[:5] == b"data:":
                payload = line[5:].strip()
                if payload == b"[DONE]":
                    self._res.done = True
                    self._stop = True
                    self._resolve()
                    return
                lines.append((t, payload))
        if len(lines) > MAX_EVENTS:
            raise ValueError(f"more than {MAX_EVENTS} events in one response")

    def _end(self, extra: bytes = b"") -> None:
        """The whole response has arrived (a partial last SSE line is dropped, as ever)."""
        self._ended = True
        if extra:  # bytes after the response: nothing was asked for them
            self._keep_alive = False
        res = self._res
        if not self._ok and res.error is None:
            res.error = f"HTTP {res.status_code}: {bytes(self._error_body[:300]).decode('utf-8', 'replace')}"
        self._resolve()
        if self._released:
            if self._keep_alive and not self.closed:
                self._idle()
            else:
                self.close()

    def _idle(self) -> None:
        self._res = self._lines = self._waiter = None
        self._mode, self._buf, self._sse = _HEAD, b"", b""
        if self.client is not None:
            self.client._park(self)
        else:
            self.close()

    def _resolve(self) -> None:
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    def _fail(self, exc: StreamError) -> None:
        w = self._waiter
        if w is not None and not w.done():
            w.set_exception(exc)
        self._keep_alive = False
        self.close()
