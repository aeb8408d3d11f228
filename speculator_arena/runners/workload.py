"""The closed-loop workload client of protocol section 4.

`L` lanes, each holding `m` live sessions; a lane sends one request at a time: the next turn
of whichever of its sessions became ready first (its think time, capped and scaled, passed).
The reply joins the session's history before its next turn. Sessions are dealt to lanes
statically (lane j takes sessions j, j+L, j+2L, ... of the pass's list), so both engines see
the same sessions on the same lanes in the same order; a faster engine only plays further.

Work done while streams are open is kept to stamping and storing lines (stream.py); token
counting of new history messages runs in a worker thread so that it does not delay the
timestamps of other lanes' chunks.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from dataclasses import dataclass, field
from typing import Any

from speculator_arena.rules.window import WindowRule
from speculator_arena.runners.sse_decode import StreamResult
from speculator_arena.runners.stream import SSEClient, stream_chat
from speculator_arena.runners.tokens import count_tokens


def request_seed(evaluation_id: str, session_id: str, turn: int) -> int:
    """The same seed for the same turn of the same session on both engines."""
    h = hashlib.sha256(f"{evaluation_id}|{session_id}|{turn}".encode()).digest()
    return int.from_bytes(h[:4], "big") & 0x7FFFFFFF


@dataclass
class SessionState:
    """One live session: its history as sent (cut by the window rule when needed)."""

    session: Any
    messages: list[dict] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)  # content tokens per message
    tools_tokens: int = 0
    next_turn: int = 0
    ready_at: float = 0.0
    cut: bool = False

    @property
    def done(self) -> bool:
        return self.next_turn >= len(self.session.turns)


@dataclass
class RequestRecord:
    """What a lane saw of one request; turned into raw rows after the pass."""

    request_id: str
    lane: int
    session_id: str
    turn: int
    seed: int
    max_tokens: int
    prompt_tokens: int
    window_cut: bool
    result: StreamResult
    messages: list[dict]  # the history object sent (shared, not copied)
    n_messages: int  # how many of `messages` were sent
    system_prompt: str | None


@dataclass
class ClientConfig:
    base_url: str
    served_name: str
    evaluation_id: str
    engine: str
    sampling: dict  # temperature, top_p, top_k
    window: WindowRule
    think_cap_s: float
    think_scale: float
    max_tokens_cap: int | None
    tokenizer: Any

    @property
    def url(self) -> str:
        return self.base_url.rstrip("/") + "/v1/chat/completions"


def request_body(
    cfg: ClientConfig, messages: list[dict], *, tools, max_tokens: int, seed: int, sampling: dict | None = None
) -> dict:
    """A timed request; probes use the same builder so that they look alike (section 9)."""
    s = cfg.sampling if sampling is None else sampling
    body = {
        "model": cfg.served_name,
        "messages": messages,
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": max_tokens,
        "temperature": s["temperature"],
        "top_p": s["top_p"],
        "top_k": s["top_k"],
        "seed": seed,
        "chat_template_kwargs": {"enable_thinking": False},
    }
    if tools:
        body["tools"] = tools
        body["tool_choice"] = "none"
    return body


class WallClock:
    """The wall's clock, on which every pass but a sliced one runs (sliced.py's EngineClock is
    the other)."""

    @staticmethod
    def now() -> float:
        return time.time()

    @staticmethod
    def map_result(res) -> None:
        """Stream times are stamped on the wall's clock already."""


WALL = WallClock()


