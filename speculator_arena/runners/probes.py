"""Gate probes of section 6, run after the timed passes on a restart of each engine.

- Greedy agreement: the pool's probe prompts at temperature 0, one at a time, built exactly
  as timed requests are (section 9: an engine must not tell probes from timed traffic).
- Target fidelity: each engine's `prompt_logprobs` of the pool's fixed texts (a recorded
  reply after its conversation, sent with `continue_final_message`).
- Likelihood / first choice: R counted timed replies of each engine, sampled with the same
  seeded procedure, scored by the stock engine on the system prompt plus the conversation's
  last `context_tokens` tokens (led by its first user message when they hold none) plus the
  reply cut to `reply_chars` characters.

Only the reply's own tokens are stored: the arena's tokenization of it (the positions scored),
their log-probabilities and ranks under the target, and a digest of the scored messages.
The statistics are the scorer's (speculator_arena.scoring); this module only measures.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import random
import time

import httpx

from speculator_arena.runners.nonstreamed import post_json
from speculator_arena.runners.stream import stream_chat
from speculator_arena.runners.tokens import token_ids
from speculator_arena.runners.workload import RequestRecord, request_seed

# A runner safeguard, not a protocol value: no single probe request may hang an evaluation.
PROBE_REQUEST_TIMEOUT_S = 600.0


def sample_replies(records: list[RequestRecord], n: int, evaluation_id: str) -> list[RequestRecord]:
    """R counted replies of one engine, drawn the same seeded way for both engines."""
    ordered = sorted(records, key=lambda r: (r.request_id.split(":", 1)[1], r.session_id, r.turn))
    seed = int.from_bytes(hashlib.sha256(f"{evaluation_id}|likelihood".encode()).digest()[:8], "big")
    rng = random.Random(seed)
    return rng.sample(ordered, min(n, len(ordered)))


def scoring_context(rec: RequestRecord, tokenizer, context_tokens: int) -> list[dict]:
    """System prompt + the conversation's last `context_tokens` tokens (led by a user message)."""
    msgs = rec.messages[: rec.n_messages]
    system = [msgs[0]] if msgs and msgs[0]["role"] == "system" else []
    conv = msgs[len(system) :]
    kept: list[dict] = []
    budget = context_tokens
    for m in reversed(conv):
        ids = token_ids(tokenizer, m["content"])
        if len(ids) <= budget:
            kept.insert(0, m)
            budget -= len(ids)
            continue
        if budget > 0:
            kept.insert(0, {"role": m["role"], "content": tokenizer.decode(ids[-budget:])})
        break
    if not any(m["role"] == "user" for m in kept):
        first_user = next((m for m in conv if m["role"] == "user"), None)
        if first_user is not None:
            kept.insert(0, first_user)
    return system + kept


def parse_prompt_logprobs(resp, token_ids: list[int]) -> tuple[list[float], list[int]]:
    """Log-probabilities and ranks of the arena's own tokens at the last prompt positions.

    `token_ids`: the scored reply as the arena tokenizes it with the target's tokenizer (SCORING.md:
    "token positions are the arena's"). Each position of a vLLM-style `prompt_logprobs` answer
    maps token ids to {logprob, rank}; the arena's token must be among them. Total over any JSON
    value `resp`: an answer that does not cover those positions (too few positions, another token
    there) or whose numbers are not numbers (a logprob not finite, a rank not a positive integer)
    raises ValueError, and only ValueError: the item is unanswered by that engine, never scored on
    the engine's own ids and never an error of the arena.
    """
    pl = resp.get("prompt_logprobs") if isinstance(resp, dict) else None
    if pl is None and isinstance(resp, dict):
        choices = resp.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], dict):
            pl = choices[0].get("prompt_logprobs")
    if not isinstance(pl, list):
        raise ValueError("no prompt_logprobs in the answer")
    n = len(token_ids)
    if n > len(pl):
        raise ValueError(f"prompt_logprobs has {len(pl)} positions, the reply alone has {n} tokens")
    lps, ranks = [], []
    for k, (tid, entry) in enumerate(zip(token_ids, pl[len(pl) - n :])):
        info = entry.get(str(tid)) if isinstance(entry, dict) else None
        if not isinstance(info, dict) or "logprob" not in info:
            raise ValueError(f"prompt_logprobs do not cover the arena's token {tid} at reply position {k}")
        lps.append(_logprob(info["logprob"], k))
        ranks.append(_rank(info.get("rank"), k))
    return lps, ranks


