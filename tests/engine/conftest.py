"""Engine fixtures: real engine directories started as subprocesses on free ports.

The stock engine lives for the whole session (several modules compare against it); the others
are started by the module that needs them and stopped at its end, so at most a few ~1 GB
float32 engines are alive at once on the 2-core CI machine.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from speculator_arena.engine.local import LocalEngine

REPO = Path(__file__).resolve().parents[2]
ENGINES = REPO / "engines"
CPU_ENV = {"DEV_ENGINE_THREADS": "1", "OMP_NUM_THREADS": "1", "DEV_ENGINE_DEVICE": "cpu"}


@pytest.fixture(scope="session")
def start_engine(smollm2_target, tmp_path_factory):
    logs = tmp_path_factory.mktemp("engine_logs")
    started: list[LocalEngine] = []

    def start(name: str, max_num_seqs: int = 3, env: dict | None = None) -> LocalEngine:
        eng = LocalEngine(
            ENGINES / name,
            smollm2_target,
            max_model_len=2048,
            max_num_seqs=max_num_seqs,
            served_name="smollm2",
            env={**CPU_ENV, **(env or {})},
            log_path=logs / f"{name.replace('/', '_')}-{len(started)}.log",
        )
        eng.start()
        started.append(eng)
        return eng

    yield start
    for eng in started:
        eng.stop()


@pytest.fixture(scope="session")
def stock_engine(start_engine) -> LocalEngine:
    return start_engine("dev-stock")


@pytest.fixture(scope="session")
def target_model(smollm2_target):
    """The target loaded in the test process (float32, CPU): the ground truth engines are held to."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(1)
    model = AutoModelForCausalLM.from_pretrained(str(smollm2_target), dtype=torch.float32).eval()
    return model, AutoTokenizer.from_pretrained(str(smollm2_target))
