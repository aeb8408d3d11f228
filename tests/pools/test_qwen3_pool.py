"""qwen3-8b pools build from ../shared/data with the Qwen3 tokenizer (about 2.5 minutes cold)."""

from __future__ import annotations

import json

import pytest

from speculator_arena.pools.api import load_pool
from speculator_arena.protocol import load_protocol

pytestmark = pytest.mark.slow


def test_qwen3_pools_build_and_pass_their_checks(built_local, tmp_path, monkeypatch, shared_data):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("ARENA_EMBED_CACHE", str(built_local["embed_cache"]))  # reuse the local build's embeddings
    monkeypatch.setenv("ARENA_POOL_KEY", "qwen-test-key")
    monkeypatch.delenv("ARENA_PARAPHRASES", raising=False)
    from speculator_arena.dagster_project.launch import build_pools

    res = build_pools("qwen3-8b", data=str(shared_data), home=str(tmp_path))
    assert all(c.passed for c in res.get_asset_check_evaluations())
    task = load_protocol().task("qwen3-8b")
    dev, test = load_pool("qwen3-8b", "dev", home=tmp_path), load_pool("qwen3-8b", "test", home=tmp_path)
    for pool in (dev, test):
        for (w, p), (a, b) in pool.blocks().items():
            assert b - a >= task.lanes[w] * task.workloads[w].interleave, (w, p)
    assert len(dev.greedy_prompts(task.gates.greedy_agreement.prompts)) == 64
    assert len(dev.fidelity_texts(task.gates.target_fidelity.texts)) == 64
    assert max(t.max_tokens for s in dev.sessions for t in s.turns) > 48  # no cap on the public task
    card = json.loads((tmp_path / "pools" / "qwen3-8b" / "data_card" / "qwen3-8b.json").read_text())
    assert card["counts"]["test"]["sessions"] == len(test.sessions)
    assert (
        card["diversity"]["probes"]["diverse_mean_similarity"] < card["diversity"]["probes"]["random_mean_similarity"]
    )
