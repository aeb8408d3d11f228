"""Bounded input on every route of the API, authenticated or not.

- `BodyLimit`, an ASGI middleware (pure ASGI, so that it sees the body as it streams): a request
  head over `MAX_HEAD_BYTES` is answered 431, a declared `Content-Length` over the route's
  bound 413 before a byte of the body is read, and a body without one is counted chunk by chunk
  and answered 413 as soon as it passes the bound (whatever the route was doing with it). The
  server bounds heads too (uvicorn's h11 `h11_max_incomplete_event_size`, `arena api`): this
  is the app's own bound, which holds behind any server.
- `load_json`: a JSON document whose nesting is measured before `json.loads` sees it (the
  parser recurses, so deep nesting is a RecursionError in the parser), and whose every string
  and key is then refused if it holds control characters or lone surrogates (which SQLite and
  the JSON encoder of the answer cannot encode: they were 500s).
"""

from __future__ import annotations

import json
import re

from speculator_arena.errors import ArenaError
from speculator_arena.sealed.refusal import Refused

MAX_HEAD_BYTES = 32 * 1024
DEFAULT_BODY_BYTES = 16 * 1024  # every route but the submission's
MAX_JSON_DEPTH = 8  # a submission is 3 deep
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_BAD_TEXT = re.compile(r"[\x00-\x1f\x7f\ud800-\udfff]")


class _TooLarge(ArenaError):
    pass


async def _answer(send, status: int, reason: str) -> None:
    body = json.dumps({"error": reason}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


class BodyLimit:
    """ASGI middleware: `limit(method, path)` is the most body bytes a route takes."""

    def __init__(self, app, limit):
        self.app, self.limit = app, limit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        head = len(scope.get("raw_path") or b"") + len(scope.get("query_string") or b"")
        head += sum(len(k) + len(v) + 4 for k, v in scope["headers"])
        if head > MAX_HEAD_BYTES:
            return await _answer(send, 431, f"request head over {MAX_HEAD_BYTES:,} bytes")
        limit = self.limit(scope["method"], scope["path"])
        declared = [v for k, v in scope["headers"] if k.lower() == b"content-length"]
        if declared:
            try:
                size = int(declared[0])
            except ValueError:
                return await _answer(send, 400, "Content-Length is not a number")
            if size > limit:
                return await _answer(send, 413, f"request body over {limit:,} bytes")
        state = {"total": 0, "over": False, "started": False}

        async def bounded_receive():
            if state["over"]:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                state["total"] += len(message.get("body", b""))
                if state["total"] > limit:
                    state["over"] = True
                    raise _TooLarge()
            return message

        async def guarded_send(message):
            if state["over"]:
                return  # whatever the route answers, the answer is the 413 below
            if message["type"] == "http.response.start":
                state["started"] = True
            await send(message)

        try:
            await self.app(scope, bounded_receive, guarded_send)
        except _TooLarge:
            pass
        if state["over"] and not state["started"]:
            await _answer(send, 413, f"request body over {limit:,} bytes")


def json_depth(body: bytes) -> int:
    """The deepest nesting of arrays and objects in a JSON text (strings skipped), in C speed."""
    import numpy as np

    brackets = _STRING.sub(b'""', body).translate(None, _NOT_BRACKETS)
    if not brackets:
        return 0
    codes = np.frombuffer(brackets, dtype=np.uint8)
    steps = np.where((codes == ord("[")) | (codes == ord("{")), 1, -1)
    return int(np.cumsum(steps).max())


def load_json(body: bytes, max_depth: int = MAX_JSON_DEPTH):
    """The document, or Refused: malformed, nested over `max_depth`, or with control characters
    or lone surrogates in a string or key."""
    depth = json_depth(body)
    if depth > max_depth:
        raise Refused(f"the JSON is nested {depth} deep, over the limit of {max_depth}")
    try:
        doc = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise Refused(f"malformed JSON: {exc}"[:300]) from exc
    except (ValueError, RecursionError) as exc:
        raise Refused(f"malformed JSON: {type(exc).__name__}") from exc
    check_text(doc)
    return doc


def check_text(doc) -> None:
    """Refused when any string or key of `doc` holds control characters or lone surrogates."""
    todo = [doc]
    while todo:
        item = todo.pop()
        if isinstance(item, dict):
            todo.extend(item.keys())
            todo.extend(item.values())
        elif isinstance(item, list):
            todo.extend(item)
        elif isinstance(item, str) and _BAD_TEXT.search(item):
            raise Refused(
                "a string of the JSON holds control characters or lone surrogates (\\u0000-\\u001f, \\ud800-\\udfff)"
            )
