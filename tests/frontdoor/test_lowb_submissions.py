"""LowBArena submissions through the same front door (issue 50): a quantized checkpoint
(`artifact`) from an approved workspace or the hub, checked and sealed before anything is stored,
an engine as for the speculator tasks, LowBArena's own quotas; and each refusal leaving nothing
stored (no row, no sealed copy, nothing in staging) and no quota used.

The real API app (conftest's `front`: FastAPI's TestClient, intake children and all), real files:
each checkpoint is written with the `safetensors` library beside a config.json."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from speculator_arena.protocol import load_protocol
from speculator_arena.protocol.lowb import load_lowb_protocol

from .conftest import TASK, submission

LOWB_TASK = "lowb-smollm2"  # its target is the embedded model's, prepared on the arena's machine
HUB_LOWB_TASK = "lowb-qwen3-8b"  # its target is listed by the (local) hub
REV = "0123456789abcdef0123456789abcdef01234567"


def quantized_checkpoint(directory: Path) -> Path:
    """A small int8 checkpoint as a quantizer writes one: packed weights and scales, config.json
    declaring the quantization, a tokenizer file, and a README that is not a checkpoint file."""
    from safetensors.numpy import save_file

    directory.mkdir(parents=True)
    tensors = {
        "model.layers.0.mlp.down_proj.weight_packed": np.arange(64, dtype=np.int8).reshape(8, 8),
        "model.layers.0.mlp.down_proj.weight_scale": np.ones((8, 1), dtype=np.float16),
        "model.embed_tokens.weight": np.zeros((16, 8), dtype=np.float16),
    }
    save_file(tensors, str(directory / "model.safetensors"))
    quant = {"quant_method": "compressed-tensors", "config_groups": {"g0": {"weights": {"num_bits": 8}}}}
    config = {"model_type": "llama", "torch_dtype": "bfloat16", "quantization_config": quant}
    (directory / "config.json").write_text(json.dumps(config))
    (directory / "tokenizer.json").write_text('{"model": {}}')
    (directory / "README.md").write_text("my quantization\n")
    return directory


def checkpoint_bytes(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.iterdir() if p.suffix in (".safetensors", ".json"))


def prepare_target(home: Path, task_id: str, total_bytes: int) -> None:
    """The task's target as prepared on the arena: its sealed manifest's byte count (what bounds
    an artifact, as it bounds a speculator)."""
    from speculator_arena.checkpoints import checkpoint_dir

    d = checkpoint_dir(task_id, home)
    d.mkdir(parents=True, exist_ok=True)
    (d / "manifest.json").write_text(json.dumps({"total_bytes": total_bytes, "files": {}}))


def lowb_doc(artifact: dict | None, **over) -> dict:
    doc = submission(**{"task_id": LOWB_TASK, "solution": {"method": "RTN W8A16", "kind": "int8"}, **over})
    if artifact is not None:
        doc["artifact"] = artifact
    return doc


@pytest.fixture
def lowb_front(front, workspace):
    """The front door with lowb-smollm2's target prepared (1 MB: room for the small checkpoints)."""
    prepare_target(front.home, LOWB_TASK, 1_000_000)
    return front


def assert_refused_lowb(front, response, status: int, words: str) -> None:
    """Refused in the request: the reason, and nothing stored, no quota of either arena used."""
    assert response.status_code == status, response.text
    assert words in response.json()["error"], response.json()
    assert front.stored() == {"submissions": 0, "sealed": [], "staging": []}
    assert front.quota(LOWB_TASK)["used"] == 0
    assert front.quota(TASK)["used"] == 0


