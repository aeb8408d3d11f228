"""A non-streamed request (the probes that need `prompt_logprobs`), under the reader's rules.

Why apart from the stream reader (stream.py, sse_wire.py): it reads a whole JSON reply through
httpx, not the arena's own client (nothing is timed per chunk here), and shares with the reader
only its totality and its response limit (`max_bytes`, 4 x sse_wire.MAX_RESPONSE_BYTES).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx

from speculator_arena.runners.sse_decode import storable
from speculator_arena.runners.sse_wire import MAX_RESPONSE_BYTES


async def post_json(
    client: httpx.AsyncClient, url: str, body: dict, *, timeout: float, max_bytes: int = 4 * MAX_RESPONSE_BYTES
) -> tuple[Any, str | None]:
    """A non-streamed request (probes that need `prompt_logprobs`): (decoded JSON, error).

    Total, like the stream reader: whatever the server does (any status, framing, encoding,
    size, a body that never ends or trickles) is an error string, never an exception; the answer
    is any JSON value, which the caller checks. `timeout` bounds the whole request, not one read;
    the body is taken without content coding (no decompression bomb) and cut at `max_bytes`."""
    data = bytearray()
    try:
        async with asyncio.timeout(timeout):
            async with client.stream(
                "POST", url, json=body, headers={"Accept-Encoding": "identity"}, timeout=timeout
            ) as resp:
                async for part in resp.aiter_raw():
                    data += part
                    if len(data) > max_bytes:
                        return None, f"response longer than {max_bytes} bytes"
                status = resp.status_code
    except TimeoutError:
        return None, f"no whole response within {timeout:g} s"
    except Exception as exc:  # noqa: BLE001 - httpx's and h11's errors for any bytes the server sent
        return None, storable(f"{type(exc).__name__}: {exc}"[:300])
    text = bytes(data[:300]).decode("utf-8", "replace")
    if status != 200:
        return None, f"HTTP {status}: {text}"
    try:
        return json.loads(bytes(data)), None
    except (ValueError, RecursionError):
        return None, f"response is not JSON: {text[:120]!r}"
