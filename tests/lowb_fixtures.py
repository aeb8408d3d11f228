"""The one LowBArena demo every LowBArena end-to-end test reads: `arena demo --task lowb-smollm2`
run once per session, as a user runs it (the CLI in a process of its own), in a home of its own.

CI runs two of its references, BF16's A/A and the lossy 2-bit one (the gates must catch it), with
the workloads, items and probe cut to CI_SIZES (two passes kept: the four starts C S S C);
ARENA_TEST_PROFILE=full runs all four at the task's own sizes, where the A/A is held to the
calibrated noise. The version is LowBArena's CI profile (ci_profile.py `stage_lowb_ci_protocol`:
the shipped limits, CI's steal allowance), staged through ARENA_PROTOCOL_DIR as operators stage
versions.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from ci_profile import full_profile, stage_lowb_ci_protocol

CI_REFERENCES = ["bf16", "rtn-w2-g64-lossy"]
# What CI affords: about a third of the embedded task's tokens per evaluation (each evaluation
# about 90 s instead of about 220 s on two cores); every limit stays the shipped one.
CI_SIZES = {
    "workloads": {
        "serve": {"requests": 2, "prompt_tokens": 256, "generated_tokens": 16, "at_once": 2, "passes": 2},
        "interactive": {"requests": 2, "prompt_tokens": 128, "generated_tokens": 8, "at_once": 1, "passes": 2},
        "long": {"requests": 2, "prompt_tokens": 512, "generated_tokens": 8, "at_once": 2, "passes": 2},
    },
    "items": {"max_tokens": 32, "per_domain": {"dev": 2, "test": 2}, "ruler_context_tokens": 1536},
    "kl_probe": {"prompts": {"dev": 4, "test": 4}, "max_prompt_tokens": 128},
}


@dataclass
class LowbDemo:
    home: Path
    protocol_dir: Path
    version: int
    rc: int
    stdout: str
    stderr: str
    seconds: float
    references: list[str]


@pytest.fixture(scope="session")
def lowb_demo(tmp_path_factory, smollm2_target) -> LowbDemo:
    root = tmp_path_factory.mktemp("lowb_demo")
    protocol_dir = root / "protocol"
    version = stage_lowb_ci_protocol(protocol_dir, **({} if full_profile() else CI_SIZES))
    home = root / "home"
    refs = None if full_profile() else CI_REFERENCES
    env = dict(os.environ, ARENA_HOME=str(home), ARENA_PROTOCOL_DIR=str(protocol_dir))
    argv = [str(Path(sys.executable).parent / "arena"), "demo", "--task", "lowb-smollm2"]
    if refs:
        argv += ["--only", *refs]
    t0 = time.time()
    p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=2400)
    return LowbDemo(
        home=home,
        protocol_dir=protocol_dir,
        version=version,
        rc=p.returncode,
        stdout=p.stdout,
        stderr=p.stderr,
        seconds=time.time() - t0,
        references=refs or ["bf16", "rtn-w8", "rtn-w4-g32", "rtn-w2-g64-lossy"],
    )
