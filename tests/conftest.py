"""Shared fixtures: a temporary ARENA_HOME per test, the shared data folder, the sealed local
target, and the one real local evaluation every test directory reads (tests/real_evaluation.py)."""

from __future__ import annotations

import functools
import os
import shutil
import sys
from pathlib import Path

import pytest

pytest_plugins = [
    "pool_fixtures",  # the pools build and test-split evaluation shared by pools and board tests
    "lowb_fixtures",  # the LowBArena demo shared by its end-to-end tests
]

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("ARENA_SHARED_DATA", REPO.parent / "shared" / "data")).resolve()
sys.path.insert(0, str(Path(__file__).resolve().parent))  # real_evaluation

import real_evaluation as real  # noqa: E402
from ci_profile import full_profile  # noqa: E402  (tests/runners, put on sys.path by real_evaluation)


def pytest_sessionstart(session):
    import leftovers

    session.config._engine_ticks = leftovers.session_start_ticks()
    why = engine_refusal()
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if why and reporter is not None and not hasattr(session.config, "workerinput"):  # once, quiet or not
        reporter.write_line(f"ENGINES REFUSED from this clone, every test that starts one is skipped: {why}")


def pytest_sessionfinish(session, exitstatus):
    """No test may leave an engine behind: a process of an engine workspace, an engine's reaper or
    an engine's user still running at the end fails the run (tests/leftovers.py), and is killed."""
    import time

    import leftovers

    since = getattr(session.config, "_engine_ticks", None)
    if since is None:
        return
    left = leftovers.engine_processes(since)
    deadline = time.time() + 10  # a stop's SIGKILL is asynchronous: give the last ones a moment
    while left and time.time() < deadline:
        time.sleep(0.5)
        left = leftovers.engine_processes(since)
    if left:
        leftovers.kill(left)
        print("\nENGINE PROCESSES LEFT RUNNING AT THE END OF THE TESTS (killed now):\n  " + "\n  ".join(left))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


# The fixtures that start engines through the runner (or hand out evaluations that did): where this
# clone refuses engines, every test that uses one is skipped with the refusal.
ENGINE_FIXTURES = {
    "engine_factory",
    "real_evaluation",
    "real_home",
    "evaluated",
    "test_split_evaluation",
    "built_home",  # the runner's tests' evaluations (tests/runners/conftest.py)
    "profile",  # a staged profile for an evaluation (tests/runners/conftest.py)
    "pod",  # an engine container's supervisor (tests/runners/test_sidecar_engine.py)
    "lowb_demo",  # the LowBArena demo (tests/lowb_fixtures.py)
}


@functools.cache
def engine_refusal() -> str | None:
    """Why engines cannot run from this clone (runners/privileges.py: a root runner whose engine
    user cannot reach the venv or the package, e.g. a clone inside a 0700 `mktemp -d` folder), or
    None. Said once in the run's header; tests/runners/test_privileges.py checks the refusal."""
    from speculator_arena.runners.privileges import PrivilegeRefused, preflight

    try:
        preflight()
    except PrivilegeRefused as exc:
        return str(exc)
    return None


# What makes a test `serial` (scripts/test.sh runs those alone, one at a time, after the others ran
# on both cores): an evaluation voids when anything else uses the CPU, so every test that runs one
# (the runner's, the cluster's) or reads one made in its session runs with nothing beside it.
SERIAL_FIXTURES = ENGINE_FIXTURES | {"kube_cluster", "kube_control_plane"}
# tests/grading/: every sandboxed program runs as the one user `arena-code`, whose process limit
# counts all of them, so a fork bomb tested on one worker starves a program graded on the other
# (the runner never grades two answers at once; only a parallel test run could)
SERIAL_PATHS = ("tests/runners/", "tests/backends/test_cluster.py", "tests/grading/")


def is_serial(item) -> bool:
    rel = Path(str(item.fspath)).resolve().relative_to(REPO).as_posix()
    return rel.startswith(SERIAL_PATHS) or bool(SERIAL_FIXTURES & set(getattr(item, "fixturenames", ())))


@pytest.hookimpl(tryfirst=True)  # before `-m` selects by the markers added here
def pytest_collection_modifyitems(config, items):
    """Tests marked `full` run with ARENA_TEST_PROFILE=full only: CI's time cannot hold them
    (docs/contributors/tests.md); elsewhere they are listed as skipped, with the reason. Where this
    clone refuses engines, the tests that start one are skipped with the refusal. Tests that run or
    read an evaluation are marked `serial` (scripts/test.sh)."""
    for item in items:
        if is_serial(item):
            item.add_marker(pytest.mark.serial)
    refused = engine_refusal()
    if refused:
        skip_engines = pytest.mark.skip(reason=f"engines refused from this clone: {refused[:300]}")
        for item in items:
            if "engines" in item.keywords or ENGINE_FIXTURES & set(getattr(item, "fixturenames", ())):
                item.add_marker(skip_engines)
    if full_profile():
        return
    skip = pytest.mark.skip(reason="a full run (ARENA_TEST_PROFILE=full ./scripts/test.sh); beyond CI's time")
    for item in items:
        if "full" in item.keywords:
            item.add_marker(skip)


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


@pytest.fixture(scope="session")
def real_evaluation(tmp_path_factory, smollm2_target, request) -> real.RealEvaluation:
    """The session's one real local evaluation (tests/real_evaluation.py says what it is).

    `ARENA_REAL_HOME` (or its former name `ARENA_BOARD_REAL_HOME`) may name a warehouse that
    `python tests/real_evaluation.py DIR` made, so the minutes of a real evaluation are spent once
    across sessions; it is copied, so that no test can change it. Otherwise it runs now.
    """
    given = real.given_home()
    dest = tmp_path_factory.mktemp("real") / "arena_home"
    if given:
        try:
            real.load(given)
        except ValueError as exc:
            pytest.fail(str(exc))
        for part in ("raw", "dagster", f"pools/{real.TASK}/data_card"):
            if (given / part).is_dir():
                shutil.copytree(given / part, dest / part)
        shutil.copy(given / real.CLI_OUTPUT, dest / real.CLI_OUTPUT)
        return real.load(dest)
    try:
        import speculator_arena.runners.evaluate
        import speculator_arena.runners.harness  # noqa: F401
    except ImportError as exc:
        pytest.skip(f"the runner domain is not available to make a real evaluation: {exc}")
    built = request.getfixturevalue("built_local")  # the session's pools (pool_fixtures.py), not a second build
    return real.build(dest, smollm2_target, pools=built["home"] / "pools")


@pytest.fixture(scope="session")
def real_home(real_evaluation) -> Path:
    """The ARENA_HOME of the session's real local evaluation."""
    return real_evaluation.home
