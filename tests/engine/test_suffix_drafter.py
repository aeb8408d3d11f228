"""Suffix decoding's drafter (engine/suffix_drafter.py): what it proposes, checked against a
brute-force search, and where its drafts may come from (the request's own context or an output
this same drafter stored, never anything else; a new drafter starts empty)."""

from __future__ import annotations

import random

import pytest

from speculator_arena.engine.config import ConfigError, EngineConfig
from speculator_arena.engine.suffix_drafter import SuffixDrafter


def reference(ctx, outputs, k, max_match=64, min_prob=0.1, alpha=1.0):
    """The drafter's rule by brute force over plain lists: the longest suffix (<= max_match) of ctx
    that ends earlier with a next token, in ctx itself or in the stored outputs (the outputs only
    when strictly longer, or when ctx gives no draft), then the most frequent next token each step
    (ties: the latest occurrence), while the product of shares stays >= min_prob, for at most
    min(k, alpha * match length) tokens."""
    if len(ctx) < 2 or k <= 0:
        return []
    tail = ctx[-max_match:]

    def longest(seqs):
        for m in range(min(max_match, len(tail)), 0, -1):
            pat = tail[-m:]
            occ = [(i, e) for i, s in enumerate(seqs) for e in range(m - 1, len(s) - 1) if s[e - m + 1 : e + 1] == pat]
            if occ:
                return m, occ
        return 0, []

    def follow(seqs, occ, budget):
        draft, prob, pos = [], 1.0, [(i, e + 1) for i, e in occ]
        while len(draft) < budget:
            pos = [(i, p) for i, p in pos if p < len(seqs[i])]
            if not pos:
                break
            counts = {}
            for i, p in pos:
                counts[seqs[i][p]] = counts.get(seqs[i][p], 0) + 1
            top = max(counts.values())
            tok = max((ip for ip in pos if counts[seqs[ip[0]][ip[1]]] == top), key=lambda ip: ip)
            tok = seqs[tok[0]][tok[1]]
            prob *= top / len(pos)
            if prob < min_prob:
                break
            draft.append(tok)
            pos = [(i, p + 1) for i, p in pos if seqs[i][p] == tok]
        return draft

    m_local, occ_local = longest([ctx])
    m_store, occ_store = longest(outputs)
    order = [(m_local, [ctx], occ_local), (m_store, outputs, occ_store)]
    if m_store > m_local:
        order.reverse()
    for m, seqs, occ in order:
        if m:
            draft = follow(seqs, occ, min(k, int(alpha * m + 1e-6)))
            if draft:
                return draft
    return []


def occurs_after(seq, head, draft):
    """Whether head + draft occurs contiguously in seq."""
    want = list(head) + list(draft)
    return any(seq[i : i + len(want)] == want for i in range(len(seq) - len(want) + 1))


def test_the_longest_match_beats_a_shorter_more_recent_one():
    # "12 13" was last followed by 60, but the longer suffix "10 11 12 13" was followed by 50
    ctx = [10, 11, 12, 13, 50, 51, 52, 53, 1, 12, 13, 60, 2, 10, 11, 12, 13]
    assert SuffixDrafter().propose("r", ctx, 8)[0] == 50
    assert reference(ctx, [], 8)[0] == 50
    # n-gram lookup with n <= 2 would take the latest "12 13": the length is what decides here
    assert SuffixDrafter(max_match=2).propose("r", ctx, 8)[0] == 60


def test_frequency_picks_the_more_common_continuation():
    # "1 2" is followed by 7 twice and by 8 once (the latest): the count wins, not recency
    ctx = [1, 2, 7, 1, 2, 7, 1, 2, 8, 1, 2]
    assert SuffixDrafter().propose("r", ctx, 8) == [7, 1]
    # a tie goes to the latest occurrence
    assert SuffixDrafter().propose("r", [1, 2, 7, 1, 2, 8, 1, 2], 1) == [8]


