"""Nothing an engine starts outlives it: a detached child (double fork and setsid, spinning the CPU)
is the engine's, counted in its processes while it runs and killed with it, whatever ends the
start (a stop, SIGKILL after the grace, the engine dying, never healthy), on both paths: the
engine's own user (a root runner) and the runner's user (ARENA_NO_PRIVILEGE_DROP, a laptop).
Real processes, the stdlib stand-in engine (sse_engine.py)."""

from __future__ import annotations

import os
import re
import sys
import time

import pytest

from speculator_arena.runners import reaper
from speculator_arena.runners.lifecycle import EngineRun, free_port
from speculator_arena.runners.privileges import engine_runtime_paths

ROOT = os.geteuid() == 0
PATHS = [pytest.param(True, id="engine-user"), pytest.param(False, id="runner-user")]


def _start(src, tmp_path, drop: bool) -> EngineRun:
    er = EngineRun(
        engine="candidate",
        purpose="timed",
        start_index=1,
        src=src,
        env_vars={"PATH": "/usr/bin:/bin", "ARENA_PYTHON": sys.executable, "TARGET": str(tmp_path)},
        port=free_port(),
        private_root=tmp_path / "private",
        drop_privileges=drop,
    )
    er.start(engine_runtime_paths())
    return er


def _spinner(er: EngineRun, within_s: float = 20) -> int:
    deadline = time.time() + within_s
    while time.time() < deadline:
        m = re.search(r"SPIN pid=(\d+)", er.log_path.read_text(errors="replace"))
        if m:
            return int(m.group(1))
        time.sleep(0.05)
    raise AssertionError(f"the engine planted no spinner: {er.log_text()[-2000:]}")


def _gone(pid: int, within_s: float = 5) -> bool:
    deadline = time.time() + within_s
    while reaper.alive(pid) and time.time() < deadline:
        time.sleep(0.05)
    return not reaper.alive(pid)


@pytest.fixture(params=PATHS)
def drop(request):
    if request.param and not ROOT:
        pytest.skip("the engine's own user needs a root runner")
    return request.param


def _detached(pid: int, er: EngineRun) -> bool:
    """It left the engine's session and group: no signal to the engine's group reaches it."""
    return os.getsid(pid) != os.getsid(er.proc.pid) and os.getpgid(pid) != er.proc.pid


def test_a_detached_child_is_counted_and_stopped_with_the_engine(engine_factory, tmp_path, drop):
    er = _start(engine_factory("eng", "idle_spin"), tmp_path, drop)
    assert er.wait_healthy(20), er.log_text()[-2000:]
    spin = _spinner(er)
    assert _detached(spin, er) and reaper.alive(spin)
    assert spin in er.pids()  # its CPU is the engine's in the contention checks, not the host's
    assert er.unprivileged == drop
    er.stop(10)
    assert er.stop_signal == "SIGTERM", er.stop_note
    assert _gone(spin), "the engine's detached child outlived its stop"


def test_sigkill_after_the_grace_kills_the_detached_child_too(engine_factory, tmp_path, drop):
    er = _start(engine_factory("eng", "idle_spin,ignore_term"), tmp_path, drop)
    assert er.wait_healthy(20), er.log_text()[-2000:]
    spin = _spinner(er)
    er.stop(1)
    assert er.stop_signal == "SIGKILL"
    assert _gone(spin), "SIGKILL to the engine's group left its detached child running"


def test_an_engine_that_dies_takes_its_detached_child_with_it(engine_factory, tmp_path, drop):
    er = _start(engine_factory("eng", "idle_spin,die_at_start"), tmp_path, drop)
    spin = _spinner(er)
    assert not er.wait_healthy(20) and er.died
    assert _gone(spin), "the dead engine's detached child kept running"
    assert er.proc.returncode == 3  # the engine's own status, through its reaper
    er.stop(5)
    assert er.stop_signal == "exited"


def test_an_engine_never_healthy_is_stopped_whole(engine_factory, tmp_path, drop):
    er = _start(engine_factory("eng", "idle_spin,never_healthy"), tmp_path, drop)
    spin = _spinner(er)
    assert not er.wait_healthy(1.5)
    er.stop(5)
    assert _gone(spin)
    assert not er.workspace.exists()
