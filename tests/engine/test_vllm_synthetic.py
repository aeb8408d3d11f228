"""Lossy acceptance switched on by configuration, in vLLM's own form (issue 35): the planted attack
engines/attacks/vllm-cpu-synthetic-acceptance (n-gram with `"rejection_sample_method": "synthetic"`)
started by the runner's own code on the sealed local-smollm2 target, and one sampled request sent.

What the installed CPU build does with it decides what the arena must show: vllm-cpu 0.32.0 starts,
then refuses at the first speculative step (its CPU sampler asserts that synthetic acceptance is
not supported), so the request is not answered whole and a candidate that tries it fails
(a 0, as every engine that stops answering). Should a later CPU build serve it, this test fails and
says so: the attack then belongs in the attack runs (tests/runners/attack_runs.py), where the gates
must catch it as they catch its development-engine equivalent (engines/attacks/
dev-synthetic-acceptance). Marked `full`; skipped where the vLLM venv is absent.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from speculator_arena import settings
from speculator_arena.runners.harness import Evaluation
from speculator_arena.runners.spec import EvaluationSpec

pytestmark = pytest.mark.full
ENGINE = Path(__file__).resolve().parents[2] / "engines" / "attacks" / "vllm-cpu-synthetic-acceptance"
VENV = Path(settings.get("ARENA_VLLM_VENV"))
REFUSAL = "Synthetic acceptance not supported with CPU sampling"


def test_the_cpu_build_refuses_synthetic_acceptance_at_its_first_speculative_step(smollm2_target, tmp_path):
    if not (VENV / "bin" / "vllm").exists():
        pytest.skip(f"no vLLM CPU build at {VENV} (scripts/setup_vllm_cpu.sh; ARENA_VLLM_VENV)")
    spec = EvaluationSpec(task_id="local-smollm2", engine=str(ENGINE), target=str(smollm2_target))
    ev = Evaluation(spec, home=tmp_path, progress=lambda msg: print(msg, flush=True))
    ev.ctx.target = Path(smollm2_target)
    er = ev.engines.start("candidate", ENGINE, "probe", 0.90)  # the config itself is accepted
    try:
        body = {
            "model": ev.ctx.task.task.model,
            "messages": [
                {"role": "user", "content": "Write this line three times: the quick brown fox jumps over the lazy dog."}
            ],
            "max_tokens": 48,
            "temperature": 0.7,
            "top_p": 0.8,
            "top_k": 20,
            "seed": 7,
        }
        try:
            r = httpx.post(f"{er.base_url}/v1/chat/completions", json=body, timeout=120)
            answered = r.status_code == 200 and bool(r.json()["choices"][0]["message"]["content"])
        except (httpx.HTTPError, ValueError, KeyError):
            answered = False
        log = er.log_path.read_text(errors="replace")
        assert not answered, (
            "vLLM's CPU build now serves synthetic acceptance: add engines/attacks/vllm-cpu-synthetic-acceptance "
            "to the attack runs (tests/runners/attack_runs.py) and show the gates catch it"
        )
        assert REFUSAL in log, log[-3000:]
    finally:
        if er.alive():
            ev.engines.stop(er, record=False)
