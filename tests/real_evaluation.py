"""The one real local evaluation a test session shares: what it is, how it is made, how it is reused.

`arena pools build` for the embedded task (in a test session: the session's pools build,
tests/pool_fixtures.py, copied), then `arena evaluate` of the development engine
(n-gram speculation, `engines/dev-ngram`) against the stock engine, both serving SmolLM2-135M on
CPU, under the shipped protocol (the local task's own short passes and few probes): the CLI
materializes the evaluation's partition through Dagster's asset on the instance under
`ARENA_HOME/dagster`. It takes a few minutes on two cores, so a pytest session runs it once
(`real_evaluation` in tests/conftest.py) and every test directory reads the same warehouse.

Made once by hand, it can be reused by any number of sessions:

    python tests/real_evaluation.py /tmp/real_home      # prints the evaluation's summary
    ARENA_REAL_HOME=/tmp/real_home ./scripts/test.sh tests/scoring/test_independent_recompute.py

(`ARENA_BOARD_REAL_HOME`, the variable's former name, is read too.)
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "runners"))
from ci_profile import ENGINE_THREADS  # noqa: E402

TASK = "local-smollm2"
ENGINE = "engines/dev-ngram"
LABEL = "dev-ngram (real)"
ACCOUNT = "acct-real"
# What `arena evaluate` printed (its JSON summary), kept beside the warehouse it describes.
CLI_OUTPUT = "arena_evaluate.json"
HOME_VARIABLES = ("ARENA_REAL_HOME", "ARENA_BOARD_REAL_HOME")


@dataclass(frozen=True)
class RealEvaluation:
    home: Path  # ARENA_HOME: raw/, pools/<task>/data_card, dagster/
    evaluation_id: str
    cli_output: dict  # `arena evaluate`'s JSON summary


def _run(cmd: list[str], home: Path, what: str, timeout: int) -> str:
    # The shipped protocol, whatever a test staged; a fresh Dagster instance under ARENA_HOME.
    env = {k: v for k, v in os.environ.items() if k not in ("ARENA_PROTOCOL_DIR", "DAGSTER_HOME")}
    env.update(ARENA_HOME=str(home), OMP_NUM_THREADS=ENGINE_THREADS, TOKENIZERS_PARALLELISM="false")
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"{what} failed (rc {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}")
    return proc.stdout


def build(home: Path, target: Path | None = None, pools: Path | None = None, attempts: int = 3) -> RealEvaluation:
    """Build the pools into `home` (or copy `pools`, a home's pools folder that a build of this
    session made), run the evaluation there, keep the CLI's summary beside it. An evaluation void
    because the machine was contended is made again, `attempts` times in all."""
    home = Path(home)
    arena = [sys.executable, "-m", "speculator_arena.cli"]
    if pools is not None:
        shutil.copytree(pools, home / "pools", symlinks=True)  # the served pool is a link into its builds
    else:
        _run(arena + ["pools", "build", "--task", TASK, "--home", str(home)], home, "arena pools build", 1200)
    out = _run(
        arena
        + [
            "evaluate",
            "--task",
            TASK,
            "--engine",
            ENGINE,
            "--split",
            "dev",
            "--label",
            LABEL,
            "--account",
            ACCOUNT,
            "--kind",
            "ngram",
            "--home",
            str(home),
        ]
        + (["--target", str(target)] if target else []),
        home,
        "arena evaluate (the real local evaluation)",
        2400,
    )
    summary = json.loads(out[out.index("{") :])
    if summary["status"] == "void" and str(summary.get("void_reason")).startswith("host contended") and attempts > 1:
        # SCORING.md "Host contention": the operator re-runs a contended evaluation. CI's VM
        # steals CPU time now and then; the shipped 5% limit stays, the run is made again.
        print(f"[real evaluation] void ({summary['void_reason']}): re-run in a fresh home", file=sys.stderr)
        shutil.rmtree(home)
        home.mkdir(parents=True)
        return build(home, target, pools, attempts=attempts - 1)
    (home / CLI_OUTPUT).write_text(json.dumps(summary, indent=1))
    return RealEvaluation(home, summary["evaluation_id"], summary)


def given_home() -> Path | None:
    for name in HOME_VARIABLES:
        if os.environ.get(name):
            return Path(os.environ[name])
    return None


def load(home: Path) -> RealEvaluation:
    """A warehouse `build` made; raises ValueError saying what is missing when it is not one."""
    home = Path(home)
    summary_path = home / CLI_OUTPUT
    if not (home / "raw" / "evaluations").is_dir() or not summary_path.is_file():
        raise ValueError(
            f"{home} is not a warehouse made by `python tests/real_evaluation.py {home}` "
            f"(raw/evaluations and {CLI_OUTPUT} are needed)"
        )
    summary = json.loads(summary_path.read_text())
    return RealEvaluation(home, summary["evaluation_id"], summary)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(f"usage: python {sys.argv[0]} ARENA_HOME (an empty or new directory)")
    print(json.dumps(build(Path(sys.argv[1])).cli_output, indent=1))
