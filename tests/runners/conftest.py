"""Fixtures of the runner's tests: real engine directories around a stdlib SSE server, real
sessions from the shared chat data, the real Qwen3 tokenizer from the shared data."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from speculator_arena.pools.model import Session, Turn

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # ci_profile, sse_engine
from stand_in import make_engine  # noqa: E402


@pytest.fixture
def engine_factory(tmp_path):
    return lambda name, mode="normal", **env: make_engine(tmp_path / "engines", name, mode, env or None)


@pytest.fixture(scope="session")
def qwen_tokenizer_dir(shared_data) -> Path:
    return shared_data / "tokenizers" / "qwen3"


@pytest.fixture(scope="session")
def chat_sessions(shared_data) -> list[Session]:
    """Sessions from real ShareGPT conversations (their user turns, short replies asked)."""
    out = []
    with open(shared_data / "chat" / "sharegpt_multiturn_500.jsonl") as fh:
        for i, line in enumerate(fh):
            if i >= 40:
                break
            obj = json.loads(line)
            users = [m["content"][:400] for m in obj["messages"] if m["role"] == "user"][:4]
            out.append(
                Session(
                    session_id=f"s{i}",
                    family="chat",
                    app="chat",
                    system_prompt="You are helpful.",
                    tools=[],
                    turns=[Turn("user", u, 16, 0.0) for u in users],
                    footprint_tokens=100,
                    source=obj["id"],
                )
            )
    return out


@pytest.fixture(scope="session")
def built_home(tmp_path_factory, built_local):
    """One ARENA_HOME with the local task's real pools and sealed target, made once per session.

    Every evaluation test writes its own evaluation ids into it. The pools are the session's one
    build (tests/pool_fixtures.py, built under the shipped protocol: the CI profiles change only
    clocks and probe counts, not lanes), copied: a second build would cost CI a minute or more.
    """
    import shutil

    from speculator_arena.checkpoints import prepare_checkpoint

    home = tmp_path_factory.mktemp("arena_home_runners")
    shutil.copytree(built_local["home"] / "pools", home / "pools", symlinks=True)  # the served pool links its build
    target = prepare_checkpoint("local-smollm2", home=home)
    return {"home": home, "target": target}


@pytest.fixture(scope="session")
def evaluated(built_home, tmp_path_factory):
    """The attack module's evaluations (tests/runners/attack_runs.py), run once per session and
    shared by test_attacks.py and test_calibration.py."""
    from attack_runs import run_attack_evaluations

    return run_attack_evaluations(built_home, tmp_path_factory)


@pytest.fixture
def profile(tmp_path, monkeypatch):
    """Stage a CI protocol profile for this test: profile(**task_overrides) -> version."""
    from ci_profile import stage_ci_protocol

    def stage(**extra):
        d = tmp_path / "protocol"
        v = stage_ci_protocol(d, **extra)
        monkeypatch.setenv("ARENA_PROTOCOL_DIR", str(d))
        return v

    return stage
