"""The target's exact distribution over short replies, for goodness-of-fit tests of engines.

Enumerates every reply of up to `length` tokens under top-k sampling (k small, so at most k^length
replies) with one batched forward pass per step of the real model, and aggregates by the reply's
text, which is what the engine returns. An engine that samples the target's distribution must
fit it; one that does not (loose acceptance, other parameters) must not.
"""

from __future__ import annotations

import collections

import numpy as np
import torch
from scipy.stats import chisquare

from speculator_arena.engine.sampling import SamplingParams, target_probs


@torch.inference_mode()
def exact_reply_distribution(
    model, tokenizer, prompt_ids, params: SamplingParams, length: int, eos_ids: set[int]
) -> dict[str, float]:
    out: dict[str, float] = collections.defaultdict(float)
    frontier: list[tuple[tuple[int, ...], float]] = [((), 1.0)]
    for _ in range(length):
        if not frontier:
            break
        batch = torch.tensor([list(prompt_ids) + list(seq) for seq, _ in frontier])
        probs = target_probs(model(batch).logits[:, -1, :], params).double()
        nxt = []
        for (seq, w), p in zip(frontier, probs):
            for t in torch.nonzero(p > 0).flatten().tolist():
                pt = w * float(p[t])
                if t in eos_ids:
                    out[tokenizer.decode(list(seq), skip_special_tokens=True)] += pt
                else:
                    nxt.append((seq + (t,), pt))
        frontier = nxt
    for seq, w in frontier:
        out[tokenizer.decode(list(seq), skip_special_tokens=True)] += w
    return dict(out)


def goodness_of_fit(samples: list[str], exact: dict[str, float], min_expected: float = 5.0) -> float:
    """Pearson chi-square p-value of `samples` against `exact`; categories expected fewer than
    `min_expected` times are pooled (with anything never expected) into one."""
    n = len(samples)
    counts = collections.Counter(samples)
    big = [k for k, p in exact.items() if p * n >= min_expected]
    obs = [counts[k] for k in big]
    exp = [exact[k] * n for k in big]
    rest_obs, rest_exp = n - sum(obs), n - sum(exp)
    if rest_exp > 1e-9 or rest_obs:
        obs.append(rest_obs)
        exp.append(max(rest_exp, 1e-9))
    return float(chisquare(np.array(obs, float), np.array(exp, float)).pvalue)
