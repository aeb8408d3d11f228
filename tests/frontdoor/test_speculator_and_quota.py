"""Speculators through the real `huggingface_hub` client against a hub-shaped server on
127.0.0.1; workspace speculators; quotas derived from submissions and void evaluations; the
sealed store's verification."""

from __future__ import annotations

import hashlib
import json
import os

import pytest

from speculator_arena.protocol import load_protocol

from .conftest import finish_evaluation, submission

TARGET_TASK = "qwen3-8b"  # its target is listed by the (local) hub, as on the real arena
SPEC_REV = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture
def target_on_hub(hub):
    task = load_protocol().tasks[TARGET_TASK]
    hub.add(
        task.model,
        task.revision,
        {"config.json": b"{}", "model.safetensors": b"w" * 4000, "modeling_qwen.py": b"import os\n"},
    )
    return 4002  # the allowed files' bytes


def _spec_doc(**over):
    return submission(task_id=TARGET_TASK, speculator={"uri": "org/eagle", "revision": SPEC_REV}, **over)


def test_hub_speculator_takes_only_json_and_safetensors(front, hub, target_on_hub):
    hub.add(
        "org/eagle",
        SPEC_REV,
        {
            "config.json": b'{"draft": 1}',
            "model.safetensors": b"s" * 1000,
            "modeling_eagle.py": b"import os; os.system('id')\n",
            "README.md": b"hello",
        },
    )
    r = front.post(_spec_doc())
    assert r.status_code == 201 and r.json()["status"] == "fetching", r.text  # the hub: out of the request
    settled = front.settle(r)
    assert settled["status"] == "queued", (settled["refusal"], settled["refusal_status"])
    from speculator_arena.sealed.store import store_dir, verify_sealed

    tree = store_dir(front.home) / settled["speculator_digest"] / "tree"
    assert sorted(p.name for p in tree.rglob("*")) == ["config.json", "model.safetensors"]
    assert verify_sealed(tree, front.home) == settled["speculator_digest"]
    assert not any(path.endswith(".py") or path.endswith(".md") for path in hub.requests if "/resolve/" in path)
    manifest = json.loads((tree.parent / "manifest.json").read_text())
    assert manifest["source"] == f"hf:org/eagle@{SPEC_REV}"


def test_hub_speculator_over_half_the_target(front, hub, target_on_hub, monkeypatch):
    share = load_protocol().submission.speculator_max_share_of_target_bytes
    hub.add("org/eagle", SPEC_REV, {"config.json": b"{}", "model.safetensors": b"s" * int(target_on_hub * share)})
    s = front.settle(front.post(_spec_doc()))
    assert s["status"] == "refused" and s["refusal_status"] == 413, s
    assert "over its limit" in s["refusal"]
    assert not any("/resolve/" in p and "eagle" in p for p in hub.requests)  # refused from the listing alone
    stored = front.stored()
    assert stored["sealed"] == [] and stored["staging"] == [], stored  # its inline engine went with it
    assert front.quota(TARGET_TASK)["used"] == 0


def test_hub_speculator_without_weights_or_missing(front, hub, target_on_hub):
    hub.add("org/eagle", SPEC_REV, {"config.json": b"{}", "modeling.py": b"x"})
    s = front.settle(front.post(_spec_doc()))
    assert s["status"] == "refused" and s["refusal_status"] == 422 and "no *.safetensors" in s["refusal"], s
    s = front.settle(
        front.post(submission(task_id=TARGET_TASK, speculator={"uri": "org/absent", "revision": SPEC_REV}))
    )
    assert s["status"] == "refused" and s["refusal_status"] == 422 and "org/absent" in s["refusal"], s
    stored = front.stored()
    assert stored["sealed"] == [] and stored["staging"] == [], stored
    assert front.quota(TARGET_TASK)["used"] == 0


