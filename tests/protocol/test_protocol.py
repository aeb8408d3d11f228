import json
import subprocess
import sys

import pytest
import yaml

from speculator_arena.protocol import available_versions, load_protocol, target_task
from speculator_arena.protocol.model import Protocol


def test_v1_holds_the_published_values():
    p = load_protocol(1)
    assert p.sampling.temperature == 0.7 and p.sampling.top_p == 0.8 and p.sampling.top_k == 20
    assert p.engine_environment.gpu_memory_utilization == 0.90
    assert p.gates.memory.slack_gib == 4.0
    assert p.quotas == {"participant": {"dev": 20, "test": 3}, "study_agent": {"dev": 6, "test": 1}}
    q8 = p.task("qwen3-8b")
    assert q8.lanes == {"solo": 1, "team": 8, "busy": 20}
    assert q8.workloads["busy"].pass_seconds == 240
    assert q8.limits.greedy_agreement_floor == 0.5
    assert p.task("qwen35-27b").limits.greedy_agreement_floor is None
    assert p.task("qwen35-27b").task.language_model_only is True


def test_local_task_overrides_only_itself():
    p = load_protocol(1)
    local = p.task("local-smollm2")
    assert not local.task.public
    assert local.workloads["solo"].pass_seconds < 150
    assert local.gates.greedy_agreement.prompts < 64
    # the public tasks keep the protocol's own values
    assert p.task("qwen3-8b").gates.greedy_agreement.prompts == 64
    assert "local-smollm2" not in p.public_tasks()


def test_a_typo_in_a_limit_fails_validation():
    data = load_protocol(1).model_dump(mode="json")
    data["tasks"]["qwen3-8b"]["limits"]["fidelity_cieling"] = 1.0
    with pytest.raises(Exception, match="fidelity_cieling"):
        Protocol.model_validate(data)


def test_staged_version_cannot_replace_a_shipped_one(tmp_path, monkeypatch):
    latest = load_protocol().version
    data = load_protocol(1).model_dump(mode="json")
    data["dev_test_gap"] = 0.5
    (tmp_path / "v1.yaml").write_text(yaml.safe_dump(data))
    data["version"] = latest + 1
    (tmp_path / f"v{latest + 1}.yaml").write_text(yaml.safe_dump(data))
    monkeypatch.setenv("ARENA_PROTOCOL_DIR", str(tmp_path))
    assert available_versions()[-2:] == [latest, latest + 1]
    assert load_protocol(1).dev_test_gap == 0.10
    assert load_protocol(latest + 1).dev_test_gap == 0.5


def test_cli_protocol_json_is_the_document():
    out = subprocess.run(
        [sys.executable, "-m", "speculator_arena.cli", "protocol", "--json"], capture_output=True, text=True, check=True
    ).stdout
    doc = json.loads(out)
    assert doc["version"] == load_protocol().version == available_versions()[-1] and doc["count_slack_tokens"] == 4
    assert doc["tasks"]["qwen3-8b"]["revision"] == "b968826d9c46dd6066d109eabc6255188de91218"
    assert len(doc["digest"]) == 64


def test_v2_adds_the_counted_slack_and_contention_and_v1_keeps_neither():
    """SCORING.md: count_slack_tokens is 4 from v2 on and 0 in v1; host contention is judged from v2."""
    v1, v2 = load_protocol(1), load_protocol(2)
    assert (v1.count_slack_tokens, v1.contention) == (0, None)
    assert v2.count_slack_tokens == 4 and v2.contention.max_foreign_cpu_share == 0.25
    assert v2.contention.max_steal_share == 0.05
    assert v2.task("qwen3-8b").count_slack_tokens == 4 and v2.task("qwen3-8b").contention == v2.contention
    assert v1.gates.memory.max_sample_gap_seconds is None and v2.gates.memory.max_sample_gap_seconds > 0


def test_v3_changes_only_the_embedded_tasks_passes():
    """Issue 21: v3 gives local-smollm2 longer passes; every public task and rule is v2's."""
    v2, v3 = load_protocol(2), load_protocol(3)
    local2, local3 = v2.task("local-smollm2"), v3.task("local-smollm2")
    assert {w.pass_seconds for w in local2.task.workloads.values()} == {5}
    assert {w.pass_seconds for w in local3.task.workloads.values()} == {8}
    d2, d3 = v2.model_dump(), v3.model_dump()
    for k in ("version", "published", "notes"):
        d2.pop(k), d3.pop(k)
    d2["tasks"]["local-smollm2"].pop("workloads"), d3["tasks"]["local-smollm2"].pop("workloads")
    assert d2 == d3