def test_workspace_artifact_is_sealed_and_queued_with_its_spec(lowb_front, workspace):
    from speculator_arena.frontdoor.queue import evaluation_spec, waiting
    from speculator_arena.frontdoor.state import connect
    from speculator_arena.runners.spec import EvaluationSpec
    from speculator_arena.sealed.store import store_dir, verify_sealed
    from speculator_arena.warehouse import Warehouse

    front = lowb_front
    ckpt = quantized_checkpoint(workspace / "smollm2-w8")
    r = front.post(lowb_doc({"uri": f"workspace:{ckpt}", "revision": ""}))
    assert r.status_code == 201, r.text
    got = r.json()
    assert got["status"] == "queued" and got["artifact_digest"] and got["engine_digest"], got
    tree = store_dir(front.home) / got["artifact_digest"] / "tree"
    # only checkpoint files, sealed read-only, re-hashing to their digest
    assert sorted(p.name for p in tree.iterdir()) == ["config.json", "model.safetensors", "tokenizer.json"]
    assert verify_sealed(tree, front.home) == got["artifact_digest"]
    assert all(p.stat().st_mode & 0o222 == 0 for p in tree.iterdir())
    manifest = json.loads((tree.parent / "manifest.json").read_text())
    assert manifest["source"] == f"workspace:{ckpt}" and manifest["kind"] == "artifact"
    # the queue runs it with the sealed artifact, no speculator, under LowBArena's protocol
    con = connect(front.home)
    (row,) = waiting(con, Warehouse(front.home))
    assert row["protocol_version"] == load_lowb_protocol().version
    assert row["artifact_dir"] == str(tree) and row["artifact_source"] == f"workspace:{ckpt}"
    spec = evaluation_spec(row, "alice")
    assert spec.artifact == str(tree) and spec.speculator is None and spec.task_id == LOWB_TASK
    assert spec.engine == str(store_dir(front.home) / got["engine_digest"] / "tree")
    assert EvaluationSpec.from_json(spec.to_json()).artifact == str(tree)
    # its status shows the digest; it counts under LowBArena's quota, not the speculator task's
    assert front.status(got["submission_id"])["artifact_digest"] == got["artifact_digest"]
    assert front.quota(LOWB_TASK) == {
        "task_id": LOWB_TASK,
        "split": "dev",
        "used": 1,
        "limit": load_lowb_protocol().quota("participant", "dev"),
        "left": load_lowb_protocol().quota("participant", "dev") - 1,
    }
    assert front.quota(TASK)["used"] == 0


def test_pickle_in_the_artifact(lowb_front, workspace):
    ckpt = quantized_checkpoint(workspace / "ckpt")
    (ckpt / "pytorch_model.bin").write_bytes(b"\x80\x04pickle")
    r = lowb_front.post(lowb_doc({"uri": f"workspace:{ckpt}"}))
    assert_refused_lowb(lowb_front, r, 422, "'pytorch_model.bin' is refused: weights must be *.safetensors")


def test_link_in_the_artifact(lowb_front, workspace, tmp_path):
    ckpt = quantized_checkpoint(workspace / "ckpt")
    (tmp_path / "elsewhere.json").write_text("{}")
    os.symlink(tmp_path / "elsewhere.json", ckpt / "generation_config.json")
    r = lowb_front.post(lowb_doc({"uri": f"workspace:{ckpt}"}))
    assert_refused_lowb(lowb_front, r, 422, "'generation_config.json' is a link")


def test_artifact_over_the_targets_bytes(lowb_front, workspace):
    ckpt = quantized_checkpoint(workspace / "ckpt")
    prepare_target(lowb_front.home, LOWB_TASK, checkpoint_bytes(ckpt) - 1)  # BF16 smaller than it: refused
    r = lowb_front.post(lowb_doc({"uri": f"workspace:{ckpt}"}))
    assert_refused_lowb(lowb_front, r, 413, "over its limit")


def test_unreadable_safetensors_header(lowb_front, workspace):
    """The header is read (in the intake's child) before anything is sealed."""
    ckpt = quantized_checkpoint(workspace / "ckpt")
    (ckpt / "model.safetensors").write_bytes((16).to_bytes(8, "little") + b"this is not json")
    r = lowb_front.post(lowb_doc({"uri": f"workspace:{ckpt}"}))
    assert_refused_lowb(lowb_front, r, 422, "the header is not JSON")


