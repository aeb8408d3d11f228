"""Fidelity texts: a recorded reply after its conversation, for the sampled-likelihood gate."""

from __future__ import annotations

import hashlib

from speculator_arena.pools.builder.context import BuildContext
from speculator_arena.pools.model import SourceConversation


def fidelity_text(ctx: BuildContext, c: SourceConversation, split: str) -> dict | None:
    """A recorded reply after its conversation, cut as the sampled-likelihood check cuts its
    context (its first user message, then the latest messages that fit) and its reply."""
    g = ctx.task.gates.sampled_likelihood
    msgs = c.messages
    idx = [i for i, m in enumerate(msgs) if m["role"] == "assistant" and i > 0]
    if not idx:
        return None
    j = idx[min(1, len(idx) - 1)]
    reply = msgs[j]["content"][: g.reply_chars]
    budget = g.context_tokens - ctx.counter.one(reply)
    first = dict(msgs[0])
    first["content"] = ctx.counter.cut(first["content"], max(budget // 2, 1))
    budget -= ctx.counter.one(first["content"])
    tail: list[dict] = []
    for m in reversed(msgs[1:j]):
        t = ctx.counter.one(m["content"])
        if t > budget:
            break
        tail.insert(0, dict(m))
        budget -= t
    if tail and tail[0]["role"] == "user":  # keep user/assistant alternation after the first message
        tail.pop(0)
    messages = [first] + tail
    if messages[-1]["role"] != "user":
        return None
    return {
        "text_id": f"{split}-fid-{hashlib.sha256(c.source_id.encode()).hexdigest()[:10]}",
        "messages": messages,
        "reply": reply,
    }
