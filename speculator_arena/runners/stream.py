"""One streamed chat completion: the keep-alive pool a pass's lanes share, and the request.

`stream_chat` POSTs a chat completion on a connection of the pass's `SSEClient` and waits for
the response that the connection reads (sse_wire.py: the HTTP/1.1 framing and the stamped
`data:` lines, the per-chunk path), then has its payloads decoded (sse_decode.py). Why apart
from the reader: this is the per-request part (a connection from the pool or a new one, the
request's bytes, the deadline, the connection kept or closed after), which the per-chunk path
never touches.

Total, like the reader: every wire failure (connect refused or timed out, a URL it cannot
reach, an HTTP status with its body, a broken or malformed stream, the grace-period cut) is
the request's `error` (`"<class name>: <text>"` for the reader's errors), never an exception
out of `stream_chat`. The probes' non-streamed requests are nonstreamed.py's `post_json`.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Self
from urllib.parse import urlsplit

import httpx

from speculator_arena.runners.sse_decode import StreamResult, storable
from speculator_arena.runners.sse_wire import ConnectError, ConnectTimeout, StreamError, _Connection


class SSEClient:
    """What a pass's lanes share: keep-alive connections per host, the connect timeout.

    No read timeout: a pass's grace end (stream_chat's deadline) bounds every stream. No proxy
    from the environment and no compression asked for (the bytes read are the bytes sent)."""

    def __init__(self, max_idle: int = 16, connect_timeout: float = 30.0):
        self.max_idle = max_idle
        self.connect_timeout = connect_timeout
        self._idle: dict[tuple, list[_Connection]] = {}
        self._open: set[_Connection] = set()
        self._targets: dict[str, tuple[tuple, bytes]] = {}
        self._closed = False

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        self._closed = True
        for conn in list(self._open):
            conn.close()
        self._open.clear()
        self._idle.clear()

    def _target(self, url: str) -> tuple[tuple, bytes]:
        """(scheme, host, port), and the request line and fixed headers for this URL."""
        got = self._targets.get(url)
        if got is None:
            u = urlsplit(url)
            if u.scheme not in ("http", "https") or not u.hostname:
                raise ConnectError(f"unsupported URL {url!r}: http:// or https:// with a host")
            try:
                port = u.port or (443 if u.scheme == "https" else 80)
            except ValueError as exc:
                raise ConnectError(f"bad port in {url!r}: {exc}") from None
            path = (u.path or "/") + (f"?{u.query}" if u.query else "")
            host = u.netloc.rpartition("@")[2]
            try:
                head = (
                    f"POST {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: speculator-arena\r\n"
                    f"Accept: text/event-stream\r\nContent-Type: application/json\r\n"
                ).encode("ascii")
            except UnicodeEncodeError:
                raise ConnectError(f"URL {url!r} is not ASCII") from None
            got = self._targets[url] = ((u.scheme, u.hostname, port), head)
        return got

    async def _connection(self, key: tuple) -> _Connection:
        idle = self._idle.get(key)
        while idle:
            conn = idle.pop()
            if not conn.closed:
                return conn
        scheme, host, port = key
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self.connect_timeout):
                _, conn = await loop.create_connection(_Connection, host, port, ssl=scheme == "https" or None)
        except TimeoutError:
            raise ConnectTimeout(f"no connection to {host}:{port} within {self.connect_timeout} s") from None
        except OSError as exc:
            raise ConnectError(str(exc) or type(exc).__name__) from None
        conn.client, conn.key = self, key
        if self._closed:
            conn.close()
            raise ConnectError("client closed")
        self._open.add(conn)
        return conn

    def _park(self, conn: _Connection) -> None:
        idle = self._idle.setdefault(conn.key, [])
        idle[:] = [c for c in idle if not c.closed]  # the server may close idle ones (keep-alive timeout)
        if self._closed or len(idle) >= self.max_idle:
            conn.close()
            self._open.discard(conn)
        else:
            idle.append(conn)


async def stream_chat(
    client: SSEClient | httpx.AsyncClient, url: str, body: dict, *, deadline: float | None
) -> StreamResult:
    """POST a streamed chat completion; stop reading at `deadline` (epoch seconds) if given.

    A stream cut at the deadline keeps what it received and is not `done`: it is a failure
    of the pass (SCORING.md, "past the grace period"). Wire failures (connect, HTTP status
    with its body, a broken or malformed stream) are recorded in `error`, never raised.

    `client` is the pass's SSEClient (workload.make_client). A caller that still passes an
    httpx.AsyncClient gets a one-off connection read the same way.
    """
    res = StreamResult(sent_at=time.time())
    own = None
    if not isinstance(client, SSEClient):
        client = own = SSEClient(max_idle=0)
    conn: _Connection | None = None
    ok = False

    async def _read() -> None:
        nonlocal conn
        key, head = client._target(url)
        payload = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
        conn = await client._connection(key)
        await conn.send(head + b"Content-Length: %d\r\n\r\n" % len(payload) + payload, res)

    try:
        if deadline is None:
            await _read()
        else:
            remaining = deadline - time.time()
            if remaining <= 0:
                raise TimeoutError
            async with asyncio.timeout(remaining):
                await _read()
        ok = True
        if not res.done and res.error is None:
            res.error = "stream ended without [DONE]"
    except TimeoutError:
        res.error = "cut at the end of the grace period"
    except StreamError as exc:
        res.error = storable(f"{type(exc).__name__}: {exc}"[:300])
    finally:
        if conn is not None:
            conn.release(ok and res.status_code is not None)
        if own is not None:
            await own.aclose()
    res.ended_at = time.time()
    return await res.parse_yielding()