def test_min_prob_stops_the_draft():
    # after "1 2": 7 (2 of 3 occurrences), then after "1 2 7": 3 or 4 (1 of 2 each; 4 the latest),
    # so the running probability is 2/3, then 1/3, then stays 1/3 along the one occurrence left
    ctx = [1, 2, 7, 3, 5, 1, 2, 7, 4, 6, 1, 2, 8, 9, 1, 2]
    assert SuffixDrafter(alpha=10, min_prob=0.3).propose("r", ctx, 8) == [7, 4, 6, 1, 2, 8, 9, 1]
    # the second step's own share (1/2) passes 0.4, the cumulative product (1/3) does not
    assert SuffixDrafter(alpha=10, min_prob=0.4).propose("r", ctx, 8) == [7]
    assert SuffixDrafter(alpha=10, min_prob=0.7).propose("r", ctx, 8) == []
    assert SuffixDrafter(alpha=10, min_prob=0.4).propose("r", ctx, 8) == reference(ctx, [], 8, 64, 0.4, 10)


def test_the_budget_grows_with_the_match_length():
    body = list(range(100, 120))
    # match of 2 ("118 119" is not repeated; "100 101" is): at most alpha * 2 tokens
    assert SuffixDrafter().propose("a", body + [100, 101], 16) == [102, 103]
    assert SuffixDrafter().propose("b", body + [100, 101, 102, 103, 104], 16) == [105, 106, 107, 108, 109]
    assert SuffixDrafter(alpha=0.5).propose("c", body + [100, 101, 102, 103], 16) == [104, 105]
    assert SuffixDrafter(alpha=3.0).propose("d", body + [100, 101], 16) == [102, 103, 104, 105, 106, 107]
    # and never past k
    assert SuffixDrafter().propose("e", body + body[:10], 4) == [110, 111, 112, 113]


def test_the_index_grows_with_the_request_and_is_dropped_at_its_end():
    d = SuffixDrafter()
    ctx = [5, 6, 7, 8, 9]
    assert d.propose("r", ctx, 4) == []
    for t in [5, 6, 7]:  # tokens generated one round at a time: only the new ones are indexed
        ctx.append(t)
        assert d.propose("r", ctx, 4) == reference(ctx, [], 4)
    assert d.propose("r", ctx, 4) == [8, 9, 5]
    assert d.active_requests == 1
    d.finish("r", [5, 6, 7])
    assert d.active_requests == 0 and d.stored_outputs == [[5, 6, 7]]


def test_the_cross_request_store():
    d = SuffixDrafter()
    d.finish("old", [40, 41, 42, 43, 44, 45])
    # nothing in the request's own context matches: the earlier output proposes
    assert d.propose("new", [1, 2, 40, 41, 42], 8) == [43, 44, 45]
    # the own context's match wins a tie of lengths ...
    assert d.propose("tie", [41, 42, 99, 0, 41, 42], 8) == [99, 0]
    # ... and the store only a strictly longer match
    assert d.propose("longer", [41, 42, 99, 0, 40, 41, 42], 8) == [43, 44, 45]
    # bounded: least recently used outputs leave first
    small = SuffixDrafter(max_stored=2)
    for i, out in enumerate([[10, 11, 12, 13], [20, 21, 22, 23], [30, 31, 32, 33]]):
        small.finish(i, out)
    assert small.stored_outputs == [[20, 21, 22, 23], [30, 31, 32, 33]]
    assert small.propose("q1", [7, 10, 11], 8) == []  # evicted: never proposed again
    assert small.propose("q2", [7, 20, 21], 8) == [22, 23]  # supplying a draft is a use ...
    small.finish("q3", [50, 51, 52])
    assert small.stored_outputs == [[20, 21, 22, 23], [50, 51, 52]]  # ... so 30.. left, not 20..
    assert small.propose("q4", [7, 30, 31], 8) == []
    assert SuffixDrafter(max_stored=0).propose("x", [1, 2], 8) == []


def test_drafts_never_cross_a_split():
    """What a drafter learned from one evaluation's outputs never drafts for another: the runner
    starts a fresh engine process (one drafter) for each start of an evaluation, and an evaluation
    serves one split, so the dev split's replies (stored in one process) cannot reach a test-split
    request (served by another), nor a later evaluation's."""
    d = SuffixDrafter()
    d.finish("a", [40, 41, 42, 43])
    d.propose("b", [1, 2, 3], 4)
    assert d.propose("c", [9, 40, 41], 4) == [42, 43]
    fresh = SuffixDrafter()
    assert fresh.stored_outputs == [] and fresh.active_requests == 0
    assert fresh.propose("c", [9, 40, 41], 4) == []