def test_v4_changes_only_the_embedded_tasks_pairing_and_placement():
    """Issue 21: v4 pairs local-smollm2 mirrored (C S S C) over two passes of 12 s per workload, its
    engines on huge pages; every public task is sequential, and every other value is v3's."""
    v3, v4 = load_protocol(3), load_protocol(4)
    local3, local4 = v3.task("local-smollm2"), v4.task("local-smollm2")
    assert (local3.pairing, local4.pairing) == ("sequential", "mirrored")
    assert (local3.placement, local4.placement) == ({}, {"THP_MEM_ALLOC_ENABLE": "1"})
    assert local4.passes_per_workload == 2 and {w.pass_seconds for w in local4.workloads.values()} == {12}
    # the same timed seconds per engine as v3 (three passes of 8 s)
    assert (
        sum(w.pass_seconds for w in local4.workloads.values()) * 2
        == sum(w.pass_seconds for w in local3.workloads.values()) * 3
    )
    assert [e for e, _ in local4.pass_halves()] == ["candidate", "stock", "stock", "candidate"]
    assert [list(ix) for _, ix in local4.pass_halves()] == [[0], [0], [1], [1]]
    for t in v4.public_tasks():
        assert v4.task(t).pairing == "sequential" and v4.task(t).placement == {}
    d3, d4 = v3.model_dump(), v4.model_dump()
    for k in ("version", "published", "notes"):
        d3.pop(k), d4.pop(k)
    for k in ("workloads", "passes_per_workload", "pairing", "placement"):
        d3["tasks"]["local-smollm2"].pop(k), d4["tasks"]["local-smollm2"].pop(k)
    assert d3 == d4


def test_v6_adds_the_vllm_task_on_the_embedded_target_and_changes_nothing_else():
    """Issue 22: v6 adds local-smollm2-vllm, local-smollm2's model, sessions and values served by
    vLLM's CPU build (stock and n-gram), whose target, tokenizer and pools are local-smollm2's;
    every other task and value is v5's."""
    v5, v6 = load_protocol(5), load_protocol(6)
    assert set(v6.tasks) - set(v5.tasks) == {"local-smollm2-vllm"}
    vllm, local = v6.tasks["local-smollm2-vllm"], v6.tasks["local-smollm2"]
    assert vllm.target_task == "local-smollm2" and target_task("local-smollm2-vllm") == "local-smollm2"
    assert target_task("local-smollm2") == "local-smollm2" and target_task("no-such-task") == "no-such-task"
    assert {r.kind: r.engine for r in vllm.references} == {
        "none": "engines/vllm-cpu-stock",
        "ngram": "engines/vllm-cpu-ngram",
    }
    same = ("model", "revision", "lanes", "workloads", "passes_per_workload", "pairing", "max_tokens_cap", "gates")
    assert all(getattr(vllm, k) == getattr(local, k) for k in same)
    assert not vllm.public and vllm.speed_noise.max_abs_error is None  # its own calibration, not local's
    d5, d6 = v5.model_dump(), v6.model_dump()
    for k in ("version", "published", "notes"):
        d5.pop(k), d6.pop(k)
    d6["tasks"].pop("local-smollm2-vllm")
    assert d5 == d6


def test_a_target_task_must_share_the_model_and_have_its_own_target():
    doc = load_protocol(6).model_dump(mode="json")
    doc["tasks"]["local-smollm2-vllm"]["target_task"] = "qwen3-8b"  # another model
    with pytest.raises(ValueError, match="same model and revision"):
        Protocol.model_validate(doc)
    doc["tasks"]["local-smollm2-vllm"]["target_task"] = "no-such-task"
    with pytest.raises(ValueError, match="must name a task of this version"):
        Protocol.model_validate(doc)
    doc["tasks"]["local-smollm2-vllm"]["target_task"] = "local-smollm2"
    doc["tasks"]["local-smollm2"]["target_task"] = "local-smollm2-vllm"  # a chain
    with pytest.raises(ValueError, match="its own target"):
        Protocol.model_validate(doc)


def test_a_task_on_another_target_reads_its_checkpoint_pools_and_tokenizer(tmp_path):
    """What local-smollm2-vllm's evaluation opens is local-smollm2's: one sealed target, one pool
    build (no second copy that could drift), and no pool assets of its own."""
    from speculator_arena.assets.pools import POOL_TASKS
    from speculator_arena.checkpoints.prepare import checkpoint_dir
    from speculator_arena.pools.layout import builds_dir, pool_root

    for f in (checkpoint_dir, pool_root, builds_dir):
        assert f("local-smollm2-vllm", tmp_path) == f("local-smollm2", tmp_path)
    assert "local-smollm2-vllm" not in POOL_TASKS.get_partition_keys()
    assert "local-smollm2" in POOL_TASKS.get_partition_keys()
