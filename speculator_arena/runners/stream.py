"""One streamed chat completion, read with as little work per chunk as possible.

Why so little: the client must never be the bottleneck, and its timestamps are the measured
times. While a stream is open the loop only stamps `time.time()` on each SSE `data:` line and
keeps the raw payload; JSON is parsed after the stream ends (benchmarks/client_overhead.py
measures what this costs against a plain client).
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

DONE = "[DONE]"


@dataclass
class StreamResult:
    sent_at: float
    ended_at: float = 0.0
    status_code: int | None = None
    done: bool = False
    error: str | None = None
    lines: list[tuple[float, bytes]] = field(default_factory=list)  # (arrival, raw JSON payload)

    # Filled by parse():
    chunk_times: list[float] = field(default_factory=list)
    chunk_texts: list[str] = field(default_factory=list)
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None

    @property
    def text(self) -> str:
        return "".join(self.chunk_texts)

    def parse(self) -> "StreamResult":
        """Decode the kept payloads: texts of chunks that carry text, finish reason, usage."""
        for t, payload in self.lines:
            try:
                obj = json.loads(payload)
            except json.JSONDecodeError:
                self.error = self.error or f"malformed SSE payload: {payload[:120]!r}"
                continue
            if not isinstance(obj, dict):
                continue
            if "error" in obj and not obj.get("choices"):
                self.error = self.error or f"engine error in stream: {str(obj['error'])[:200]}"
                continue
            if obj.get("usage"):
                self.usage = obj["usage"]
            for choice in obj.get("choices") or []:
                delta = choice.get("delta") or {}
                content = delta.get("content")
                if content:
                    self.chunk_times.append(t)
                    self.chunk_texts.append(content)
                if choice.get("finish_reason"):
                    self.finish_reason = choice["finish_reason"]
        return self

    @property
    def usage_prompt_tokens(self) -> int | None:
        return (self.usage or {}).get("prompt_tokens")

    @property
    def usage_completion_tokens(self) -> int | None:
        return (self.usage or {}).get("completion_tokens")

    @property
    def cached_tokens(self) -> int | None:
        details = (self.usage or {}).get("prompt_tokens_details") or {}
        return details.get("cached_tokens")


async def stream_chat(client: httpx.AsyncClient, url: str, body: dict, *, deadline: float | None) -> StreamResult:
    """POST a streamed chat completion; stop reading at `deadline` (epoch seconds) if given.

    A stream cut at the deadline keeps what it received and is not `done`: it is a failure
    of the pass (SCORING.md, "past the grace period").
    """
    res = StreamResult(sent_at=time.time())
    lines = res.lines
    clock = time.time

    async def _read() -> None:
        async with client.stream("POST", url, json=body) as resp:
            res.status_code = resp.status_code
            if resp.status_code != 200:
                raw = await resp.aread()
                res.error = f"HTTP {resp.status_code}: {raw[:300].decode('utf-8', 'replace')}"
                return
            # Raw bytes split on newlines: cheaper than httpx's text line decoder (measured in
            # benchmarks/client_overhead.py); payloads are decoded after the stream ends.
            buf = b""
            async for data in resp.aiter_raw():
                t = clock()
                buf += data
                if b"\n" not in data:
                    continue
                *complete, buf = buf.split(b"\n")
                for line in complete:
                    if line.startswith(b"data:"):
                        payload = line[5:].strip()
                        if payload == b"[DONE]":
                            res.done = True
                            return
                        lines.append((t, payload))

    try:
        if deadline is None:
            await _read()
        else:
            remaining = deadline - time.time()
            if remaining <= 0:
                raise TimeoutError
            async with asyncio.timeout(remaining):
                await _read()
        if not res.done and res.error is None:
            res.error = "stream ended without [DONE]"
    except TimeoutError:
        res.error = "cut at the end of the grace period"
    except httpx.HTTPError as exc:
        res.error = f"{type(exc).__name__}: {exc}"[:300] or type(exc).__name__
    res.ended_at = time.time()
    return res.parse()


async def post_json(client: httpx.AsyncClient, url: str, body: dict, *, timeout: float) -> tuple[dict | None, str | None]:
    """A non-streamed request (probes that need `prompt_logprobs`): (response, error)."""
    try:
        resp = await client.post(url, json=body, timeout=timeout)
    except httpx.HTTPError as exc:
        return None, f"{type(exc).__name__}: {exc}"[:300]
    if resp.status_code != 200:
        return None, f"HTTP {resp.status_code}: {resp.text[:300]}"
    try:
        return resp.json(), None
    except ValueError:
        return None, f"response is not JSON: {resp.text[:120]!r}"
