"""Rebuilds over a served pool: a new set added by one declaration and `arena pools build`, bad
files and a pool short of sessions that fail with the file or the numbers and leave the
previous pool whole and served, and a runner that refuses a short pool."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from test_sources_as_data import FIX, _bad

from speculator_arena.cli import main
from speculator_arena.dagster_project.launch import PoolBuildFailed, build_pools
from speculator_arena.pools.api import PoolShort, load_pool

pytestmark = pytest.mark.slow
TASK = "local-smollm2"


@pytest.fixture
def home(built_local, tmp_path, monkeypatch):
    """A copy of the session's built home (the served link and its build), without the key:
    rebuilds here leave the copied hidden pool as it is."""
    h = tmp_path / "home"
    shutil.copytree(built_local["home"] / "pools", h / "pools", symlinks=True)
    monkeypatch.delenv("ARENA_POOL_KEY", raising=False)
    monkeypatch.setenv("ARENA_HOME", str(h))
    return h


def _snapshot(home: Path) -> dict:
    root = home / "pools" / TASK
    files = {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }
    return {
        "link": str(root.resolve()),
        "files": files,
        "builds": sorted(p.name for p in (home / "pools" / ".builds" / TASK).iterdir()),
    }


def _decl(tmp_path: Path, sets: str, extends: bool = True) -> Path:
    p = tmp_path / "sets.yaml"
    p.write_text(("extends: default\n" if extends else "") + "sets:\n" + sets)
    return p


def test_a_new_set_by_one_declaration_and_arena_pools_build(home, tmp_path, capsys):
    decl = _decl(
        tmp_path,
        f"""  - name: fixture questions (MT-bench style)
    path: {FIX / "questions.jsonl"}
    format: questions-jsonl
    family: chat
    id_prefix: mtq
    license: Apache-2.0
    weight: 0.4
  - name: fixture agent run (.traj.json)
    path: {FIX / "traj"}
    format: mini-swe-agent-traj
    family: agent
    id_prefix: cols
    license: MIT
""",
    )
    before = _snapshot(home)
    assert main(["pools", "build", "--task", TASK, "--sources", str(decl), "--home", str(home)]) == 0
    after = _snapshot(home)
    assert after["link"] != before["link"] and before["link"].rsplit("/", 1)[1] in after["builds"]
    card = json.loads((home / "pools" / TASK / "data_card" / f"{TASK}.json").read_text())
    sets = {s["name"]: s for s in card["sources"]}
    assert (
        sets["fixture questions (MT-bench style)"]["used"] == 12
        and sets["fixture questions (MT-bench style)"]["weight"] == 0.4
    )
    assert sets["fixture agent run (.traj.json)"]["used"] == 3
    assert "tool messages sent as user turns" in sets["fixture agent run (.traj.json)"]["notes"][0]
    md = (home / "pools" / TASK / "data_card" / f"{TASK}.md").read_text()
    assert "| fixture questions (MT-bench style) | chat (weight 0.4) |" in md
    dev = load_pool(TASK, "dev", home=home)
    questions = [s for s in dev.sessions + dev.warmup_sessions if s.source.startswith("mtq:")]
    assert questions and all(t.kind == "user" for s in questions for t in s.turns)
    assert any(len(s.turns) == 2 for s in questions)  # both questions kept, each its own turn
    assert "enough_sessions_for_every_pass: passed" in capsys.readouterr().out


@pytest.mark.parametrize("kind", ["invalid-utf8", "empty", "truncated", "huge"])
def test_a_failed_rebuild_names_the_file_and_leaves_the_pool_served(home, tmp_path, monkeypatch, kind):
    monkeypatch.setenv("ARENA_MAX_RECORD_BYTES", "4096")
    path, fmt, says = _bad(tmp_path, kind)
    decl = _decl(
        tmp_path,
        f"  - {{name: broken, path: {path}, format: {fmt}, family: chat, id_prefix: b, license: MIT}}\n",
        extends=False,
    )
    before = _snapshot(home)
    with pytest.raises(PoolBuildFailed) as exc:
        build_pools(TASK, home=str(home), sources=str(decl))
    assert str(path) in str(exc.value) and says in str(exc.value), str(exc.value)
    assert _snapshot(home) == before  # same link, same files, no build folder left
    assert len(load_pool(TASK, "dev", home=home).sessions) > 0


def test_a_pool_from_too_few_sources_fails_its_check_with_the_numbers(home, tmp_path):
    decl = _decl(
        tmp_path,
        f"""  - {{name: few agents, path: {FIX / "swe_trajectories.jsonl"}, format: mini-swe-agent-jsonl, family: agent,
     id_prefix: fa, license: MIT}}
  - {{name: few chats, path: {FIX / "messages.jsonl"}, format: messages-jsonl, family: chat, id_prefix: fc, license: MIT}}
  - {{name: few questions, path: {FIX / "questions.jsonl"}, format: questions-jsonl, family: chat, id_prefix: fq,
     license: MIT}}
""",
        extends=False,
    )
    before = _snapshot(home)
    with pytest.raises(PoolBuildFailed) as exc:
        build_pools(TASK, home=str(home), sources=str(decl))
    msg = str(exc.value)
    assert "enough_sessions_for_every_pass" in msg and "needed" in msg and "sessions per pass available" in msg, msg
    assert _snapshot(home) == before


def test_the_runner_refuses_a_short_pool_and_stores_nothing(home, tmp_path):
    from speculator_arena.runners.queued import queue
    from speculator_arena.runners.spec import EvaluationSpec
    from speculator_arena.warehouse import Warehouse

    dev = home / "pools" / TASK / "dev" / "sessions.jsonl"
    lines = dev.read_text().splitlines(keepends=True)
    dev.write_text("".join(lines[:10]))
    with pytest.raises(PoolShort) as exc:
        load_pool(TASK, "dev", home=home)
    team = exc.value.numbers["workloads"]["team"]
    assert team["available_per_pass"] < team["needed_per_pass"] and "team:" in str(exc.value)
    assert len(load_pool(TASK, "dev", home=home, require=False).sessions) == 10  # inspectable
    repo = Path(__file__).resolve().parents[2]
    spec = EvaluationSpec(task_id=TASK, engine=str(repo / "engines" / "dev-ngram"), evaluation_id="short-pool")
    with pytest.raises(PoolShort):
        queue(spec, home)
    assert not (Warehouse(home).raw / "evaluations").exists()


def test_the_committed_card_is_what_a_build_writes_today(built_local):
    """data_cards/local-smollm2.json equals the card of this session's build in everything
    but its time and the hidden pool's counts (the committed card is built without the key)."""
    repo = Path(__file__).resolve().parents[2]
    committed = json.loads((repo / "data_cards" / f"{TASK}.json").read_text())
    built = json.loads((built_local["root"] / "data_card" / f"{TASK}.json").read_text())
    for k in (
        "sources",
        "family_mix",
        "fitted",
        "reference_sources",
        "public_pool",
        "cache_hit_targets",
        "busy_lanes",
        "diversity",
        "window",
        "structure_digest",
        "protocol_version",
    ):
        assert committed[k] == built[k], k
    assert committed["counts"]["dev"] == built["counts"]["dev"]