def test_speculator_on_a_lowb_task(lowb_front, workspace):
    ckpt = quantized_checkpoint(workspace / "ckpt")
    r = lowb_front.post(lowb_doc({"uri": f"workspace:{ckpt}"}, speculator={"uri": "org/eagle", "revision": REV}))
    assert_refused_lowb(lowb_front, r, 422, "takes no `speculator`")


def test_artifact_on_a_speculator_task(lowb_front, workspace):
    ckpt = quantized_checkpoint(workspace / "ckpt")
    r = lowb_front.post(submission(artifact={"uri": f"workspace:{ckpt}", "revision": ""}))
    assert_refused_lowb(lowb_front, r, 422, "`artifact` is a LowBArena field")


def test_unknown_lowb_split_and_missing_artifact(lowb_front, workspace):
    ckpt = quantized_checkpoint(workspace / "ckpt")
    r = lowb_front.post(lowb_doc({"uri": f"workspace:{ckpt}"}, split="val"))
    assert_refused_lowb(lowb_front, r, 422, "split")
    assert_refused_lowb(lowb_front, lowb_front.post(lowb_doc(None)), 422, "needs `artifact`")
    r = lowb_front.post(lowb_doc({"uri": f"workspace:{ckpt}"}, solution={"method": "", "kind": "bf16"}))
    assert_refused_lowb(lowb_front, r, 422, "is a reference's kind")


def test_target_not_prepared_refuses_in_the_request(front, workspace):
    """lowb-smollm2's target comes from a package, not the hub: unprepared, nothing bounds the artifact."""
    ckpt = quantized_checkpoint(workspace / "ckpt")
    assert_refused_lowb(front, front.post(lowb_doc({"uri": f"workspace:{ckpt}"})), 503, "not prepared")


def test_lowb_quota_is_lowbarenas(lowb_front, workspace, tmp_path, monkeypatch):
    """A LowBArena version with one scored evaluation per task: the second is refused (429) while
    the speculator arena's limit stays its own; a study agent has no LowBArena quota at all."""
    import yaml

    from speculator_arena.frontdoor.accounts import invite
    from speculator_arena.frontdoor.state import connect

    staged = tmp_path / "protocol"
    staged.mkdir()
    doc = load_lowb_protocol().model_dump(mode="json")
    doc["version"] += 1
    doc["quotas"]["participant"]["test"] = 1
    (staged / f"lowb-p{doc['version']}.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    monkeypatch.setenv("ARENA_PROTOCOL_DIR", str(staged))
    ckpt = quantized_checkpoint(workspace / "ckpt")
    assert lowb_front.post(lowb_doc({"uri": f"workspace:{ckpt}"}, split="test")).status_code == 201
    r = lowb_front.post(lowb_doc({"uri": f"workspace:{ckpt}"}, split="test"))
    assert r.status_code == 429 and f"1 of 1 test evaluations on {LOWB_TASK}" in r.json()["error"], r.text
    assert lowb_front.stored()["submissions"] == 1
    assert lowb_front.quota(TASK, "test")["limit"] == load_protocol().quota("participant", "test") != 1
    _, agent = invite(connect(lowb_front.home), "agent-1", "study_agent")
    r = lowb_front.post(lowb_doc({"uri": f"workspace:{ckpt}"}), token=agent)
    assert r.status_code == 429 and "0 of 0 dev evaluations" in r.json()["error"], r.text


# ---- the hub, through the fetch worker --------------------------------------------------------


@pytest.fixture
def qwen_target_on_hub(hub):
    task = load_lowb_protocol().task(HUB_LOWB_TASK)
    hub.add(task.model, task.revision, {"config.json": b"{}", "model.safetensors": b"w" * 200_000})
    return hub


def _files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in directory.iterdir() if p.name != "README.md"}


