"""The KL probe: both engines score the same natural texts with `prompt_logprobs`, and the
scorer compares their distributions position by position (KL(BF16 || solution), nats/token).

Why texts scored as an assistant's reply, as the speculator arena's fidelity probe does
(probes.py): the positions are the arena's own (the target's tokenizer over the chat template,
`scored_reply_ids`), so both engines are read at the same tokens whatever they claim. Each
position keeps the engine's top-k (the protocol's `kl_top_k`) and the log-probability of the
text's own token; the scorer completes the distributions from those (scoring/lowb, `kl_topk`).

An engine that does not answer, or answers something that does not cover the arena's
positions, leaves that prompt unanswered: a row saying so, never a made-up distribution. The
engine rules charge an unanswered prompt to the candidate (score 0).
"""

from __future__ import annotations

import asyncio
import math

import httpx

from speculator_arena.runners.nonstreamed import post_json
from speculator_arena.runners.probes import scored_reply_ids

REQUEST_TIMEOUT_S = 300.0
INSTRUCTION = "Continue the text."


def probe_messages(text: str) -> list[dict]:
    return [{"role": "user", "content": INSTRUCTION}, {"role": "assistant", "content": text}]


def parse_topk(resp, token_ids: list[int], top_k: int) -> list[tuple[float, list[int], list[float]]]:
    """Per arena position: (the text's token's logprob, the ids ranked 1..top_k, their logprobs).
    vLLM's shape lists the top-k with their ranks plus the text's own token whatever its rank.
    Raises ValueError for any answer that does not cover the positions with finite numbers."""
    pl = resp.get("prompt_logprobs") if isinstance(resp, dict) else None
    if pl is None and isinstance(resp, dict):
        choices = resp.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], dict):
            pl = choices[0].get("prompt_logprobs")
    if not isinstance(pl, list) or len(pl) < len(token_ids):
        raise ValueError("prompt_logprobs missing or shorter than the scored text")
    out = []
    for k, (tid, entry) in enumerate(zip(token_ids, pl[len(pl) - len(token_ids) :])):
        if not isinstance(entry, dict) or str(tid) not in entry:
            raise ValueError(f"prompt_logprobs do not cover the arena's token at position {k}")
        ranked = []
        for key, info in entry.items():
            try:
                tok, lp = int(key), float(info["logprob"])
                rank = info.get("rank") if isinstance(info, dict) else None
            except (TypeError, ValueError, KeyError, OverflowError):
                raise ValueError(f"unreadable prompt_logprobs entry at position {k}") from None
            if not math.isfinite(lp) or lp > 1e-6:
                raise ValueError(f"prompt_logprobs' logprob at position {k} is not a log-probability")
            ranked.append((rank if isinstance(rank, int) and rank >= 1 else 10**9, -lp, tok, lp))
        own = float(entry[str(tid)]["logprob"])
        ranked.sort()
        top = [(tok, lp) for rank, _, tok, lp in ranked if rank <= top_k]
        out.append((own, [t for t, _ in top], [lp for _, lp in top]))
    return out


async def _probe(base_url: str, served_name: str, prompts, token_ids, top_k: int, alive) -> list:
    results = []
    async with httpx.AsyncClient(timeout=httpx.Timeout(REQUEST_TIMEOUT_S, connect=30.0), trust_env=False) as client:
        for (_, text), ids in zip(prompts, token_ids):
            if not alive():
                results.append((None, "engine not running"))
                continue
            body = {
                "model": served_name,
                "messages": probe_messages(text),
                "stream": False,
                "max_tokens": 1,
                "temperature": 0.0,
                "seed": 0,
                "prompt_logprobs": top_k,
                "add_generation_prompt": False,
                "continue_final_message": True,
                "chat_template_kwargs": {"enable_thinking": False},
            }
            resp, err = await post_json(client, base_url + "/v1/chat/completions", body, timeout=REQUEST_TIMEOUT_S)
            if err:
                results.append((None, err))
                continue
            try:
                results.append((parse_topk(resp, ids, top_k), None))
            except ValueError as exc:
                results.append((None, f"unreadable prompt_logprobs: {exc}"))
    return results


def run_probe(engine: str, base_url: str, served_name: str, prompts, tokenizer, top_k: int, alive):
    """(`lowb_kl_prompts` rows, `lowb_logprobs` rows) of one engine, without the evaluation id."""
    token_ids = [scored_reply_ids(tokenizer, probe_messages(text)) for _, text in prompts]
    results = asyncio.run(_probe(base_url, served_name, prompts, token_ids, top_k, alive))
    prompt_rows, position_rows = [], []
    for (prompt_id, _), ids, (positions, err) in zip(prompts, token_ids, results):
        prompt_rows.append(
            {"engine": engine, "prompt_id": prompt_id, "prompt_tokens": len(ids), "answered": err is None, "error": err}
        )
        for pos, (tid, (own, top_ids, top_lps)) in enumerate(zip(ids, positions or [])):
            position_rows.append(
                {
                    "engine": engine,
                    "prompt_id": prompt_id,
                    "position": pos,
                    "token_id": int(tid),
                    "token_logprob": own,
                    "top_ids": top_ids[:top_k],
                    "top_logprobs": top_lps[:top_k],
                }
            )
    return prompt_rows, position_rows