def test_workspace_speculator(front, tmp_path, monkeypatch, hub, target_on_hub):
    ws = tmp_path / "workspace"
    (ws / "run1").mkdir(parents=True)
    (ws / "run1" / "config.json").write_text("{}")
    (ws / "run1" / "model.safetensors").write_bytes(b"s" * 100)
    (ws / "run1" / "train.py").write_text("print(1)")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    monkeypatch.setenv("ARENA_WORKSPACES", str(ws))
    r = front.post(submission(task_id=TARGET_TASK, speculator={"uri": f"workspace:{outside}", "revision": ""}))
    assert r.status_code == 400 and "not inside an operator-approved workspace" in r.json()["error"]
    assert front.stored()["submissions"] == 0
    r = front.post(submission(task_id=TARGET_TASK, speculator={"uri": f"workspace:{ws / 'run1'}", "revision": ""}))
    # its bound is a share of a target not prepared here: the fetch worker reads it from the hub
    settled = front.settle(r)
    assert settled["status"] == "queued", (settled["refusal"], settled["refusal_status"])
    from speculator_arena.sealed.store import store_dir

    tree = store_dir(front.home) / settled["speculator_digest"] / "tree"
    assert sorted(p.name for p in tree.iterdir()) == ["config.json", "model.safetensors"]
    # a workspace speculator without *.safetensors is refused, as the docs promise
    (ws / "run2").mkdir()
    (ws / "run2" / "config.json").write_text("{}")
    s = front.settle(front.post(submission(task_id=TARGET_TASK, speculator={"uri": f"workspace:{ws / 'run2'}"})))
    assert s["status"] == "refused" and s["refusal_status"] == 422 and "no *.safetensors" in s["refusal"], s


def test_quota_exhausted_and_void_refund(front):
    """A study agent has one `test` evaluation per task: the second is refused until the first is void."""
    from speculator_arena.frontdoor.accounts import invite
    from speculator_arena.frontdoor.state import connect

    _, token = invite(connect(front.home), "agent-1", "study_agent")
    limit = load_protocol().quota("study_agent", "test")
    accepted = []
    for _ in range(limit):
        r = front.post(submission(split="test"), token=token)
        assert r.status_code == 201, r.text
        accepted.append(r.json())
    r = front.post(submission(split="test"), token=token)
    assert r.status_code == 429 and f"{limit} of {limit} test evaluations" in r.json()["error"]
    assert front.stored()["submissions"] == limit
    # a measured evaluation keeps its slot; a void one (the arena's fault) refunds it
    finish_evaluation(front.home, accepted[0]["evaluation_id"], "measured")
    assert front.post(submission(split="test"), token=token).status_code == 429
    finish_evaluation(front.home, accepted[0]["evaluation_id"], "void")
    r = front.post(submission(split="test"), token=token)
    assert r.status_code == 201, r.text
    # a `measured` evaluation the scorer ends void (a contended pass) refunds its slot too
    from synthetic import write_synthetic_evaluation

    from speculator_arena.scoring.registry import score_and_record
    from speculator_arena.warehouse import Warehouse

    assert front.post(submission(split="test"), token=token).status_code == 429
    eid = r.json()["evaluation_id"]
    # (run under v7, whose contention rule judges pass by pass: the planted pass alone voids it)
    write_synthetic_evaluation(Warehouse(front.home), eid, split="test", attack="contended", protocol_version=7)
    # the quota reads outcomes, it never runs the scorer: until a scoring found it void, it counts
    assert front.post(submission(split="test"), token=token).status_code == 429
    scored = score_and_record(Warehouse(front.home), None, [eid])  # what the evaluation asset does as it lands
    assert bool(scored.evaluations.set_index("evaluation_id").loc[eid, "void"])
    assert front.post(submission(split="test"), token=token).status_code == 201
    # the participant account next to it is untouched
    assert front.quota(split="test") == {
        "task_id": "local-smollm2",
        "split": "test",
        "used": 0,
        "limit": load_protocol().quota("participant", "test"),
        "left": load_protocol().quota("participant", "test"),
    }


