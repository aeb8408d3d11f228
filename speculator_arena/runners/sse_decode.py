"""The SSE payload decoder: what a streamed chat completion said, read after the stream ended.

Why apart from the reader (stream.py): the reader's job is timing (a stamp per `data:` line, as
bytes arrive, with no JSON parsed while the stream is open); this module's is meaning. It
turns the kept (stamp, raw payload) lines of a `StreamResult` into chunk texts with their
times, the finish reason and the usage, a slice at a time (`parse_yielding` yields to the loop
between slices, so that one lane's decoding never holds up another lane's stamps). Text chunks
that differ from the one before only in their text cost a string scan instead of a JSON parse
(`_template`), and every payload reads exactly as `json.loads` reads it.

Total, like the reader: whatever an engine's payloads hold (any shape, type, encoding), the
result is that request's failure with a short reason (`unreadable`), never an exception; event
shapes and types are checked in the slow path (`_apply`; the template path reads only string
tokens); the payload must be UTF-8 and the reply as a whole valid Unicode (one check per
request: a lone surrogate escaped in JSON would be unstorable and unsendable as the next turn's
history).
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass, field
from typing import Any

PARSE_SLICE = 64  # payloads decoded between two yields to the event loop
_scan = json.JSONDecoder().scan_once
_scanstring = json.decoder.scanstring
_BAD = object()
_PROBE = "\u2063arena-template-probe"


def _decode(s: str, raw: bytes) -> Any:
    """One UTF-8 payload, exactly as `json.loads(raw)` would read it (or _BAD).

    The scanner is json's own C scanner without json.loads' per-call wrapper; anything it does
    not take whole is handed to json.loads itself, so no payload reads differently."""
    try:
        obj, end = _scan(s, 0)
        if end == len(s):
            return obj
    except (StopIteration, ValueError, RecursionError):
        pass
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):  # JSONDecodeError, nesting too deep
        return _BAD


def _texts(payloads: list[bytes]) -> list[str | None]:
    """Payloads hold no newline (they were split on it): decode them in one UTF-8 pass; None
    for a payload that is not UTF-8."""
    try:
        return b"\n".join(payloads).decode("utf-8").split("\n")
    except UnicodeDecodeError:
        out: list[str | None] = []
        for p in payloads:
            try:
                out.append(p.decode("utf-8"))
            except UnicodeDecodeError:
                out.append(None)
        return out


def _template(s: str, obj: Any) -> tuple[str, str] | None:
    """(prefix, suffix) around the string token that is `choices[0].delta.content` of `obj`,
    for a plain text chunk (one choice, no finish reason, no usage, no error); else None.

    An engine's text chunks differ only in that string (vLLM: same id, created, model, index,
    nulls), so a later payload that is prefix + one JSON string token + suffix parses to this
    object with only that string changed: JSON's grammar does not look inside a string token.
    The token is confirmed by parsing the template with a probe string in its place and
    comparing with `obj` (a duplicate key or a look-alike elsewhere cannot pass)."""
    if not isinstance(obj, dict) or "error" in obj or obj.get("usage"):
        return None
    choices = obj.get("choices")
    if not isinstance(choices, list) or len(choices) != 1 or not isinstance(choices[0], dict):
        return None
    choice = choices[0]
    delta = choice.get("delta")
    if choice.get("finish_reason") or not isinstance(delta, dict) or not isinstance(delta.get("content"), str):
        return None
    i = s.find('"content":')
    while i >= 0:
        j = i + 10
        while j < len(s) and s[j] in " \t\r":
            j += 1
        if j < len(s) and s[j] == '"':
            try:
                val, end = _scanstring(s, j + 1)
            except ValueError:
                val = None
            if val == delta["content"]:
                pre, suf = s[: j + 1], s[end:]
                try:
                    probe = json.loads(pre + _PROBE + '"' + suf)
                    expect = json.loads(s)
                    expect["choices"][0]["delta"]["content"] = _PROBE
                except (ValueError, LookupError, TypeError):
                    probe, expect = None, False
                if probe == expect:
                    return pre, suf
        i = s.find('"content":', i + 1)
    return None


@dataclass
class StreamResult:
    sent_at: float
    ended_at: float = 0.0
    status_code: int | None = None
    done: bool = False  # [DONE] arrived and every event before it was readable
    error: str | None = None
    lines: list[tuple[float, bytes]] = field(default_factory=list)  # (arrival, raw JSON payload)

    # Filled by parse():
    chunk_times: list[float] = field(default_factory=list)
    chunk_texts: list[str] = field(default_factory=list)
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None  # only when its counts are integers (see _usage_ok)
    # the decoder's text-chunk template (see _template), carried from one slice to the next
    _tpl: tuple[str, str] | None = field(default=None, repr=False, compare=False)
    _tpl_hit: bool = field(default=True, repr=False, compare=False)
    _tpl_tries: int = field(default=0, repr=False, compare=False)
    _unreadable: bool = field(default=False, repr=False, compare=False)

    @property
    def text(self) -> str:
        return "".join(self.chunk_texts)

    def parse(self) -> StreamResult:
        """Decode the kept payloads: texts of chunks that carry text, finish reason, usage."""
        for i in range(0, len(self.lines), PARSE_SLICE):
            self._parse_slice(self.lines[i : i + PARSE_SLICE])
        return self._finish()

    async def parse_yielding(self) -> StreamResult:
        """parse(), yielding to the event loop between slices (other lanes keep streaming)."""
        for i in range(0, len(self.lines), PARSE_SLICE):
            if i:
                await asyncio.sleep(0)
            self._parse_slice(self.lines[i : i + PARSE_SLICE])
        return self._finish()

    def unreadable(self, why: str) -> None:
        """The engine sent something the arena cannot read: the request is its failure (the
        first reason is kept)."""
        self._unreadable = True
        self.done = False
        if self.error is None:
            self.error = storable(why)

    def _finish(self) -> StreamResult:
        """Once per request: what the arena keeps must be valid Unicode. JSON's `\\udcff` escapes
        carry lone surrogates, which UTF-8 (Parquet, the next turn's request) cannot hold; such a
        reply is unreadable, kept with U+FFFD in their place (lengths unchanged)."""
        if not _valid(self.text):
            self.chunk_texts = [storable(c) for c in self.chunk_texts]
            self.unreadable("reply text is not valid Unicode (a lone surrogate)")
        if self.finish_reason is not None and not _valid(self.finish_reason):
            self.finish_reason = storable(self.finish_reason)
            self.unreadable("finish_reason is not valid Unicode (a lone surrogate)")
        if self._unreadable:
            self.done = False
        return self

    def _parse_slice(self, lines: list[tuple[float, bytes]]) -> None:
        """Decode payloads; a text chunk shaped like the last one learnt (see _template) costs
        one string scan instead of a JSON parse and gives the same result."""
        texts = _texts([p for _, p in lines])
        times, chunks = self.chunk_times, self.chunk_texts
        tpl = self._tpl
        for (t, payload), s in zip(lines, texts):
            try:
                if s is None:  # json.loads would take some such bytes (surrogatepass): the wire is UTF-8
                    self.unreadable(f"SSE payload is not UTF-8: {payload[:120]!r}")
                    continue
                if tpl is not None:
                    pre, suf = tpl
                    if s.startswith(pre) and s.endswith(suf) and len(s) > len(pre) + len(suf):
                        try:
                            val, end = _scanstring(s, len(pre))
                        except ValueError:
                            end = -1
                        if end == len(s) - len(suf):
                            if val:
                                times.append(t)
                                chunks.append(val)
                            self._tpl_hit = True
                            continue
                obj = _decode(s, payload)
                if self._tpl_tries < 3 and obj is not _BAD:
                    learnt = _template(s, obj)
                    if learnt is not None:
                        if not self._tpl_hit:
                            self._tpl_tries += 1  # the last one learnt never matched: stop after 3
                        tpl, self._tpl_hit = learnt, False
                self._apply(t, payload, obj)
            except Exception as exc:  # noqa: BLE001 - whatever an engine's payload does, it is its failure
                self.unreadable(f"unreadable SSE payload ({type(exc).__name__}): {payload[:120]!r}")
        self._tpl = tpl

    def _apply(self, t: float, payload: bytes, obj: Any) -> None:
        """One decoded event, its shape checked as it is read: an object whose `choices` is a
        list of objects, each `delta` an object (or null) whose `content` is a string (or null),
        `finish_reason` a string (or null), `usage` an object of integer counts (or null)."""
        if obj is _BAD:
            self.unreadable(f"malformed SSE payload: {payload[:120]!r}")
            return
        if not isinstance(obj, dict):
            self.unreadable(f"SSE payload is not a JSON object: {payload[:120]!r}")
            return
        choices = obj.get("choices")
        if "error" in obj and not choices:
            self.unreadable(f"engine error in stream: {str(obj['error'])[:200]}")
            return
        usage = obj.get("usage")
        if usage is not None:
            if not _usage_ok(usage):
                self.unreadable(f"malformed usage in SSE payload: {payload[:120]!r}")
                return
            if usage:
                self.usage = usage
        if choices is None:
            return
        if not isinstance(choices, list):
            self.unreadable(f"SSE payload's choices is not a list: {payload[:120]!r}")
            return
        for choice in choices:
            if not isinstance(choice, dict):
                self.unreadable(f"SSE payload's choice is not an object: {payload[:120]!r}")
                return
            delta = choice.get("delta")
            if delta is not None:
                if not isinstance(delta, dict):
                    self.unreadable(f"SSE payload's delta is not an object: {payload[:120]!r}")
                    return
                content = delta.get("content")
                if content is not None and not isinstance(content, str):
                    self.unreadable(f"SSE payload's content is not a string: {payload[:120]!r}")
                    return
                if content:
                    self.chunk_times.append(t)
                    self.chunk_texts.append(content)
            finish = choice.get("finish_reason")
            if finish is not None:
                if not isinstance(finish, str):
                    self.unreadable(f"SSE payload's finish_reason is not a string: {payload[:120]!r}")
                    return
                if finish:
                    self.finish_reason = finish

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


_MAX_COUNT = 2**62  # an engine's claimed count must fit the warehouse's int64 columns


def _count_ok(v: Any) -> bool:
    return v is None or (type(v) is int and 0 <= v < _MAX_COUNT)


def _usage_ok(usage: Any) -> bool:
    """`usage` as the arena reads it: an object whose prompt and completion counts and
    `prompt_tokens_details.cached_tokens` are non-negative integers or null."""
    if not isinstance(usage, dict):
        return False
    details = usage.get("prompt_tokens_details")
    return (
        _count_ok(usage.get("prompt_tokens"))
        and _count_ok(usage.get("completion_tokens"))
        and (details is None or (isinstance(details, dict) and _count_ok(details.get("cached_tokens"))))
    )


_SURROGATE = re.compile("[\ud800-\udfff]")


def _valid(s: str) -> bool:
    """`s` holds no lone surrogate (UTF-8 can encode it)."""
    if s.isascii():
        return True
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def storable(s: str) -> str:
    """`s` as UTF-8 can hold it: lone surrogates replaced by U+FFFD, one for one."""
    return s if s.isascii() else _SURROGATE.sub("\ufffd", s)