def test_hub_artifact_is_fetched_and_sealed(front, qwen_target_on_hub, tmp_path):
    hub = qwen_target_on_hub
    hub.add("org/qwen3-8b-w8", REV, {**_files(quantized_checkpoint(tmp_path / "q")), "convert.py": b"import os\n"})
    doc = lowb_doc({"uri": "org/qwen3-8b-w8", "revision": REV}, task_id=HUB_LOWB_TASK)
    r = front.post(doc)
    assert r.status_code == 201 and r.json()["status"] == "fetching", r.text
    s = front.settle(r)
    assert s["status"] == "queued", (s["refusal"], s["refusal_status"])
    from speculator_arena.sealed.store import store_dir

    tree = store_dir(front.home) / s["artifact_digest"] / "tree"
    assert sorted(p.name for p in tree.iterdir()) == ["config.json", "model.safetensors", "tokenizer.json"]
    assert not any(p.endswith("convert.py") for p in hub.requests)
    assert front.quota(HUB_LOWB_TASK)["used"] == 1


def test_hub_artifact_with_a_pickle_is_refused_by_the_fetch(front, qwen_target_on_hub, tmp_path):
    hub = qwen_target_on_hub
    hub.add("org/qwen3-8b-w8", REV, {**_files(quantized_checkpoint(tmp_path / "q")), "training_args.bin": b"\x80"})
    s = front.settle(front.post(lowb_doc({"uri": "org/qwen3-8b-w8", "revision": REV}, task_id=HUB_LOWB_TASK)))
    assert s["status"] == "refused" and s["refusal_status"] == 422, s
    assert "'training_args.bin' is refused" in s["refusal"]
    stored = front.stored()
    assert stored["sealed"] == [] and stored["staging"] == [], stored  # its inline engine went with it
    assert front.quota(HUB_LOWB_TASK)["used"] == 0


def test_workspace_artifact_bounded_by_the_hub_target(front, qwen_target_on_hub, workspace):
    """The target not prepared here: the fetch worker reads its size from the hub, then copies."""
    ckpt = quantized_checkpoint(workspace / "ckpt")
    s = front.settle(front.post(lowb_doc({"uri": f"workspace:{ckpt}"}, task_id=HUB_LOWB_TASK)))
    assert s["status"] == "queued" and s["artifact_digest"], (s["refusal"], s["refusal_status"])


# ---- the schema and the client -----------------------------------------------------------------


def test_an_older_database_gets_the_artifact_columns(arena_home):
    import sqlite3

    from speculator_arena.frontdoor.state import connect, frontdoor_dir, sql

    old = sql("schema").split("    fetch_started     REAL,")[0] + "    fetch_started     REAL\n);\n"
    path = frontdoor_dir(arena_home) / "state.db"
    raw = sqlite3.connect(path)
    raw.executescript(old)
    raw.close()
    assert "artifact_dir" not in {r[1] for r in sqlite3.connect(path).execute("PRAGMA table_info(submissions)")}
    con = connect(arena_home)
    columns = {r["name"] for r in con.execute(sql("submission_columns"))}
    assert {"artifact_source", "artifact_digest", "artifact_dir"} <= columns


def test_client_builds_the_artifact_field():
    from speculator_arena.frontdoor.client import SubmitError, build_submission

    doc = build_submission(LOWB_TASK, "dev", "int8", engine_repo=f"https://x.org/e.git@{REV}", artifact="/ws/ckpt")
    assert doc["artifact"] == {"uri": "workspace:/ws/ckpt", "revision": ""} and "speculator" not in doc
    doc = build_submission(LOWB_TASK, "dev", "int8", engine_repo=f"https://x.org/e.git@{REV}", artifact=f"o/q@{REV}")
    assert doc["artifact"] == {"uri": "o/q", "revision": REV}
    with pytest.raises(SubmitError, match="--artifact must be NAME@COMMIT"):
        build_submission(LOWB_TASK, "dev", "int8", engine_repo=f"https://x.org/e.git@{REV}", artifact="o/q")
