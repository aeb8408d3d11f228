"""Three real evaluations under one participant account, for the history tests (issue 51: "a
participant with three submissions sees their history and a regression flag when the third is
slower beyond the interval").

Two of `engines/dev-ngram` and a third of `engines/attacks/dev-slow-ngram` (the same n-gram
speculation with a fixed sleep before every decoding step: honestly slower, lossless), each
through the one door (`launch.evaluate`, a spec from `spec_from_args`, as `arena evaluate
--account` builds it), in a home with the session's pools, under a staged tiny profile: no
warm-up waves, two passes of two seconds per workload, the fewest probes that leave every gate
measured, loose statistical gates (the gates are not the subject here) and the A/A error such
short passes show (below). The evaluations run one after another, so their created_at orders
them; about 2.5 minutes each on a 2-core machine that other work kept busy.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from ci_profile import ENGINE_THREADS, stage_tiny_protocol

TASK = "local-smollm2"
ACCOUNT = "acct-history"
LABEL = "history-participant"
ENGINES = ("engines/dev-ngram", "engines/dev-ngram", "engines/attacks/dev-slow-ngram")

# Two passes per workload: the bootstrap's interval needs more than one pass ratio per workload to
# have width, and the first two evaluations (one engine) must not fall outside each other's.
PROFILE = dict(
    seconds=(2, 2, 2),
    passes=2,
    # a request sent in the pass counts when it ends within the grace: on a busy machine a long
    # agent prompt's prefill alone outlasts CI's 15 s, and the pass would count nothing
    grace_seconds=60,
    # The staged version's calibrated A/A error: what two-second passes on a shared 2-core machine
    # stray by (two n-gram evaluations of this profile scored 1.049 and 0.967 there), so that the
    # first two evaluations, one engine, lie within each other's interval, as a calibration of this
    # profile would make them; the slowed engine scores about half of n-gram, far below it.
    speed_noise={"mean_abs_error": 0.05, "max_abs_error": 0.15},
)


def _args(engine: str, target: Path) -> argparse.Namespace:
    """What `arena evaluate --task T --engine E --account A --label L` parses to (its own parser)."""
    from speculator_arena.runners.evaluate import add_arguments

    p = argparse.ArgumentParser()
    add_arguments(p)
    return p.parse_args(
        ["--task", TASK, "--engine", engine, "--label", LABEL, "--account", ACCOUNT, "--kind", "ngram"]
        + ["--target", str(target)]
    )


def run_history_evaluations(built_home: dict, root: Path, monkeypatch) -> dict:
    """The three evaluations in a fresh home under `root`; returns home, version, ids, summaries."""
    from speculator_arena.dagster_project import launch
    from speculator_arena.runners.spec import spec_from_args

    home = root / "arena_home"
    home.mkdir(parents=True)
    shutil.copytree(built_home["home"] / "pools", home / "pools", symlinks=True)  # the served pool links its build
    version = stage_tiny_protocol(root / "protocol", **PROFILE)
    for k, v in {
        "ARENA_HOME": str(home),
        "ARENA_PROTOCOL_DIR": str(root / "protocol"),
        "OMP_NUM_THREADS": ENGINE_THREADS,  # the suite's engines' threads (ci_profile.py says why)
        "TOKENIZERS_PARALLELISM": "false",
    }.items():
        monkeypatch.setenv(k, v)
    summaries = []
    for engine in ENGINES:
        spec = spec_from_args(_args(engine, built_home["target"]))
        s = launch.evaluate(spec, home, rerun_contended=1, analysts=False)
        assert s.status == "measured", (engine, s.status, s.why)
        summaries.append(s)
    return {
        "home": home,
        "version": version,
        "ids": [s.evaluation_id for s in summaries],
        "summaries": summaries,
    }