def test_tampered_seal_is_refused_before_the_engine_starts(front):
    from speculator_arena.sealed.store import SealBroken, store_dir, verify_sealed_inputs

    r = front.post(submission())
    tree = store_dir(front.home) / r.json()["engine_digest"] / "tree"
    verify_sealed_inputs(str(tree), None, front.home)
    os.chmod(tree, 0o755)
    os.chmod(tree / "launch.sh", 0o644)
    original = (tree / "launch.sh").read_bytes()
    (tree / "launch.sh").write_bytes(original.replace(b"python3", b"pythonX"))  # same size, other bytes
    with pytest.raises(SealBroken, match="sha256 of tree/launch.sh differs"):
        verify_sealed_inputs(str(tree), None, front.home)
    (tree / "launch.sh").write_bytes(original)
    (tree / "extra.so").write_bytes(b"x")
    with pytest.raises(SealBroken, match="unlisted file tree/extra.so"):
        verify_sealed_inputs(str(tree), None, front.home)
    (tree / "launch.sh").unlink()
    with pytest.raises(SealBroken, match="missing tree/launch.sh"):
        verify_sealed_inputs(str(tree), None, front.home)


def test_registration(front):
    from speculator_arena.frontdoor.accounts import set_registration
    from speculator_arena.frontdoor.state import connect

    r = front.client.post("/register", json={"name": "newcomer"})
    assert r.status_code == 403 and "registration is closed" in r.json()["error"]
    set_registration(connect(front.home), True)
    r = front.client.post("/register", json={"name": "newcomer"})
    assert r.status_code == 201, r.text
    token = r.json()["token"]
    assert front.client.post("/register", json={"name": "newcomer"}).status_code == 409
    assert front.post(submission(), token=token).status_code == 201
    stored = [row[0] for row in connect(front.home).execute("SELECT secret_hash FROM tokens")]
    # only hashes are kept: the secret (after "sa_<id>_"; it may itself hold "_") is nowhere, its
    # digest is (a short piece of the secret could occur in a hex digest by chance, so test whole)
    secret = token.split("_", 2)[2]
    assert all(secret not in row for row in stored)
    assert hashlib.sha256(secret.encode()).hexdigest() in stored


def test_protocol_and_board_endpoints(front):
    from speculator_arena.protocol.version_files import protocol_digest

    r = front.client.get("/api/protocol")
    doc = r.json()
    assert r.status_code == 200 and doc["version"] == load_protocol().version
    assert r.headers["etag"] == f'"{protocol_digest(doc["version"])}"'
    assert front.client.get("/api/protocol", headers={"If-None-Match": r.headers["etag"]}).status_code == 304
    assert front.client.get("/api/protocol", params={"version": 99}).status_code == 404
    r = front.client.get("/api/board", params={"task": "local-smollm2", "split": "dev"})
    assert r.status_code == 200 and r.json()["participants"] == []
    assert front.client.get("/api/board", params={"task": "nope"}).status_code == 404
    assert "/api/submissions" in front.client.get("/openapi.json").json()["paths"]
    # someone else's submission is not visible
    sid = front.post(submission()).json()["submission_id"]
    from speculator_arena.frontdoor.accounts import invite
    from speculator_arena.frontdoor.state import connect

    _, other = invite(connect(front.home), "bob")
    r = front.client.get(f"/api/submissions/{sid}", headers={"Authorization": f"Bearer {other}"})
    assert r.status_code == 404
    r = front.client.get(f"/api/submissions/{sid}", headers={"Authorization": f"Bearer {front.token}"})
    assert r.status_code == 200 and r.json()["status"] == "queued" and r.json()["position"] == 1


def test_unreferenced_seals_are_collected_when_old(front):
    """A sealed copy no submission names (a lost race, a killed server) goes once it is old."""
    import time

    from speculator_arena.frontdoor.intake import remove_unreferenced_seals
    from speculator_arena.frontdoor.state import connect, staging_dir
    from speculator_arena.sealed.store import TREE, seal_tree, store_dir

    kept = front.post(submission()).json()["engine_digest"]
    staged = staging_dir(front.home) / "orphan"
    (staged / TREE).mkdir(parents=True)
    (staged / TREE / "launch.sh").write_text("#!/bin/bash\n")
    orphan, _ = seal_tree(staged, "engine", "inline", front.home)
    con = connect(front.home)
    assert remove_unreferenced_seals(con, front.home) == []  # young: an intake may be about to name it
    old = time.time() - 7200
    for d in (orphan, kept):
        os.utime(store_dir(front.home) / d, (old, old))
    assert remove_unreferenced_seals(con, front.home) == [orphan]
    assert sorted(p.name for p in store_dir(front.home).iterdir()) == [kept]
