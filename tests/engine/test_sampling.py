"""The acceptance rule, enumerated exactly: speculative output distribution == target distribution."""

from __future__ import annotations

import itertools

import pytest
import torch

from speculator_arena.engine.drafters import ngram_lookup
from speculator_arena.engine.sampling import (
    SamplingParams,
    acceptance_probability,
    point_mass,
    residual_distribution,
    step_distribution,
    target_probs,
    verify,
)

V = 5


def dist(*values) -> torch.Tensor:
    t = torch.tensor(values, dtype=torch.float64)
    return t / t.sum()


HAND_MADE = [
    (dist(0.5, 0.2, 0.15, 0.1, 0.05), dist(0.1, 0.6, 0.1, 0.1, 0.1)),  # draft overconfident on 1
    (dist(0.3, 0.3, 0.2, 0.1, 0.1), dist(0.3, 0.3, 0.2, 0.1, 0.1)),  # draft exact
    (dist(0.0, 0.0, 1.0, 0.0, 0.0), dist(0.25, 0.25, 0.25, 0.25, 0.0)),  # greedy target, broad draft
    (dist(0.05, 0.05, 0.05, 0.05, 0.8), dist(0.7, 0.1, 0.1, 0.05, 0.05)),  # disjoint modes
    (dist(0.4, 0.0, 0.6, 0.0, 0.0), dist(0.0, 0.5, 0.0, 0.5, 0.0)),  # disjoint supports
]


@pytest.mark.parametrize("p,q", HAND_MADE)
def test_one_step_distribution_equals_target(p, q):
    out = step_distribution(p, q)
    assert torch.allclose(out, p, atol=1e-12), (out, p)


@pytest.mark.parametrize("p", [h[0] for h in HAND_MADE])
@pytest.mark.parametrize("x", range(V))
def test_point_mass_draft_is_lossless(p, x):
    # an n-gram draft is a point mass: accepted with p(x), else resampled from p without x
    q = point_mass(x, V).double()
    assert acceptance_probability(p, q, x) == pytest.approx(float(p[x]))
    assert torch.allclose(step_distribution(p, q), p, atol=1e-12)


def _chain_distribution(p_of, q_of, k, loose=None):
    """Exact distribution of the first k+1 emitted tokens of one verification round with k sampled
    drafts, for target/draft distributions that depend on the prefix (`p_of(prefix)`)."""
    out: dict[tuple, float] = {}

    def add(seq, w):
        out[seq] = out.get(seq, 0.0) + w

    def walk(prefix, w):
        # prefix: accepted drafts so far; len(prefix) < k: draw the next draft from q
        i = len(prefix)
        if i == k:
            for y in range(V):
                add(prefix + (y,), w * float(p_of(prefix)[y]))
            return
        p, q = p_of(prefix), q_of(prefix)
        r = residual_distribution(p, q)
        for x in range(V):
            if q[x] == 0:
                continue
            a = acceptance_probability(p, q, x, loose)
            if a > 0:
                walk(prefix + (x,), w * float(q[x]) * a)
            for y in range(V):
                if r[y] > 0 and a < 1:
                    add(prefix + (y,), w * float(q[x]) * (1 - a) * float(r[y]))

    walk((), 1.0)
    return out


def _target_sequence_probability(p_of, seq):
    prob = 1.0
    for i, t in enumerate(seq):
        prob *= float(p_of(tuple(seq[:i]))[t])
    return prob


def _contexts(seed):
    g = torch.Generator().manual_seed(seed)
    table_p, table_q = {}, {}

    def p_of(prefix):
        if prefix not in table_p:
            table_p[prefix] = dist(*torch.distributions.Dirichlet(torch.full((V,), 0.7)).sample().tolist())
        return table_p[prefix]

    def q_of(prefix):
        if prefix not in table_q:
            table_q[prefix] = dist(*torch.distributions.Dirichlet(torch.full((V,), 0.7)).sample().tolist())
        return table_q[prefix]

    torch.manual_seed(int(torch.randint(0, 10_000, (1,), generator=g)))
    return p_of, q_of


@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("seed", [0, 1])
def test_multi_token_round_matches_target_prefix_probabilities(k, seed):
    """A round emits a variable number of tokens; the probability of every emitted prefix must be
    the target's probability of that sequence (summing over longer emissions that extend it)."""
    p_of, q_of = _contexts(seed)
    out = _chain_distribution(p_of, q_of, k)
    assert sum(out.values()) == pytest.approx(1.0, abs=1e-12)
    # marginal of the first m tokens, for every m that every emission reaches (m = 1)
    # and, conditioned on reaching length m, the next token, for all emitted sequences
    for m in range(1, k + 2):
        marg: dict[tuple, float] = {}
        reached = 0.0
        for seq, w in out.items():
            if len(seq) >= m:
                marg[seq[:m]] = marg.get(seq[:m], 0.0) + w
                reached += w
        if m == 1:
            for y in range(V):
                assert marg.get((y,), 0.0) == pytest.approx(float(p_of(())[y]), abs=1e-12)
        for prefix_seq, w in marg.items():
            # P(emit prefix_seq[:m]) / P(emit prefix_seq[:m-1] and go on) == p(last | before)
            before = prefix_seq[:-1]
            w_before = sum(v for s, v in marg.items() if s[:-1] == before)
            assert w / w_before == pytest.approx(float(p_of(before)[prefix_seq[-1]]), abs=1e-9)


