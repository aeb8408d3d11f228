"""LowBArena's development engine: quantized checkpoints served quantized, workload fields, attacks.

Real engines (engines/dev-lowb-stock and engines/attacks/lowb-*) on the real model, started one or
two at a time; the quantized references come from checkpoints/quantize.py.
"""

from __future__ import annotations

import math
import threading
import time
from pathlib import Path

import httpx
import pytest
from engine_testkit import chat, metrics, prompt_logprobs

from speculator_arena.checkpoints.quantize import make_reference_checkpoint
from speculator_arena.engine.local import LocalEngine

pytestmark = pytest.mark.slow

ENGINES = Path(__file__).resolve().parents[2] / "engines"
CPU_ENV = {"DEV_ENGINE_THREADS": "1", "OMP_NUM_THREADS": "1", "DEV_ENGINE_DEVICE": "cpu"}
SHORT = [{"role": "user", "content": "Reply with the single word: yes."}]
ESSAY = [{"role": "user", "content": "Write a long essay about the history of Rome."}]
SCORED = [
    {"role": "user", "content": "What is the capital of France?"},
    {"role": "assistant", "content": "The capital of France is Paris, a city on the Seine."},
]


@pytest.fixture(scope="module")
def lowb_home(tmp_path_factory, smollm2_target):
    return tmp_path_factory.mktemp("lowb_serving_home")


@pytest.fixture(scope="module")
def serve(smollm2_target, tmp_path_factory):
    logs = tmp_path_factory.mktemp("lowb_engine_logs")
    started: list[LocalEngine] = []

    def start(engine: str, checkpoint=None, max_num_seqs: int = 4) -> LocalEngine:
        eng = LocalEngine(
            ENGINES / engine,
            smollm2_target,
            max_model_len=2048,
            max_num_seqs=max_num_seqs,
            served_name="smollm2",
            env={**CPU_ENV, "ARTIFACT": str(checkpoint or smollm2_target)},
            log_path=logs / f"{engine.replace('/', '_')}-{len(started)}.log",
        )
        started.append(eng.start())
        return eng

    yield start
    for eng in started:
        eng.stop()


@pytest.fixture(scope="module")
def bf16(serve) -> LocalEngine:
    return serve("dev-lowb-stock")


def rss(engine: LocalEngine) -> int:
    """Resident bytes of the engine process (launch.sh execs python: the same pid)."""
    for line in Path(f"/proc/{engine.proc.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def log_text(engine: LocalEngine) -> str:
    return engine.log_path.read_text(errors="replace")


def token_logprobs(reply: dict) -> list[float]:
    """The prompt's own token log-probabilities: each row's first entry (the top 20 follow it)."""
    out = []
    for row in reply["prompt_logprobs"][1:]:
        assert len(row) >= 20
        out.append(next(iter(row.values()))["logprob"])
    return out


@pytest.mark.parametrize("name", ["rtn-w8", "rtn-w4-g32"])
def test_quantized_reference_is_served_quantized(serve, bf16, lowb_home, name):
    """Smaller in memory than BF16, answers chat and prompt_logprobs(20) close to BF16's."""
    eng = serve("dev-lowb-stock", make_reference_checkpoint("lowb-smollm2", name, lowb_home))
    try:
        assert "kept quantized" in log_text(eng) and "dtype bfloat16" in log_text(eng)
        assert "not quantized" in log_text(bf16)
        assert rss(bf16) - rss(eng) > 60 * 2**20, (rss(bf16), rss(eng))
        answer = chat(eng, SHORT, max_tokens=8, temperature=0)["choices"][0]["message"]["content"]
        assert answer.strip()
        mine = prompt_logprobs(eng, SCORED, k=20)
        theirs = prompt_logprobs(bf16, SCORED, k=20)
        a, b = token_logprobs(mine), token_logprobs(theirs)
        assert len(a) == len(b) > 10 and all(math.isfinite(x) for x in a)
        assert a != b  # the quantization changes the model...
        assert sum(abs(x - y) for x, y in zip(a, b)) / len(a) < 1.0  # ...without losing it
    finally:
        eng.stop()


def test_ignore_eos_and_min_tokens_give_exact_lengths(bf16):
    natural = chat(bf16, SHORT, max_tokens=40, temperature=0)["usage"]["completion_tokens"]
    assert natural < 40  # the model stops by itself here...
    forced = chat(bf16, SHORT, max_tokens=40, temperature=0, ignore_eos=True)
    assert forced["usage"]["completion_tokens"] == 40  # ...and ignore_eos makes it generate all 40
    assert forced["choices"][0]["finish_reason"] == "length"
    at_least = chat(bf16, SHORT, max_tokens=40, temperature=0, min_tokens=natural + 5)
    assert at_least["usage"]["completion_tokens"] >= natural + 5
    r = httpx.post(bf16.base_url + "/v1/chat/completions", json={"messages": SHORT, "ignore_eos": "yes"}, timeout=60)
    assert r.status_code == 400


def test_attack_no_prompt_logprobs(serve, bf16):
    eng = serve("attacks/lowb-no-prompt-logprobs")
    try:
        body = {"messages": SCORED, "max_tokens": 1, "prompt_logprobs": 20, "continue_final_message": True}
        body["add_generation_prompt"] = False
        assert httpx.post(eng.base_url + "/v1/chat/completions", json=body, timeout=60).status_code == 400
        assert httpx.post(bf16.base_url + "/v1/chat/completions", json=body, timeout=60).status_code == 200
        assert chat(eng, SHORT, max_tokens=4, temperature=0)["usage"]["completion_tokens"] >= 1
    finally:
        eng.stop()


def max_running(engine: LocalEngine, n: int = 3) -> float:
    """The most requests the engine said it ran at once while serving `n` concurrent requests."""
    seen, done = [], threading.Event()

    def poll():
        while not done.is_set():
            seen.append(metrics(engine).get("vllm:num_requests_running", 0.0))
            time.sleep(0.1)

    watcher = threading.Thread(target=poll)
    watcher.start()
    workers = [
        threading.Thread(target=chat, args=(engine, SHORT), kwargs={"max_tokens": 24, "ignore_eos": True, "seed": i})
        for i in range(n)
    ]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    done.set()
    watcher.join()
    return max(seen)


def test_attack_queue_runs_one_request_at_a_time(serve, bf16):
    assert max_running(bf16) >= 2
    eng = serve("attacks/lowb-queue")
    try:
        assert max_running(eng) == 1
    finally:
        eng.stop()


def test_attacks_short_and_long_change_lengths(serve, bf16):
    natural = chat(bf16, SHORT, max_tokens=40, temperature=0)["usage"]["completion_tokens"]
    short = serve("attacks/lowb-short")
    try:
        assert chat(bf16, ESSAY, max_tokens=40, ignore_eos=True, seed=1)["usage"]["completion_tokens"] == 40
        assert chat(short, ESSAY, max_tokens=40, ignore_eos=True, seed=1)["usage"]["completion_tokens"] == 20
    finally:
        short.stop()
    long = serve("attacks/lowb-long")
    try:
        assert natural < 40
        assert chat(long, SHORT, max_tokens=40, temperature=0)["usage"]["completion_tokens"] == 40
    finally:
        long.stop()