def _logprob(v, k: int) -> float:
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        try:
            f = float(v)
        except OverflowError:
            f = math.inf
        if math.isfinite(f):
            return f
    what = repr(v)[:40] if isinstance(v, (int, float, str)) else type(v).__name__
    raise ValueError(f"prompt_logprobs' logprob at reply position {k} is not a finite number: {what}")


def _rank(v, k: int) -> int:
    """A rank is a positive integer (an integral float is taken); missing or 0 reads as 1, as
    before: only the first-choice statistic reads it, and only from the stock engine."""
    if v is None or (v == 0 and not isinstance(v, (bool, str))):
        return 1
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if type(v) is int and 1 <= v < 2**62:
        return v
    what = repr(v)[:40] if isinstance(v, (int, float, str)) else type(v).__name__
    raise ValueError(f"prompt_logprobs' rank at reply position {k} is not a positive integer: {what}")


def scored_reply_ids(tokenizer, messages: list[dict]) -> list[int]:
    """The scored reply's tokens at the arena's own positions (SCORING.md): the whole scored text
    (the chat template rendered with the reply as the final message, continued, as the request
    asks the engine to) tokenized with the target's tokenizer; the reply's tokens are those that
    end inside it, so a token the template's last characters share with the reply (a reply that
    starts with blank lines) is the reply's, as it is in the engine's positions. Falls back to the
    reply alone when the template does not end the text with the reply as given."""
    reply = messages[-1]["content"]
    if not reply:
        return []
    try:
        text = tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=False, continue_final_message=True, enable_thinking=False
        )
    except Exception:
        text = None
    if not isinstance(text, str) or not text.endswith(reply):
        return token_ids(tokenizer, reply)
    start = len(text) - len(reply)
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    return [int(t) for t, (_, end) in zip(enc["input_ids"], enc["offset_mapping"]) if end > start]


def context_digest(messages: list[dict]) -> str:
    """sha256 of the scored messages as sent (context and reply), so a stored row names them."""
    return hashlib.sha256(json.dumps(messages, ensure_ascii=False, sort_keys=True).encode()).hexdigest()