class Lane:
    def __init__(
        self,
        cfg: ClientConfig,
        client: SSEClient | None,
        lane: int,
        sessions: list,
        m: int,
        pass_id: str,
        records: list[RequestRecord],
    ):
        self.cfg, self.client, self.lane, self.m = cfg, client, lane, m
        self.queue = list(sessions)
        self.live: list[SessionState] = []
        self.pass_id = pass_id
        self.records = records

    async def _admit(self, now: float) -> None:
        while len(self.live) < self.m and self.queue:
            s = self.queue.pop(0)
            st = SessionState(session=s, ready_at=now)
            if getattr(s, "system_prompt", None):
                st.messages.append({"role": "system", "content": s.system_prompt})
                st.counts.append(await asyncio.to_thread(count_tokens, self.cfg.tokenizer, s.system_prompt))
            if getattr(s, "tools", None):
                st.tools_tokens = await asyncio.to_thread(
                    count_tokens, self.cfg.tokenizer, json.dumps(s.tools, ensure_ascii=False)
                )
            self.live.append(st)

    def _cut(self, st: SessionState, max_tokens: int) -> None:
        """Window rule: keep the first message, drop the oldest others down to the cut size."""
        w = self.cfg.window
        target = w.cut_target
        keep_head = 1 if len(st.messages) > 1 else 0
        # A cut history is a new list from here on: earlier records keep the one they sent.
        st.messages = list(st.messages)
        st.counts = list(st.counts)
        while len(st.messages) > keep_head + 1 and w.estimate(sum(st.counts) + st.tools_tokens) > target:
            del st.messages[keep_head]
            del st.counts[keep_head]
        st.cut = True

    async def run(
        self,
        ends_at: float,
        grace_ends_at: float,
        max_requests: int | None = None,
        stop_check=None,
        clock=None,
        stream_deadline: float | None = None,
    ) -> None:
        """`clock`: the engine's clock of a sliced pass (sliced.py), on which `ends_at`, think
        times and every stored time of a request are; `stream_deadline` then cuts streams on the
        wall's clock (`grace_ends_at` otherwise)."""
        cfg = self.cfg
        clock = clock or WALL
        sent = 0
        await self._admit(clock.now())
        while self.live:
            now = clock.now()
            if now >= ends_at or (max_requests is not None and sent >= max_requests):
                return
            if stop_check is not None and stop_check():
                return
            st = min(self.live, key=lambda s: s.ready_at)
            if st.ready_at > now:
                await asyncio.sleep(min(st.ready_at, ends_at) - now)
                continue
            s = st.session
            turn = s.turns[st.next_turn]
            turn_index = st.next_turn
            content = turn.content
            st.messages.append({"role": "user", "content": content})
            st.counts.append(await asyncio.to_thread(count_tokens, cfg.tokenizer, content))
            max_tokens = int(turn.max_tokens)
            if cfg.max_tokens_cap:
                max_tokens = min(max_tokens, int(cfg.max_tokens_cap))
            cut = False
            if not cfg.window.fits(sum(st.counts) + st.tools_tokens, max_tokens):
                self._cut(st, max_tokens)
                cut = True
            prompt_tokens = sum(st.counts) + st.tools_tokens
            seed = request_seed(cfg.evaluation_id, s.session_id, turn_index)
            body = request_body(cfg, st.messages, tools=getattr(s, "tools", None), max_tokens=max_tokens, seed=seed)
            if clock.now() >= ends_at:  # no request is sent after the pass ends
                st.messages.pop()
                st.counts.pop()
                return
            sent += 1
            result = await stream_chat(
                self.client, cfg.url, body, deadline=grace_ends_at if stream_deadline is None else stream_deadline
            )
            clock.map_result(result)
            rec = RequestRecord(
                request_id=f"{cfg.engine}:{self.pass_id}:{s.session_id}:{turn_index}",
                lane=self.lane,
                session_id=s.session_id,
                turn=turn_index,
                seed=seed,
                max_tokens=max_tokens,
                prompt_tokens=prompt_tokens,
                window_cut=cut,
                result=result,
                messages=st.messages,
                n_messages=len(st.messages),
                system_prompt=getattr(s, "system_prompt", None),
            )
            self.records.append(rec)
            st.next_turn += 1
            if result.done:
                reply = result.text
                try:
                    n = await asyncio.to_thread(count_tokens, cfg.tokenizer, reply)
                except Exception as exc:  # noqa: BLE001 - a reply the arena cannot read is the engine's failure
                    result.unreadable(f"reply unreadable by the target's tokenizer: {type(exc).__name__}")
                else:
                    st.messages.append({"role": "assistant", "content": reply})
                    st.counts.append(n)
            if not result.done or st.done:
                # A session whose turn failed cannot continue its closed loop: the lane moves on.
                self.live.remove(st)
                await self._admit(clock.now())
                continue
            nxt = s.turns[st.next_turn]
            think = min(float(nxt.think_time_s or 0.0), cfg.think_cap_s) * cfg.think_scale
            st.ready_at = result.ended_at + think