def test_loose_acceptance_changes_the_distribution():
    p, q = HAND_MADE[0]
    loose = step_distribution(p, q, loose_threshold=0.3)
    assert torch.allclose(loose.sum(), torch.tensor(1.0, dtype=torch.float64))
    # the draft's favourite (token 1: p=0.2, q=0.6, ratio 1/3 >= 0.3) is now always accepted
    assert float(loose[1]) > float(p[1]) + 0.1
    assert not torch.allclose(loose, p, atol=1e-3)


def test_synthetic_acceptance_ignores_the_target():
    """vLLM's `rejection_sample_method: synthetic` (the development engine's equivalent): each draft
    is accepted with the set probability whatever p says, so the emitted token follows q*rate, not p."""
    p, q = HAND_MADE[0]
    out = step_distribution(p, q, synthetic_rate=0.9)
    assert torch.allclose(out.sum(), torch.tensor(1.0, dtype=torch.float64))
    assert not torch.allclose(out, p.double(), atol=1e-3)
    # the draft's own distribution shows through: P(y) >= 0.9 q(y) for every token
    assert bool((out >= 0.9 * q.double() - 1e-12).all())
    assert step_distribution(p, q, synthetic_rate=0.0).allclose(residual_distribution(p, q).double())
    # a draft the target gives probability 0 is still accepted at rate 1
    p_rows = torch.stack([point_mass(3, V), point_mass(4, V)])
    assert verify(p_rows, point_mass(1, V)[None], [1], torch.Generator().manual_seed(0), synthetic_rate=1.0) == (1, 4)
    assert verify(p_rows, point_mass(1, V)[None], [1], torch.Generator().manual_seed(0)) == (0, 3)


def test_verify_uses_the_rule_and_the_generator():
    p_rows = torch.stack([point_mass(2, V), point_mass(3, V), point_mass(4, V)])
    q_rows = torch.stack([point_mass(2, V), point_mass(1, V)])
    g = torch.Generator().manual_seed(0)
    # greedy target: the first draft (2) is the argmax and is accepted, the second (1) is not
    assert verify(p_rows, q_rows, [2, 1], g) == (1, 3)
    assert verify(p_rows, q_rows[:1], [2], g) == (1, 3)  # all accepted: bonus from the next row
    with pytest.raises(ValueError, match="q\\(x\\)=0"):
        verify(p_rows, q_rows, [0, 1], g)


def test_verify_empirical_frequency_matches_enumeration():
    p, q = HAND_MADE[0]
    g = torch.Generator().manual_seed(1)
    counts = torch.zeros(V)
    n = 20000
    for _ in range(n):
        x = int(torch.multinomial(q.float(), 1, generator=g))
        acc, nxt = verify(torch.stack([p.float(), p.float()]), q.float()[None], [x], g)
        counts[x if acc == 1 else nxt] += 1
    assert torch.allclose(counts / n, p.float(), atol=0.015)


def test_target_probs_temperature_topk_topp_and_greedy():
    logits = torch.tensor([2.0, 1.0, 0.5, 0.0, -1.0])
    greedy = target_probs(logits, SamplingParams(temperature=0))
    assert greedy.tolist() == [1.0, 0.0, 0.0, 0.0, 0.0]
    full = target_probs(logits, SamplingParams(temperature=1.0))
    assert torch.allclose(full, torch.softmax(logits, -1))
    k2 = target_probs(logits, SamplingParams(temperature=1.0, top_k=2))
    assert (k2[2:] == 0).all() and torch.allclose(k2[:2], torch.softmax(logits[:2], -1))
    # top_p: the smallest set whose mass reaches top_p
    p_sorted = torch.softmax(logits, -1)
    top_p = float(p_sorted[0] + p_sorted[1]) - 1e-4
    tp = target_probs(logits, SamplingParams(temperature=1.0, top_p=top_p))
    assert (tp > 0).sum() == 2
    hot = target_probs(logits, SamplingParams(temperature=0.5))
    assert torch.allclose(hot, torch.softmax(logits / 0.5, -1))


@pytest.mark.parametrize(
    "context,k,expected",
    [
        ([1, 2, 3, 4, 1, 2, 3], 2, [4, 1]),  # longest suffix 1 2 3 seen at 0 -> 4, 1
        ([5, 6, 7, 5, 6], 3, [7, 5, 6]),
        ([1, 2, 3], 4, []),  # nothing repeats
        ([9, 9, 9], 2, [9]),  # 9 9 seen at 0 -> the only follower before the end
        ([1, 2, 8, 1, 2, 9, 1, 2], 2, [9, 1]),  # latest earlier occurrence wins
    ],
)
def test_ngram_lookup(context, k, expected):
    assert ngram_lookup(context, k, n_max=3, n_min=2) == expected


def test_enumeration_helper_is_exact_on_a_known_case():
    # sanity of the test's own enumerator: with q == p, every round's sequence probability is p's
    p_of, _ = _contexts(3)
    out = _chain_distribution(p_of, p_of, 2)
    for seq, w in out.items():
        if len(seq) == 3:
            assert w == pytest.approx(_target_sequence_probability(p_of, seq), abs=1e-12)
    assert list(itertools.islice(out, 1))
