"""One timed pass of a LowBArena workload: `requests` prompts of `prompt_tokens` tokens, each
generating exactly `generated_tokens` (ignore_eos), at most `at_once` in flight.

Why fixed lengths: the throughput axis compares the speed of the same work, so every request
of both engines generates the same number of tokens; the change in generated length, which
the rules charge separately (dL and the length gate), is measured on the accuracy items, where
answers end where the model ends them. The client streams (stream.py), so the first token's
arrival marks when the engine started to run a request: the scorer counts a request as running
from then until its last token, which is how capacity charges every request in flight and
credits nothing to one that is queued.

Token counts are the runner's, with the target's tokenizer, never the engine's usage numbers.
"""

from __future__ import annotations

import asyncio
import time

from speculator_arena.runners.stream import stream_chat
from speculator_arena.runners.tokens import count_tokens
from speculator_arena.runners.workload import make_client


def request_body(served_name: str, messages: list[dict], max_tokens: int, seed: int, sampling: dict, **extra) -> dict:
    """A streamed chat completion with the protocol's sampling and a seed of its own."""
    return {
        "model": served_name,
        "messages": messages,
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": max_tokens,
        "temperature": sampling["temperature"],
        "top_p": sampling["top_p"],
        "top_k": sampling["top_k"],
        "seed": seed,
        "chat_template_kwargs": {"enable_thinking": False},
        **extra,
    }


async def _serve(base_url: str, bodies: list[dict], at_once: int, deadline: float, alive) -> list:
    sem = asyncio.Semaphore(at_once)
    async with make_client(at_once) as client:

        async def one(body):
            async with sem:
                if not alive():
                    return None
                return await stream_chat(client, base_url + "/v1/chat/completions", body, deadline=deadline)

        return await asyncio.gather(*(one(b) for b in bodies))


def serve_requests(base_url: str, bodies: list[dict], at_once: int, *, deadline_s: float, alive) -> list:
    """Send `bodies` with at most `at_once` in flight; the StreamResults in order (None for a
    request never sent because the engine was gone)."""
    return asyncio.run(_serve(base_url, bodies, at_once, time.time() + deadline_s, alive))


def request_rows(results: list, bodies: list[dict], prompt_tokens: list[int], tokenizer, **labels) -> list[dict]:
    """`lowb_requests` rows of one pass (without the evaluation id). A request is ok when its
    stream ended with [DONE] and it generated what it was asked; a shorter answer to a request
    that asked for exactly max_tokens is the engine's failure."""
    rows = []
    for i, (res, body, n_prompt) in enumerate(zip(results, bodies, prompt_tokens)):
        want = body["max_tokens"]
        row = dict(labels, request_index=i, seed=body["seed"], prompt_tokens=n_prompt, max_tokens=want)
        if res is None:
            rows.append(
                dict(
                    row,
                    output_tokens=None,
                    sent_at=None,
                    first_token_at=None,
                    finished_at=None,
                    ok=False,
                    error="not sent: the engine was not running",
                )
            )
            continue
        n_out = count_tokens(tokenizer, res.text) if res.text else 0
        error = res.error
        # re-tokenizing a text can merge or split a token at its seams: a few tokens of slack
        if error is None and n_out < want - max(2, want // 50):
            error = f"generated {n_out} tokens of the {want} asked (ignore_eos)"
        rows.append(
            dict(
                row,
                output_tokens=n_out if res.error is None else None,
                sent_at=res.sent_at,
                first_token_at=next((t for t, s in zip(res.chunk_times, res.chunk_texts) if s), None),
                finished_at=res.ended_at,
                ok=error is None,
                error=error,
            )
        )
    return rows