async def run_lanes(
    cfg: ClientConfig,
    sessions: list,
    lanes: int,
    interleave: int,
    pass_id: str,
    ends_at: float,
    grace_ends_at: float,
    client: SSEClient | None = None,
    max_requests_per_lane: int | None = None,
    stop_check=None,
    lane_state: list[Lane] | None = None,
    clock=None,
    stream_deadline: float | None = None,
) -> list[RequestRecord]:
    """Run one pass (or a warm-up wave: one request per lane) and return every request it sent.

    `stop_check` (the engine died) ends every lane before its next request. `lane_state`: lanes
    made by `make_lanes` and kept by the caller, which go on from where their last pass left
    their sessions (the interleaved pairing's passes of one workload; `sessions` is unused).
    `clock`, `stream_deadline`: a sliced pass's engine clock (`Lane.run`).
    """
    records: list[RequestRecord] = []
    own = client is None
    if own:
        client = make_client(lanes)
    try:
        if lane_state is None:
            tasks = make_lanes(cfg, sessions, lanes, interleave)
        else:
            tasks = lane_state
        for t in tasks:
            t.client, t.pass_id, t.records = client, pass_id, records
        await asyncio.gather(
            *(t.run(ends_at, grace_ends_at, max_requests_per_lane, stop_check, clock, stream_deadline) for t in tasks)
        )
    finally:
        if own:
            await client.aclose()
    records.sort(key=lambda r: r.result.sent_at)
    return records


def make_lanes(cfg: ClientConfig, sessions: list, lanes: int, interleave: int) -> list[Lane]:
    """The lanes of a pass: lane j takes sessions j, j+L, j+2L, ... (both engines alike)."""
    return [Lane(cfg, None, j, sessions[j::lanes], interleave, "", []) for j in range(lanes)]


def make_client(lanes: int) -> SSEClient:
    """One keep-alive connection per lane; no read timeout (a pass's grace end bounds every
    stream); the arena's own SSE reader (stream.py says why)."""
    return SSEClient(max_idle=lanes + 4, connect_timeout=30.0)


def record_rows(
    rec: RequestRecord,
    *,
    evaluation_id: str,
    engine: str,
    pass_id: str,
    workload: str,
    pass_index: int | None,
    tokenizer,
) -> tuple[dict, dict]:
    """The raw `requests` row and `replies` row of one request (tokens counted from its text)."""
    from speculator_arena.runners.tokens import attribute_chunks

    r = rec.result
    try:
        output_tokens, chunk_tokens = attribute_chunks(tokenizer, r.chunk_texts)
    except Exception as exc:  # noqa: BLE001 - what the engine sent is its failure, never the runner's
        r.unreadable(f"reply unreadable by the target's tokenizer: {type(exc).__name__}")
        output_tokens, chunk_tokens = 0, [0] * len(r.chunk_texts)
    # `error` holds what went wrong on the wire or in what the engine sent (then `done` is false);
    # whether a request counts is the rule of rules/counted.py, applied to these columns (raw
    # rows are the truth, rules are views).
    error = r.error
    row = {
        "evaluation_id": evaluation_id,
        "pass_id": pass_id,
        "engine": engine,
        "workload": workload,
        "pass_index": pass_index,
        "request_id": rec.request_id,
        "lane": rec.lane,
        "session_id": rec.session_id,
        "turn": rec.turn,
        "seed": rec.seed,
        "sent_at": r.sent_at,
        "first_token_at": r.chunk_times[0] if r.chunk_times else None,
        "last_token_at": r.chunk_times[-1] if r.chunk_times else None,
        "ended_at": r.ended_at,
        "prompt_tokens": rec.prompt_tokens,
        "usage_prompt_tokens": r.usage_prompt_tokens,
        "cached_tokens": r.cached_tokens,
        "output_tokens": output_tokens,
        "usage_completion_tokens": r.usage_completion_tokens,
        "max_tokens": rec.max_tokens,
        "done": r.done,
        "finish_reason": r.finish_reason,
        "error": error,
        "window_cut": rec.window_cut,
        "chunk_times": list(r.chunk_times),
        "chunk_tokens": chunk_tokens,
        "chunk_chars": [len(c) for c in r.chunk_texts],
    }
    reply = {"evaluation_id": evaluation_id, "request_id": rec.request_id, "engine": engine, "text": r.text}
    return row, reply
