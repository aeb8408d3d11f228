"""One real build of the local-smollm2 pools (Dagster, in-process) shared by the pool tests,
and one real test-split evaluation on it shared by the hidden-text tests (pools, board).

Why session-scoped: a build reads the 125 MB ShareGPT file, fits structure and embeds texts
(about a minute on two cores); every test then reads the same built pools. Registered as a
plugin in tests/conftest.py so tests/dashboards can use the same evaluation.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

KEY = "test-operator-key-7f3a"


@pytest.fixture(scope="session")
def built_local(tmp_path_factory, shared_data):
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    home = tmp_path_factory.mktemp("pools_home")
    para_path = home.parent / "paraphrases.jsonl"
    saved = {
        k: os.environ.get(k)
        for k in ("ARENA_HOME", "ARENA_POOL_KEY", "ARENA_PARAPHRASES", "ARENA_SHARED_DATA", "ARENA_EMBED_CACHE")
    }
    os.environ.update(
        {
            "ARENA_HOME": str(home),
            "ARENA_POOL_KEY": KEY,
            "ARENA_PARAPHRASES": str(para_path),
            "ARENA_SHARED_DATA": str(shared_data),
            # one embedding cache for every build of the session (the qwen3-8b test reuses it), and
            # of every process of one scripts/test.sh run (ARENA_TEST_SHARED: its two pytest runs
            # and their workers)
            "ARENA_EMBED_CACHE": str(Path(os.environ.get("ARENA_TEST_SHARED") or home.parent) / "embeddings.npz"),
        }
    )
    try:
        from speculator_arena.pools.builder.candidates import split_candidates
        from speculator_arena.pools.builder.context import BuildContext
        from speculator_arena.pools.hashing import keyed_u

        # The operators' paraphrase file: rewrite the first question of the hidden reserve's
        # chat conversations that the key ranks first (the ones the hidden pool will take).
        ctx = BuildContext("local-smollm2", shared_data, home)
        _, reserve = split_candidates(ctx)
        chats = sorted((c for c in reserve if c.family == "chat"), key=lambda c: keyed_u(KEY.encode(), c.source_id))[
            :200
        ]
        lines = [
            {
                "source": c.source_id,
                "user_turn": 0,
                "text": f"Paraphrased by the operators (#{i}): in other words, {c.user_turns()[0][:60]}",
            }
            for i, c in enumerate(chats)
        ]
        para_path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
        result = None  # the build's Dagster result (tests/pools read it); None where the pools were copied
        if not (os.environ.get("ARENA_TEST_POOLS_FROM_SHARED") == "1" and _reuse(home)):
            from speculator_arena.dagster_project.launch import build_pools

            result = build_pools("local-smollm2", data=str(shared_data), home=str(home))
            _publish(home)
        yield {
            "embed_cache": Path(os.environ["ARENA_EMBED_CACHE"]),
            "home": Path(home),
            "result": result,
            "paraphrases": lines,
            "root": Path(home) / "pools" / "local-smollm2",
        }
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _shared_copy() -> Path | None:
    shared = os.environ.get("ARENA_TEST_SHARED")
    return Path(shared) / "local-smollm2-pools" if shared else None


def _publish(home: Path) -> None:
    """Leave this build's pools in ARENA_TEST_SHARED (scripts/test.sh's folder for one run), for the
    run's second half: renamed into place whole, so a reader never sees half of one."""
    dest = _shared_copy()
    if dest is None or dest.exists():
        return
    import shutil
    import tempfile

    tmp = Path(tempfile.mkdtemp(dir=dest.parent, prefix=".pools-"))
    shutil.copytree(Path(home) / "pools", tmp / "pools", symlinks=True)  # the served pool links its build
    try:
        tmp.rename(dest)
    except OSError:  # another worker's copy landed first: the same build inputs, keep that one
        shutil.rmtree(tmp, ignore_errors=True)


def _reuse(home: Path) -> bool:
    """The serial half of scripts/test.sh (ARENA_TEST_POOLS_FROM_SHARED=1) copies the pools the first
    half built from the same data, key and paraphrases, instead of a second build (a minute on two
    cores). Its tests read the pools, not the build's Dagster result (None here): the build's own
    checks are the first half's (tests/pools). False when there is nothing to copy."""
    src = _shared_copy()
    if src is None or not (src / "pools").is_dir():
        return False
    import shutil

    shutil.copytree(src / "pools", Path(home) / "pools", symlinks=True)
    return True


@pytest.fixture(scope="session")
def test_split_evaluation(built_local, smollm2_target, tmp_path_factory):
    """A real evaluation of the hidden `test` split: the runner (`python -m
    speculator_arena.runners.evaluate`, under the CI profile) drives an engine that echoes the
    words of each prompt's last user message (tests/runners/sse_engine.py), as models echo
    hidden prompts, against itself as stock; it ends by refreshing the analysts' database.
    Returns the home and the evaluation id."""
    import subprocess
    import sys

    tests = Path(__file__).resolve().parent
    sys.path.insert(0, str(tests / "runners"))
    from ci_profile import stage_ci_protocol
    from stand_in import make_engine

    engine = make_engine(tmp_path_factory.mktemp("echo_engine"), "echo")
    protocol = tmp_path_factory.mktemp("ci_protocol")
    stage_ci_protocol(protocol, passes_per_workload=1)  # the pages' text is under test, not speeds
    home = built_local["home"]
    eid = "hidden-text-test-split"
    env = dict(
        os.environ,
        ARENA_HOME=str(home),
        ARENA_PROTOCOL_DIR=str(protocol),
        OMP_NUM_THREADS="1",
        TOKENIZERS_PARALLELISM="false",
    )
    cmd = [
        sys.executable,
        "-m",
        "speculator_arena.runners.evaluate",
        "--task",
        "local-smollm2",
        "--split",
        "test",
        "--engine",
        str(engine),
        "--stock-engine",
        str(engine),
        "--evaluation-id",
        eid,
        "--label",
        "echo (test split)",
        "--account",
        "acct-hidden",
        "--target",
        str(smollm2_target),
        "--home",
        str(home),
    ]
    proc = subprocess.run(cmd, cwd=tests.parent, env=env, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(
            f"the test-split evaluation failed (rc {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        )
    summary = json.loads(proc.stdout[proc.stdout.index("{") :])
    if summary["status"] != "measured":
        from speculator_arena.warehouse import Warehouse

        starts = Warehouse(home).read_table("engine_starts", eid).to_pylist()
        logs = "\n".join(
            f"{r['engine']} {r['purpose']} exit {r['exit_code']}: {(r['log_text'] or '')[-1500:]}"
            for r in starts
            if r["died"]
        )
        raise AssertionError(f"{summary}\n{proc.stderr[-2000:]}\n{logs}")
    return {"home": Path(home), "evaluation_id": eid, "summary": summary, "log": proc.stderr}
