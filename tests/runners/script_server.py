"""A real local TCP server that writes exactly the bytes a test scripts (and the SSE byte
builders the scripts are made of): the stream reader's tests and the property tests of every
reader of engine output serve engine bytes from it, so the arena's client reads them from a
real socket, split and timed as scripted."""

from __future__ import annotations

import json
import socket
import threading
import time


def event(obj) -> bytes:
    return b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj).encode()) + b"\n\n"


def delta(text, finish=None) -> bytes:
    return event({"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": finish}]})


USAGE = event(
    {
        "choices": [],
        "usage": {"prompt_tokens": 7, "completion_tokens": 3, "prompt_tokens_details": {"cached_tokens": 2}},
    }
)
DONE = b"data: [DONE]\n\n"
HEAD_CHUNKED = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def chunked_reply(*events: bytes) -> bytes:
    return HEAD_CHUNKED + b"".join(chunk(e) for e in events) + b"0\r\n\r\n"


class ScriptServer:
    """A listening socket; for each request it reads the head and body, then plays the next
    script: a list of (bytes to write, seconds to wait before writing them). `close` ends the
    connection after the script; otherwise it waits for the next request on it."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/v1/chat/completions"
        self.scripts: list[tuple[list[tuple[bytes, float]], bool]] = []
        self.connections = 0
        self.requests: list[bytes] = []
        self.written: list[list[float]] = []  # per request, the time each piece was written
        threading.Thread(target=self._accept, daemon=True).start()

    def play(self, pieces, close=False):
        self.scripts.append(([(p, 0.0) if isinstance(p, bytes) else p for p in pieces], close))

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        buf = b""
        with conn:
            while True:
                while b"\r\n\r\n" not in buf:
                    try:
                        got = conn.recv(65536)
                    except OSError:  # the client reset it (closed with bytes unread)
                        return
                    if not got:
                        return
                    buf += got
                head, buf = buf.split(b"\r\n\r\n", 1)
                lengths = [h.split(b":")[1] for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")]
                n = int(lengths[0]) if lengths else 0  # a GET has no body
                while len(buf) < n:
                    buf += conn.recv(65536)
                self.requests.append(head + b"\r\n\r\n" + buf[:n])
                buf = buf[n:]
                pieces, close = self.scripts.pop(0)
                times = []
                self.written.append(times)
                for data, wait in pieces:
                    if wait:
                        time.sleep(wait)
                    try:
                        conn.sendall(data)
                    except OSError:
                        return
                    times.append(time.time())
                if close:
                    return

    def stop(self):
        self.sock.close()
