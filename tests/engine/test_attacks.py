"""Each attack of protocol section 9 changes what it should, and only when it is asked for.

The attack engines live in engines/attacks/; each is started, measured against the stock
engine or the target itself, and stopped.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
from engine_testkit import chat, metrics, prompt_logprobs, reply
from scipy.stats import binomtest

pytestmark = pytest.mark.slow

COUNT = [
    {"role": "user", "content": "Continue the list."},
    {"role": "assistant", "content": "one two three four one two three four one"},
]
COUNT_NEXT = " two three"  # the first token comes from the prefill; the second is drafted and verified
OPEN = {"add_generation_prompt": False, "continue_final_message": True}
ESSAY = [{"role": "user", "content": "Write a long essay about the history of Rome."}]
SCORED = [
    {"role": "user", "content": "What is the capital of France?"},
    {"role": "assistant", "content": "The capital of France is Paris, a city on the Seine."},
]


@pytest.fixture(scope="module")
def honest_ngram(start_engine):
    eng = start_engine("dev-ngram")
    yield eng
    eng.stop()


@pytest.fixture
def attack(start_engine):
    engines = []

    def start(name):
        eng = start_engine(f"attacks/dev-{name}")
        engines.append(eng)
        return eng

    yield start
    for eng in engines:
        eng.stop()


@pytest.fixture(scope="module")
def count_probability(target_model):
    """Exact probabilities under the target (temperature 1) of the tokens of COUNT_NEXT."""
    import torch

    model, tok = target_model
    ids = tok.encode(
        tok.apply_chat_template(COUNT, continue_final_message=True, tokenize=False), add_special_tokens=False
    )
    cont = tok.encode(COUNT_NEXT, add_special_tokens=False)
    with torch.inference_mode():
        lp = torch.log_softmax(model(torch.tensor([ids + cont])).logits[0].float(), -1)
    return [math.exp(float(lp[len(ids) - 1 + i, t])) for i, t in enumerate(cont)]


def continuation_hits(engine, n_tokens, n=40):
    """Replies starting with COUNT_NEXT. One token more than COUNT_NEXT is asked so that its second
    token is drafted (a round drafts at most budget - 1 tokens, keeping room for the bonus token)."""
    from concurrent.futures import ThreadPoolExecutor

    def hit(s: int) -> bool:
        return reply(engine, COUNT, max_tokens=n_tokens + 1, temperature=1.0, seed=s, **OPEN).startswith(COUNT_NEXT)

    with ThreadPoolExecutor(3) as pool:  # the engines serve 3 sequences at once (start_engine)
        return sum(pool.map(hit, range(n)))


def test_loose_acceptance_moves_replies_toward_greedy(attack, honest_ngram, count_probability):
    """The second token of COUNT_NEXT is an n-gram draft with target probability p2 >= 0.3: the
    honest rule accepts it with probability p2, the loose rule always. So the share of replies
    starting with COUNT_NEXT is p1*p2 honestly and p1 under the attack, both known exactly."""
    p1, p2 = count_probability
    assert 0.3 <= p2 < 0.8 and 0.1 < p1 * p2 < 0.5
    n = 40
    honest_p, loose_p = p1 * p2, p1

    def log_lr(hits):  # log likelihood ratio: attack's prediction over the target's
        return hits * math.log(loose_p / honest_p) + (n - hits) * math.log((1 - loose_p) / (1 - honest_p))

    honest = continuation_hits(honest_ngram, 2, n)
    assert binomtest(honest, n, honest_p).pvalue > 0.01 and log_lr(honest) < 0, (honest, honest_p)
    loose = continuation_hits(attack("loose-accept"), 2, n)
    assert binomtest(loose, n, honest_p).pvalue < 0.01 and log_lr(loose) > 0, (loose, honest_p, loose_p)


def test_force_greedy_ignores_the_requested_sampling(attack, stock_engine):
    greedy = reply(stock_engine, ESSAY, max_tokens=10, temperature=0)
    stock_sampled = {reply(stock_engine, ESSAY, max_tokens=10, temperature=1.0, seed=s) for s in range(4)}
    assert len(stock_sampled) >= 2
    eng = attack("force-greedy")
    assert {reply(eng, ESSAY, max_tokens=10, temperature=1.0, seed=s) for s in range(4)} == {greedy}


def test_other_sampling_samples_what_was_not_asked(attack, stock_engine):
    assert len({reply(stock_engine, ESSAY, max_tokens=10, temperature=0, seed=s) for s in range(4)}) == 1
    eng = attack("other-sampling")
    assert len({reply(eng, ESSAY, max_tokens=10, temperature=0, seed=s) for s in range(4)}) >= 2


def _mean_abs_logprob_gap(a: dict, b: dict) -> float:
    gaps = []
    for ea, eb in zip(a["prompt_logprobs"][1:], b["prompt_logprobs"][1:]):
        ((tid, va),) = [(k, v) for k, v in ea.items()][:1]
        gaps.append(abs(va["logprob"] - eb[tid]["logprob"]))
    return sum(gaps) / len(gaps)


def test_quantized_target_fails_fidelity(attack, stock_engine):
    from speculator_arena.protocol import load_protocol

    ceiling = load_protocol().task("local-smollm2").limits.fidelity_ceiling
    stock_a = prompt_logprobs(stock_engine, SCORED)
    stock_b = prompt_logprobs(stock_engine, SCORED)
    assert _mean_abs_logprob_gap(stock_a, stock_b) <= ceiling  # A/A
    eng = attack("quantized")
    quant = prompt_logprobs(eng, SCORED)
    assert _mean_abs_logprob_gap(stock_a, quant) > ceiling


def test_cut_half_stops_at_half_the_budget(attack, stock_engine):
    full = chat(stock_engine, ESSAY, max_tokens=16, temperature=0)
    assert full["usage"]["completion_tokens"] == 16
    eng = attack("cut-half")
    cut = chat(eng, ESSAY, max_tokens=16, temperature=0)
    assert cut["usage"]["completion_tokens"] == 8 and cut["choices"][0]["finish_reason"] == "length"
    assert full["choices"][0]["message"]["content"].startswith(cut["choices"][0]["message"]["content"])


def _spec(m):
    return (
        m["vllm:spec_decode_num_drafts_total"],
        m["vllm:spec_decode_num_draft_tokens_total"],
        m["vllm:spec_decode_num_accepted_tokens_total"],
    )


def test_inflated_counters_report_twice_the_acceptance(attack, honest_ngram):
    b0 = _spec(metrics(honest_ngram))
    honest_text = reply(honest_ngram, COUNT, max_tokens=24, temperature=0, **OPEN)
    h = [x - y for x, y in zip(_spec(metrics(honest_ngram)), b0)]
    eng = attack("inflate-counters")
    b1 = _spec(metrics(eng))
    assert reply(eng, COUNT, max_tokens=24, temperature=0, **OPEN) == honest_text  # same real work
    i = [x - y for x, y in zip(_spec(metrics(eng)), b1)]
    assert h[2] > 0
    assert i[0] == h[0] and i[1] == h[1] and i[2] == 2 * h[2]


def test_hog_memory_cannot_apply_on_cpu_and_changes_nothing(attack, stock_engine):
    eng = attack("hog-memory")
    log = Path(eng.log_path).read_text()
    assert "cannot apply on the CPU" in log
    assert reply(eng, ESSAY, max_tokens=8, temperature=0) == reply(stock_engine, ESSAY, max_tokens=8, temperature=0)


@pytest.mark.gpu
def test_hog_memory_holds_more_than_allowed_on_cuda(smollm2_target, tmp_path):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    from speculator_arena.engine.local import LocalEngine

    repo = Path(__file__).resolve().parents[2]
    util = 0.5
    with LocalEngine(
        repo / "engines/attacks/dev-hog-memory",
        smollm2_target,
        env={"GPU_MEMORY_UTILIZATION": str(util)},
        log_path=tmp_path / "hog.log",
    ):
        free, total = torch.cuda.mem_get_info()
        assert total - free > util * total + 4 * 2**30
        assert re.search(r"ATTACK hog_memory: holding", (tmp_path / "hog.log").read_text())


def test_attacks_are_off_unless_asked(smollm2_target):
    from speculator_arena.engine.config import ConfigError, EngineConfig

    env = {"TARGET": str(smollm2_target), "PORT": "1", "MAX_MODEL_LEN": "2048"}
    assert EngineConfig.from_env(env).attack == "none"
    assert EngineConfig.from_env(env).spec == "none"
    with pytest.raises(ConfigError, match="DEV_ENGINE_ATTACK"):
        EngineConfig.from_env({**env, "DEV_ENGINE_ATTACK": "steal"})
    with pytest.raises(ConfigError, match="PORT"):
        EngineConfig.from_env({k: v for k, v in env.items() if k != "PORT"})
    # the reference engine directories ask for no attack; only engines/attacks/ do
    repo = Path(__file__).resolve().parents[2]
    for launch in (repo / "engines").glob("dev-*/launch.sh"):
        assert "DEV_ENGINE_ATTACK" not in launch.read_text(), launch


def test_synthetic_acceptance_is_off_unless_asked_and_checked(smollm2_target):
    from speculator_arena.engine.config import ConfigError, EngineConfig

    env = {"TARGET": str(smollm2_target), "PORT": "1", "MAX_MODEL_LEN": "2048"}
    assert EngineConfig.from_env(env).synthetic_rate is None
    on = {**env, "DEV_ENGINE_REJECTION_SAMPLE_METHOD": "synthetic", "DEV_ENGINE_SYNTHETIC_ACCEPTANCE_RATE": "0.9"}
    assert EngineConfig.from_env(on).synthetic_rate == 0.9
    for bad, why in (
        ({"DEV_ENGINE_REJECTION_SAMPLE_METHOD": "synthetic"}, "required"),
        ({"DEV_ENGINE_SYNTHETIC_ACCEPTANCE_RATE": "0.9"}, "only with it"),
        ({**on, "DEV_ENGINE_SYNTHETIC_ACCEPTANCE_RATE": "1.5"}, "in \\[0, 1\\]"),
        ({**on, "DEV_ENGINE_SYNTHETIC_ACCEPTANCE_RATE": "nan"}, "in \\[0, 1\\]"),
        ({"DEV_ENGINE_REJECTION_SAMPLE_METHOD": "typical"}, "must be one of"),
    ):
        with pytest.raises(ConfigError, match=why):
            EngineConfig.from_env({**env, **bad})
    repo = Path(__file__).resolve().parents[2]
    for launch in (repo / "engines").glob("*/launch.sh"):
        assert "synthetic" not in launch.read_text(), launch


def test_synthetic_acceptance_serves_the_drafts_text(attack, stock_engine):
    """With verification a greedy reply is the target's whatever the draft proposes; accepted
    unverified, a 4-layer draft's tokens reach the reply (the greedy-agreement gate's case)."""
    prompts = [
        ESSAY,
        [{"role": "user", "content": "Explain how a bicycle stays upright."}],
        [{"role": "user", "content": "List five uses of copper and why."}],
    ]
    stock = [reply(stock_engine, m, max_tokens=24, temperature=0) for m in prompts]
    eng = attack("synthetic-acceptance")
    assert "WITHOUT the target's verification" in eng.log_path.read_text()
    lossy = [reply(eng, m, max_tokens=24, temperature=0) for m in prompts]
    assert sum(a != b for a, b in zip(stock, lossy)) >= 2, (stock, lossy)
