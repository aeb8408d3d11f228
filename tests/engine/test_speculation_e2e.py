"""End to end: speculation serves the target's distribution (protocol section 6's property).

Greedy: speculative and stock replies are identical token for token on a fixed prompt set.
Sampling: each engine's short replies fit the target's exact distribution over replies
(enumerated with the real model, engine_exact.py), at fixed seeds so the test is deterministic.
"""

from __future__ import annotations

import pytest
from engine_exact import exact_reply_distribution, goodness_of_fit
from engine_testkit import chat, metrics, reply

from speculator_arena.engine.sampling import SamplingParams

pytestmark = pytest.mark.slow

PATTERN = [
    {"role": "user", "content": "Continue the list."},
    {"role": "assistant", "content": "red, green, blue, yellow, red, green, blue, yellow, red,"},
]
OPEN = {"add_generation_prompt": False, "continue_final_message": True}
GREEDY_PROMPTS = [
    ([{"role": "user", "content": "Write a Python function that reverses a string, then explain it."}], {}),
    ([{"role": "user", "content": "Repeat this sentence twice: the quick brown fox jumps over the lazy dog."}], {}),
    ([{"role": "user", "content": "List the planets of the solar system, one per line."}], {}),
    (PATTERN, OPEN),
]
SAMPLING = SamplingParams(temperature=1.0, top_p=1.0, top_k=3)
SAMPLE_TOKENS = 3
N_SAMPLES = 60
FIT_P = 1e-3


@pytest.fixture(scope="module")
def ngram_engine(start_engine):
    eng = start_engine("dev-ngram")
    yield eng
    eng.stop()


@pytest.fixture(scope="module")
def selfdraft_engine(start_engine):
    eng = start_engine("dev-self-draft")
    yield eng
    eng.stop()


@pytest.fixture(scope="module")
def suffix_engine(start_engine):
    eng = start_engine("dev-suffix")
    yield eng
    eng.stop()


@pytest.fixture(scope="module")
def exact_pattern(target_model):
    model, tok = target_model
    text = tok.apply_chat_template(PATTERN, continue_final_message=True, tokenize=False)
    ids = tok.encode(text, add_special_tokens=False)
    return exact_reply_distribution(model, tok, ids, SAMPLING, SAMPLE_TOKENS, {tok.eos_token_id})


def sample_replies(engine, n=N_SAMPLES):
    return [
        reply(
            engine,
            PATTERN,
            max_tokens=SAMPLE_TOKENS,
            temperature=SAMPLING.temperature,
            top_k=SAMPLING.top_k,
            seed=s,
            **OPEN,
        )
        for s in range(n)
    ]


def greedy_replies(engine):
    return [reply(engine, msgs, max_tokens=32, temperature=0, **extra) for msgs, extra in GREEDY_PROMPTS]


@pytest.fixture(scope="module")
def stock_greedy(stock_engine):
    return greedy_replies(stock_engine)


@pytest.mark.parametrize("which", ["ngram_engine", "selfdraft_engine", "suffix_engine"])
def test_greedy_replies_identical_to_stock(request, which, stock_greedy):
    engine = request.getfixturevalue(which)
    before = metrics(engine)
    assert greedy_replies(engine) == stock_greedy
    after = metrics(engine)
    drafts = after["vllm:spec_decode_num_drafts_total"] - before["vllm:spec_decode_num_drafts_total"]
    drafted = after["vllm:spec_decode_num_draft_tokens_total"] - before["vllm:spec_decode_num_draft_tokens_total"]
    accepted = (
        after["vllm:spec_decode_num_accepted_tokens_total"] - before["vllm:spec_decode_num_accepted_tokens_total"]
    )
    # the counters move with real speculation, and acceptance is bounded by what was drafted
    assert drafts > 0 and 0 < accepted <= drafted
    per_pos = sum(
        v - before.get(k, 0.0)
        for k, v in after.items()
        if k.startswith("vllm:spec_decode_num_accepted_tokens_per_pos_total[")
    )
    assert per_pos == accepted


