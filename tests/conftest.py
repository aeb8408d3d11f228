"""Shared fixtures: a temporary ARENA_HOME per test, the shared data folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest_plugins = ["pool_fixtures"]   # the pools build and test-split evaluation shared by pools and board tests

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("ARENA_SHARED_DATA", REPO.parent / "shared" / "data")).resolve()


@pytest.fixture
def arena_home(tmp_path, monkeypatch) -> Path:
    home = tmp_path / "arena_home"
    monkeypatch.setenv("ARENA_HOME", str(home))
    return home


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.fail(f"shared data not found at {SHARED_DATA}; set ARENA_SHARED_DATA")
    return SHARED_DATA


@pytest.fixture(scope="session")
def smollm2_target(tmp_path_factory) -> Path:
    """The sealed local-smollm2 target directory (SmolLM2-135M-Instruct, float32 safetensors,
    tokenizer and chat template), prepared once per test session. The first build on a machine
    converts the GGUF (~20 s); later sessions copy it from the checkpoint cache in about a second."""
    from speculator_arena.checkpoints import prepare_checkpoint

    return prepare_checkpoint("local-smollm2", home=tmp_path_factory.mktemp("smollm2_home"))
