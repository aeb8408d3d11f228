"""On a CUDA device the engine serves in bfloat16 (skipped without one)."""

from __future__ import annotations

from pathlib import Path

import pytest
from engine_testkit import chat, metrics

pytestmark = pytest.mark.gpu
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cuda():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    return torch


@pytest.mark.parametrize("engine_dir", ["dev-stock", "dev-ngram", "dev-self-draft"])
def test_serves_in_bfloat16_on_cuda(cuda, smollm2_target, tmp_path, engine_dir):
    from speculator_arena.engine.local import LocalEngine

    log = tmp_path / "engine.log"
    with LocalEngine(REPO / "engines" / engine_dir, smollm2_target, served_name="smollm2", log_path=log) as eng:
        r = chat(
            eng,
            [{"role": "user", "content": "Repeat twice: the quick brown fox."}],
            max_tokens=32,
            temperature=0.7,
            top_p=0.8,
            top_k=20,
            seed=1,
        )
        assert r["usage"]["completion_tokens"] > 0
        m = metrics(eng)
    text = log.read_text()
    assert "dtype bfloat16, device cuda" in text and "offload: none" in text
    if engine_dir != "dev-stock":
        assert m["vllm:spec_decode_num_drafts_total"] > 0