def test_eviction_and_compaction_keep_only_stored_outputs():
    """Many outputs through a small store (enough to compact it several times): every draft is
    still the reference's over exactly the outputs the store holds."""
    rng = random.Random(7)
    d = SuffixDrafter(max_stored=5)
    d.compact_min_tokens = 50  # compact often (the default waits for 4096 dead tokens)
    for i in range(400):
        out = [rng.randrange(6) for _ in range(rng.randrange(1, 40))]
        d.finish(i, out)
        held = d.stored_outputs
        assert len(held) == min(i + 1, 5) and held[-1] == out
        # evicted outputs do not pile up: dead tokens are compacted away
        assert d._store.size <= 2 * sum(len(h) + 1 for h in held) + 50 + 1
        ctx = [rng.randrange(6) for _ in range(rng.randrange(2, 12))]
        draft = d.propose(("q", i), ctx, 8)
        d.finish(("q", i))
        assert any(occurs_after(s, ctx[-1:], draft) for s in [ctx, *held]) or not draft


@pytest.mark.parametrize("seed", range(6))
def test_drafts_match_a_brute_force_search_and_never_come_from_elsewhere(seed):
    """Random sessions over a small vocabulary (so matches of every length abound): each draft is
    the brute-force reference's, and occurs right after the matched suffix in the request's own
    context or in an output this drafter stored."""
    rng = random.Random(seed)
    max_match, min_prob, alpha = rng.choice([3, 8, 64]), rng.choice([0.0, 0.1, 0.4]), rng.choice([0.5, 1.0, 2.0])
    d = SuffixDrafter(max_match=max_match, min_prob=min_prob, alpha=alpha)
    stored: list[list[int]] = []
    proposed = 0
    for r in range(12):
        vocab = rng.choice([2, 3, 5, 8])
        ctx = [rng.randrange(vocab) for _ in range(rng.randrange(1, 60))]
        prompt_len = len(ctx)
        for _ in range(rng.randrange(1, 40)):
            k = rng.randrange(1, 9)
            draft = d.propose(r, ctx, k)
            assert draft == reference(ctx, stored, k, max_match, min_prob, alpha)
            assert len(draft) <= k
            if draft:
                proposed += 1
                assert any(occurs_after(s, ctx[-1:], draft) for s in [ctx, *stored])
            # the "target" accepts a prefix of the draft and adds one token of its own
            ctx += draft[: rng.randrange(len(draft) + 1)] + [rng.randrange(vocab)]
        d.finish(r, ctx[prompt_len:])
        stored.append(ctx[prompt_len:])
        assert sorted(d.stored_outputs) == sorted(stored)  # (in least recently used order)
    assert proposed > 20


def test_config_reads_the_suffix_settings(tmp_path):
    env = {"TARGET": str(tmp_path), "PORT": "1", "MAX_MODEL_LEN": "2048", "DEV_ENGINE_SPEC": "suffix"}
    cfg = EngineConfig.from_env(env)
    assert (cfg.spec, cfg.suffix_max_match, cfg.suffix_min_prob, cfg.suffix_alpha) == ("suffix", 64, 0.1, 1.0)
    cfg = EngineConfig.from_env(
        {
            **env,
            "DEV_ENGINE_SUFFIX_MAX_MATCH": "16",
            "DEV_ENGINE_SUFFIX_MIN_PROB": "0.25",
            "DEV_ENGINE_SUFFIX_ALPHA": "2",
        }
    )
    assert (cfg.suffix_max_match, cfg.suffix_min_prob, cfg.suffix_alpha) == (16, 0.25, 2.0)
    for bad, why in (
        ({"DEV_ENGINE_SUFFIX_MAX_MATCH": "0"}, "at least 1"),
        ({"DEV_ENGINE_SUFFIX_MAX_MATCH": "x"}, "integer"),
        ({"DEV_ENGINE_SUFFIX_MIN_PROB": "1.5"}, "in \\[0, 1\\]"),
        ({"DEV_ENGINE_SUFFIX_ALPHA": "0"}, "positive"),
        ({"DEV_ENGINE_SUFFIX_ALPHA": "nan"}, "positive"),
    ):
        with pytest.raises(ConfigError, match=why):
            EngineConfig.from_env({**env, **bad})
