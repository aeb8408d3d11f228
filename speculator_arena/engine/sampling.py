"""Sampling and the speculative acceptance rule, as pure functions.

Why pure functions: the lossless claim is a statement about probabilities, so the tests
enumerate the exact output distribution of one verification step for hand-made target and
draft distributions (see `step_distribution`) instead of sampling. The engine calls exactly
these functions, so what is tested is what is served.

The rule is standard speculative sampling (Leviathan et al. 2023; Chen et al. 2023): a draft
token x drawn from q is accepted with probability min(1, p(x)/q(x)); on rejection the token is
drawn from normalize(max(p - q, 0)); when every draft is accepted a bonus token is drawn from
the target's next distribution. Then the emitted token is distributed exactly as p. A point-mass
draft (n-gram lookup) is the special case q = one-hot(x). Greedy decoding is the special case
p = one-hot(argmax), which makes acceptance "draft == argmax".

Two lossy rules live here too, each switched on only by configuration, so that the arena's
planted attacks run the very code that serving runs: `loose_threshold` (an attack: accept when
p(x)/q(x) reaches a relaxed threshold) and `synthetic_rate`, the development engine's equivalent
of vLLM's `rejection_sample_method: synthetic` (accept each draft with a fixed probability,
whatever the target says: a benchmarking knob that simulates an acceptance rate, and against the
arena's rules because the replies are then no longer the target's; docs/participants/engine-contract.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0  # 0 or -1: no top-k (vLLM's -1 means the same)

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0.0


def target_probs(logits: torch.Tensor, params: SamplingParams) -> torch.Tensor:
    """Distribution(s) the engine samples from: temperature, then top-k, then top-p, in float32.

    `logits` is [..., V]. Greedy gives one-hot(argmax) (ties: the lowest id, as torch.argmax).
    """
    logits = logits.float()
    if params.greedy:
        out = torch.zeros_like(logits)
        out.scatter_(-1, logits.argmax(dim=-1, keepdim=True), 1.0)
        return out
    logits = logits / params.temperature
    vocab = logits.shape[-1]
    if params.top_k and 0 < params.top_k < vocab:
        kth = torch.topk(logits, params.top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    if params.top_p < 1.0:
        sorted_p, idx = torch.sort(probs, dim=-1, descending=True)
        before = torch.cumsum(sorted_p, dim=-1) - sorted_p  # mass strictly before each token
        drop_sorted = before >= params.top_p  # keep the smallest set reaching top_p
        drop = torch.zeros_like(drop_sorted).scatter(-1, idx, drop_sorted)
        probs = probs.masked_fill(drop, 0.0)
        probs = probs / probs.sum(dim=-1, keepdim=True)
    return probs


def sample(probs: torch.Tensor, generator: torch.Generator | None) -> int:
    return int(torch.multinomial(probs, 1, generator=generator).item())


def acceptance_probability(
    p: torch.Tensor, q: torch.Tensor, x: int, loose_threshold: float | None = None, synthetic_rate: float | None = None
) -> float:
    """P(accept draft x) given target p and draft q (1-D). `loose_threshold` is the attack:
    accept whenever p(x)/q(x) reaches a relaxed threshold, reject otherwise (deterministic).
    `synthetic_rate` is synthetic rejection sampling: accept with that probability, unverified."""
    px, qx = float(p[x]), float(q[x])
    if qx <= 0.0:
        raise ValueError(f"draft token {x} has q(x)=0: it could not have been drawn from q")
    if synthetic_rate is not None:
        return synthetic_rate
    ratio = px / qx
    if loose_threshold is not None:
        return 1.0 if ratio >= loose_threshold else 0.0
    return min(1.0, ratio)


def residual_distribution(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """normalize(max(p - q, 0)); p itself when the residual is empty (p == q, where rejection has
    probability 0 and the value never matters, or rounding)."""
    dtype = torch.promote_types(torch.promote_types(p.dtype, q.dtype), torch.float32)
    p, q = p.to(dtype), q.to(dtype)
    r = torch.clamp(p - q, min=0.0)
    total = float(r.sum())
    if total <= 1e-12:
        return p / p.sum()
    return r / total


def verify(
    p_rows: torch.Tensor,
    q_rows: torch.Tensor,
    drafts: list[int],
    generator: torch.Generator | None,
    loose_threshold: float | None = None,
    synthetic_rate: float | None = None,
) -> tuple[int, int]:
    """One verification of k drafts. `p_rows` is [k+1, V] (target distributions after each prefix),
    `q_rows` is [k, V] (the distributions the drafts were drawn from). Returns (n_accepted, next_token):
    the engine emits drafts[:n_accepted] then next_token (a correction, or the bonus when n == k)."""
    k = len(drafts)
    for i, x in enumerate(drafts):
        a = acceptance_probability(p_rows[i], q_rows[i], x, loose_threshold, synthetic_rate)
        u = float(torch.rand((), generator=generator, device=p_rows.device)) if 0.0 < a < 1.0 else 0.0
        if a >= 1.0 or (a > 0.0 and u < a):
            continue
        return i, sample(residual_distribution(p_rows[i], q_rows[i]), generator)
    return k, sample(p_rows[k], generator)


def point_mass(token: int, vocab: int, device=None) -> torch.Tensor:
    q = torch.zeros(vocab, device=device)
    q[token] = 1.0
    return q


def step_distribution(
    p: torch.Tensor, q: torch.Tensor, loose_threshold: float | None = None, synthetic_rate: float | None = None
) -> torch.Tensor:
    """Exact distribution of the first emitted token of a verification whose one draft is drawn
    from q: sum over x of q(x) [a(x) 1{y=x} + (1 - a(x)) r(y)]. Enumerated, not sampled."""
    out = torch.zeros_like(p, dtype=torch.float64)
    r = residual_distribution(p, q).double()
    for x in torch.nonzero(q > 0).flatten().tolist():
        a = acceptance_probability(p, q, x, loose_threshold, synthetic_rate)
        out[x] += float(q[x]) * a
        out += float(q[x]) * (1.0 - a) * r
    return out