def test_counters_track_real_acceptance_on_repetitive_text(ngram_engine, stock_engine):
    """On a continuation of a repeating list, n-gram drafts are mostly accepted; the counter
    difference equals the tokens the verification really accepted (replies are identical to stock)."""
    before = metrics(ngram_engine)
    r = chat(ngram_engine, PATTERN, max_tokens=24, temperature=0, **OPEN)
    after = metrics(ngram_engine)
    accepted = (
        after["vllm:spec_decode_num_accepted_tokens_total"] - before["vllm:spec_decode_num_accepted_tokens_total"]
    )
    drafts = after["vllm:spec_decode_num_drafts_total"] - before["vllm:spec_decode_num_drafts_total"]
    drafted = after["vllm:spec_decode_num_draft_tokens_total"] - before["vllm:spec_decode_num_draft_tokens_total"]
    generated = r["usage"]["completion_tokens"]
    # the prefill emits the first token; each round emits its accepted drafts plus one more
    assert 0 < accepted <= drafted and accepted + drafts <= generated - 1
    assert accepted / generated > 0.5
    assert r["choices"][0]["message"]["content"] == reply(stock_engine, PATTERN, max_tokens=24, temperature=0, **OPEN)


def test_stock_engine_fits_the_target_distribution(stock_engine, exact_pattern):
    assert goodness_of_fit(sample_replies(stock_engine), exact_pattern) > FIT_P


@pytest.mark.parametrize("which", ["ngram_engine", "selfdraft_engine", "suffix_engine"])
def test_speculative_sampling_fits_the_target_distribution(request, which, exact_pattern):
    engine = request.getfixturevalue(which)
    before = metrics(engine)
    samples = sample_replies(engine)
    after = metrics(engine)
    assert after["vllm:spec_decode_num_drafts_total"] > before["vllm:spec_decode_num_drafts_total"]
    assert goodness_of_fit(samples, exact_pattern) > FIT_P


def test_chunked_prefill_changes_nothing(start_engine, stock_engine):
    """A prompt prefilled in chunks of 7 tokens gives the same prompt log-probabilities and greedy
    reply as one prefilled whole (chunks are what lets long prompts share the worker with others)."""
    msgs = [
        {"role": "user", "content": "Explain in one paragraph why the sky is blue."},
        {"role": "assistant", "content": "Sunlight is scattered by the molecules of the air."},
    ]
    chunked = start_engine("dev-stock", env={"DEV_ENGINE_PREFILL_CHUNK": "7"})
    try:
        from engine_testkit import prompt_logprobs

        a, b = prompt_logprobs(stock_engine, msgs), prompt_logprobs(chunked, msgs)
        gaps = [
            abs(next(iter(x.values()))["logprob"] - y[next(iter(x))]["logprob"])
            for x, y in zip(a["prompt_logprobs"][1:], b["prompt_logprobs"][1:])
        ]
        assert len(gaps) > 20 and max(gaps) < 1e-4
        assert reply(chunked, msgs[:1], max_tokens=24, temperature=0) == reply(
            stock_engine, msgs[:1], max_tokens=24, temperature=0
        )
    finally:
        chunked.stop()


def test_prefix_cache_is_bounded_and_evicts_least_recently_used(start_engine):
    """With a 260-token budget, a conversation's prefix is reused while it is recent, and evicted
    once three other long prompts have been cached after it: cached_tokens reports exactly that."""
    eng = start_engine("dev-stock", env={"DEV_ENGINE_CACHE_TOKENS": "260"})
    try:
        a = [{"role": "user", "content": "Tell me about owls."}]
        first = chat(eng, a, max_tokens=4, temperature=0)
        again = chat(eng, a, max_tokens=4, temperature=0)
        assert again["usage"]["prompt_tokens_details"]["cached_tokens"] == first["usage"]["prompt_tokens"] - 1
        for topic in ("volcanoes", "glaciers", "deserts"):
            long = f"Write about {topic}. " + " ".join(f"{topic} fact {i}." for i in range(18))
            chat(eng, [{"role": "user", "content": long}], max_tokens=4, temperature=0)
        evicted = chat(eng, a, max_tokens=4, temperature=0)
        cached = evicted["usage"]["prompt_tokens_details"]["cached_tokens"]
        # only the shared system-prompt prefix can still be found (in the more recent entries)
        assert cached < first["usage"]["prompt_tokens"] - 3
        assert evicted["choices"][0]["message"]["content"] == first["choices"][0]["message"]["content"]
        assert metrics(eng)["vllm:kv_cache_usage_perc"] <= 1.0
    finally:
        eng.stop()