class ProbeRunner:
    def __init__(self, evaluation_id: str, tokenizer, task, say=print):
        self.eid, self.tok, self.task, self.say = evaluation_id, tokenizer, task, say
        self.served_name = task.task.model

    # ---- greedy ------------------------------------------------------------------------
    def greedy(self, engine: str, base_url: str, prompts, alive) -> list[dict]:
        return asyncio.run(self._greedy(engine, base_url, prompts, alive))

    async def _greedy(self, engine, base_url, prompts, alive) -> list[dict]:
        g = self.task.gates.greedy_agreement
        s = self.task.sampling
        rows = []
        async with httpx.AsyncClient(timeout=httpx.Timeout(None, connect=30.0), trust_env=False) as client:
            for i, p in enumerate(prompts):
                row = {
                    "evaluation_id": self.eid,
                    "engine": engine,
                    "prompt_id": p.prompt_id,
                    "prompt_index": i,
                    "token_ids": None,
                    "text": None,
                    "answered": False,
                    "error": None,
                }
                if not alive():
                    row["error"] = "engine not running"
                    rows.append(row)
                    continue
                body = {
                    "model": self.served_name,
                    "messages": p.messages,
                    "stream": True,
                    "stream_options": {"include_usage": True},
                    "max_tokens": g.max_tokens,
                    "temperature": g.temperature,
                    "top_p": s.top_p,
                    "top_k": s.top_k,
                    "seed": request_seed(self.eid, p.prompt_id, 0),
                    "chat_template_kwargs": {"enable_thinking": False},
                }
                res = await stream_chat(
                    client, base_url + "/v1/chat/completions", body, deadline=time.time() + PROBE_REQUEST_TIMEOUT_S
                )
                if res.done and res.error is None:
                    try:
                        row.update(text=res.text, token_ids=token_ids(self.tok, res.text), answered=True)
                    except Exception as exc:  # noqa: BLE001 - a reply the arena cannot tokenize is the engine's
                        row.update(text=None, token_ids=None, error=f"reply unreadable: {type(exc).__name__}")
                else:
                    row["error"] = res.error or "no [DONE]"
                rows.append(row)
        self.say(f"{engine} greedy probes: {sum(r['answered'] for r in rows)}/{len(rows)} answered")
        return rows

    def unanswered_greedy(self, engine: str, prompts, reason: str) -> list[dict]:
        return [
            {
                "evaluation_id": self.eid,
                "engine": engine,
                "prompt_id": p.prompt_id,
                "prompt_index": i,
                "token_ids": None,
                "text": None,
                "answered": False,
                "error": reason,
            }
            for i, p in enumerate(prompts)
        ]

    # ---- prompt_logprobs ---------------------------------------------------------------
    def _score_body(self, messages: list[dict], reply: str, seed: int) -> dict:
        return {
            "model": self.served_name,
            "messages": list(messages) + [{"role": "assistant", "content": reply}],
            "stream": False,
            "max_tokens": 1,
            "temperature": 0.0,
            "seed": seed,
            "prompt_logprobs": 1,
            "add_generation_prompt": False,
            "continue_final_message": True,
            "chat_template_kwargs": {"enable_thinking": False},
        }

    async def _score_all(self, base_url: str, items: list[tuple[list[dict], str, int]], alive):
        """Per item: (token ids, log-probabilities, ranks, context digest, error). An empty reply
        has nothing to score: it is answered with no tokens (it shifts no statistic and is never
        charged to the engine asked)."""
        out = []
        async with httpx.AsyncClient(
            timeout=httpx.Timeout(PROBE_REQUEST_TIMEOUT_S, connect=30.0), trust_env=False
        ) as client:
            for messages, reply, seed in items:
                body = self._score_body(messages, reply, seed)
                digest, ids = context_digest(body["messages"]), scored_reply_ids(self.tok, body["messages"])
                if not ids:
                    out.append((ids, [], [], digest, None))
                    continue
                if not alive():
                    out.append((ids, None, None, digest, "engine not running"))
                    continue
                resp, err = await post_json(
                    client, base_url + "/v1/chat/completions", body, timeout=PROBE_REQUEST_TIMEOUT_S
                )
                if err:
                    out.append((ids, None, None, digest, err))
                    continue
                try:
                    lps, ranks = parse_prompt_logprobs(resp, ids)
                except ValueError as exc:
                    out.append((ids, None, None, digest, f"unreadable prompt_logprobs: {exc}"))
                    continue
                out.append((ids, lps, ranks, digest, None))
        return out

    def fidelity(self, engine: str, base_url: str, texts, alive) -> list[dict]:
        items = [(t.messages, t.reply, request_seed(self.eid, t.text_id, 0)) for t in texts]
        results = asyncio.run(self._score_all(base_url, items, alive))
        rows = []
        for t, (ids, lps, _, _, err) in zip(texts, results):
            rows.append(
                {
                    "evaluation_id": self.eid,
                    "engine": engine,
                    "text_id": t.text_id,
                    "token_ids": ids,
                    "token_logprobs": lps,
                    "answered": err is None,
                    "error": err,
                }
            )
        self.say(f"{engine} fidelity probes: {sum(r['answered'] for r in rows)}/{len(rows)} answered")
        return rows

    def unanswered_fidelity(self, engine: str, texts, reason: str) -> list[dict]:
        return [
            {
                "evaluation_id": self.eid,
                "engine": engine,
                "text_id": t.text_id,
                "token_ids": scored_reply_ids(self.tok, list(t.messages) + [{"role": "assistant", "content": t.reply}]),
                "token_logprobs": None,
                "answered": False,
                "error": reason,
            }
            for t in texts
        ]

    def scored(self, reply_engine: str, base_url: str, sampled: list[RequestRecord], alive) -> list[dict]:
        sl = self.task.gates.sampled_likelihood
        items = []
        for rec in sampled:
            ctx = scoring_context(rec, self.tok, sl.context_tokens)
            items.append((ctx, rec.result.text[: sl.reply_chars], rec.seed))
        results = asyncio.run(self._score_all(base_url, items, alive))
        rows = []
        for k, (rec, (ids, lps, ranks, digest, err)) in enumerate(zip(sampled, results)):
            rows.append(
                {
                    "evaluation_id": self.eid,
                    "reply_engine": reply_engine,
                    "scorer_engine": "stock",
                    "request_id": rec.request_id,
                    "sample_index": k,
                    "token_ids": ids,
                    "context_sha256": digest,
                    "token_logprobs": lps,
                    "token_ranks": ranks,
                    "answered": err is None,
                    "error": err,
                }
            )
        self.say(f"stock scored {sum(r['answered'] for r in rows)}/{len(rows)} sampled {reply_engine} replies")
        return rows
