"""The engine core: one model worker thread that steps every active request in turn.

Why one worker and round-robin steps rather than padded batching: requests have caches of
different lengths, and a batch-1 step per request keeps each request's computation exactly the
one a lone request would get (what the lossless tests compare), while every lane still advances
and streams. Up to MAX_NUM_SEQS requests are active; the rest wait in arrival order.
A step is one prefill chunk, one plain decode token, or one speculation round (draft k tokens,
verify them in one target pass, emit the accepted ones plus a correction or bonus token).
"""

from __future__ import annotations

import itertools
import queue
import threading
import time
from collections import deque
from dataclasses import dataclass, field

import torch

from speculator_arena.engine import model_runner as mr
from speculator_arena.engine.drafters import ngram_lookup
from speculator_arena.engine.sampling import SamplingParams, point_mass, sample, target_probs, verify
from speculator_arena.engine.suffix_drafter import SuffixDrafter
from speculator_arena.errors import ArenaError


class EngineOverloaded(RuntimeError, ArenaError):
    pass


@dataclass
class Request:
    prompt_ids: list[int]
    params: SamplingParams
    max_tokens: int
    seed: int | None = None
    prompt_logprobs: int | None = None  # None: not asked; k >= 0: actual token plus top-k
    ignore_eos: bool = False  # vLLM's: EOS is emitted like any token and does not end the answer
    min_tokens: int = 0  # vLLM's: EOS cannot be sampled before this many tokens
    rid: str = ""
    out: queue.Queue = field(default_factory=queue.Queue)
    generated: list[int] = field(default_factory=list)
    cached_tokens: int = 0
    finish_reason: str | None = None
    cancelled: bool = False
    error: str | None = None
    # worker state
    cache: object = None
    pos: int = 0
    last: int | None = None  # last emitted token, not yet in the KV cache
    generator: torch.Generator | None = None
    prompt_logprob_rows: list = field(default_factory=list)
    arrived: float = field(default_factory=time.monotonic)

    @property
    def done(self) -> bool:
        return self.finish_reason is not None


class Engine:
    def __init__(self, cfg, model, tokenizer, device, dtype, prefix_cache, metrics, draft_model=None):
        self.cfg, self.model, self.tok = cfg, model, tokenizer
        self.device, self.dtype = device, dtype
        self.prefix_cache = prefix_cache
        self.metrics = metrics
        self.draft_model = draft_model
        # suffix decoding's per-request indexes and store of earlier outputs: this process only,
        # in memory, so drafts never cross an evaluation start (one pool split) (suffix_drafter.py)
        self.suffix = (
            SuffixDrafter(cfg.suffix_max_match, cfg.suffix_min_prob, cfg.suffix_alpha) if cfg.spec == "suffix" else None
        )
        eos = set()
        gen_eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
        for e in gen_eos if isinstance(gen_eos, (list, tuple)) else [gen_eos]:
            if e is not None:
                eos.add(int(e))
        if tokenizer.eos_token_id is not None:
            eos.add(int(tokenizer.eos_token_id))
        self.eos_ids = eos
        self._waiting: deque[Request] = deque()
        self._active: list[Request] = []
        self._cv = threading.Condition()
        self._stop = False
        self._ids = itertools.count(1)
        self._thread = threading.Thread(target=self._run, name="dev-engine-worker", daemon=True)
        # The lowb_queue attack serves one request at a time and queues the rest, whatever
        # MAX_NUM_SEQS promises (LowBArena's capacity axis charges every request in flight).
        self._lanes = 1 if cfg.attack == "lowb_queue" else cfg.max_num_seqs

    # ---- public, called from HTTP threads -------------------------------------------------
    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        with self._cv:
            self._stop = True
            self._cv.notify_all()

    def submit(self, req: Request) -> Request:
        req.rid = req.rid or f"chatcmpl-{next(self._ids)}"
        with self._cv:
            self._waiting.append(req)
            self._cv.notify_all()
        return req

    def counts(self) -> tuple[int, int]:
        with self._cv:
            return len(self._active), len(self._waiting)

    # ---- worker ---------------------------------------------------------------------------
    def _run(self) -> None:
        with torch.inference_mode():
            while True:
                with self._cv:
                    while not self._stop and not self._active and not self._waiting:
                        self._cv.wait(timeout=1.0)
                    if self._stop:
                        return
                    while self._waiting and len(self._active) < self._lanes:
                        self._active.append(self._waiting.popleft())
                    active = list(self._active)
                    waiting = len(self._waiting)
                self.metrics.lanes(
                    len(active), waiting, self.prefix_cache.stored_tokens / max(1, self.prefix_cache.budget)
                )
                for req in active:
                    try:
                        if req.cancelled:
                            req.finish_reason = req.finish_reason or "abort"
                        else:
                            self._step(req)
                    except Exception as exc:  # one bad request must not stop the others
                        mr.log(f"request {req.rid} failed: {type(exc).__name__}: {exc}")
                        req.error = f"{type(exc).__name__}: {exc}"
                        req.finish_reason = "error"
                    if req.done:
                        self._finish(req)
                        with self._cv:
                            self._active.remove(req)

    def _begin(self, req: Request) -> None:
        seed = req.seed if req.seed is not None else torch.seed()
        req.generator = torch.Generator(device=self.device)
        req.generator.manual_seed(int(seed) & 0xFFFF_FFFF_FFFF_FFFF)
        reuse, kv = 0, None
        # Prompt log-probabilities need the logits of every prompt position, so such a request
        # computes its whole prompt (as vLLM does); others start after the longest cached prefix.
        if self.cfg.prefix_caching and req.prompt_logprobs is None:
            reuse, kv = self.prefix_cache.lookup(req.prompt_ids, max_reuse=len(req.prompt_ids) - 1)
        req.cache = mr.new_cache(kv)
        req.pos = reuse
        req.cached_tokens = reuse

    def _step(self, req: Request) -> None:
        if req.cache is None:
            self._begin(req)
        if req.pos < len(req.prompt_ids):
            self._prefill_chunk(req)
        else:
            self._decode(req)

    def _prefill_chunk(self, req: Request) -> None:
        chunk = req.prompt_ids[req.pos : req.pos + self.cfg.prefill_chunk]
        want_all = req.prompt_logprobs is not None
        logits = mr.forward(self.model, chunk, req.cache, len(chunk) if want_all else 1, self.device)
        if want_all:
            self._collect_prompt_logprobs(req, req.pos, logits)
        req.pos += len(chunk)
        if req.pos < len(req.prompt_ids):
            return
        if self.cfg.prefix_caching:
            self.prefix_cache.insert(req.prompt_ids, mr.cache_kv(req.cache, len(req.prompt_ids)))
        tok = sample(target_probs(self._no_early_eos(req, logits[-1:])[-1], req.params), req.generator)
        self._emit(req, [tok])

    def _collect_prompt_logprobs(self, req: Request, start: int, logits: torch.Tensor) -> None:
        """Rows for prompt tokens start+1 .. start+len: the logits at position i score token i+1.
        Raw model log-probabilities (no temperature), as vLLM returns them; one transfer per chunk."""
        ids = req.prompt_ids
        rows = min(logits.shape[0], len(ids) - 1 - start)
        if rows <= 0:
            return
        lp = torch.log_softmax(logits[:rows].float(), dim=-1)
        nxt = torch.tensor(ids[start + 1 : start + 1 + rows], device=lp.device)
        vals = lp.gather(1, nxt[:, None])[:, 0]
        ranks = (lp > vals[:, None]).sum(dim=-1) + 1
        top = req.prompt_logprobs or 0
        top_vals, top_idx = torch.topk(lp, top, dim=-1) if top > 0 else (None, None)
        vals, ranks, nxt = vals.tolist(), ranks.tolist(), nxt.tolist()
        top_vals = top_vals.tolist() if top else None
        top_idx = top_idx.tolist() if top else None
        for j in range(rows):
            entry = {nxt[j]: (vals[j], ranks[j])}
            if top:
                for r, (v, i) in enumerate(zip(top_vals[j], top_idx[j]), start=1):
                    entry.setdefault(int(i), (float(v), r))
            req.prompt_logprob_rows.append(entry)

    def _budget_left(self, req: Request) -> int:
        window_left = self.cfg.max_model_len - len(req.prompt_ids) - len(req.generated)
        return max(0, min(req.max_tokens - len(req.generated), window_left))

    def _decode(self, req: Request) -> None:
        if self.cfg.step_sleep_ms:  # DEV_ENGINE_STEP_SLEEP_MS: slower, every token still the target's
            time.sleep(self.cfg.step_sleep_ms / 1000.0)
        left = self._budget_left(req)
        k = min(self.cfg.spec_k, left - 1) if self.cfg.spec != "none" else 0
        drafts, q_rows = ([], None) if k <= 0 else self._propose(req, k)
        base = mr.cache_len(req.cache)
        if not drafts:
            logits = self._no_early_eos(req, mr.forward(self.model, [req.last], req.cache, 1, self.device))
            self._emit(req, [sample(target_probs(logits[-1], req.params), req.generator)])
            return
        logits = mr.forward(self.model, [req.last] + drafts, req.cache, len(drafts) + 1, self.device)
        logits = self._no_early_eos(req, logits)
        p_rows = target_probs(logits, req.params)
        loose = self.cfg.loose_threshold if self.cfg.attack == "loose_accept" else None
        n, nxt = verify(p_rows, q_rows, drafts, req.generator, loose, self.cfg.synthetic_rate)
        mr.crop_cache(req.cache, base + 1 + n)
        self.metrics.spec_round(len(drafts), n)
        self._emit(req, drafts[:n] + [nxt])

    def _no_early_eos(self, req: Request, logits: torch.Tensor) -> torch.Tensor:
        """`min_tokens`: row i of `logits` picks generated token len(generated) + i; before
        min_tokens, EOS gets probability 0 (as vLLM's min-tokens logits processor does)."""
        early = req.min_tokens - len(req.generated)
        if early <= 0 or not self.eos_ids:
            return logits
        logits = logits.clone()
        logits[: min(early, logits.shape[0]), sorted(self.eos_ids)] = float("-inf")
        return logits

    def _propose(self, req: Request, k: int) -> tuple[list[int], torch.Tensor | None]:
        vocab = self.model.config.vocab_size
        if self.cfg.spec in ("ngram", "suffix"):
            context = req.prompt_ids + req.generated
            if self.suffix is not None:
                drafts = self.suffix.propose(req.rid, context, k)
            else:
                drafts = ngram_lookup(context, k, self.cfg.ngram_max, self.cfg.ngram_min)
            if not drafts:
                return [], None
            q = torch.stack([point_mass(t, vocab, self.device) for t in drafts])
            return drafts, q
        # self-draft: the target's first layers, starting from a copy of the target's KV for them
        n_layers = self.cfg.draft_layers
        dcache = mr.new_cache(mr.cache_kv(req.cache, layers=n_layers))
        tok, drafts, qs = req.last, [], []
        for _ in range(k):
            logits = mr.forward(self.draft_model, [tok], dcache, 1, self.device)
            if self.cfg.draft_greedy:  # a point-mass draft: the rule stays exact with q = one-hot
                tok = int(logits[-1].argmax())
                q = point_mass(tok, logits.shape[-1], self.device)
            else:
                q = target_probs(logits[-1], req.params)
                tok = sample(q, req.generator)
            drafts.append(tok)
            qs.append(q)
            if tok in self.eos_ids:
                break
        return drafts, torch.stack(qs)

    def _emit(self, req: Request, tokens: list[int]) -> None:
        out = []
        for t in tokens:
            if self._budget_left(req) <= 0:
                break
            req.generated.append(t)
            out.append(t)
            if t in self.eos_ids and not req.ignore_eos:
                req.finish_reason = "stop"
                break
        req.last = req.generated[-1] if req.generated else None
        if not req.done and self._budget_left(req) <= 0:
            req.finish_reason = "length"
        if out:
            req.out.put(("tokens", out))

    def _finish(self, req: Request) -> None:
        n_ctx = len(req.prompt_ids) + max(0, len(req.generated) - 1)
        if req.cache is not None and self.cfg.prefix_caching and req.finish_reason in ("stop", "length"):
            if mr.cache_len(req.cache) >= n_ctx:
                seq = req.prompt_ids + req.generated[:-1]
                self.prefix_cache.insert(seq, mr.cache_kv(req.cache, n_ctx))
        req.cache = None
        if self.suffix is not None:  # its output joins the store only when the target really produced it
            self.suffix.finish(req.rid, req.generated if req.error is None else None)
        self.metrics.request_done(len(req.prompt_ids), req.cached_tokens, len(req.generated), req.finish_reason)
        req.out.put(("done", req.finish_reason))
