"""The host-contention sampler on this machine's real /proc: the runner's own work (its process
and its children, exited ones included) is never foreign; a process outside its tree is, unless
it is named as the engine's. Burners spend a fixed amount of CPU time (not wall time), so the
checks hold on a machine that is busy with other work too."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time

from speculator_arena.runners.contention import ContentionSampler

BURN = "import time\nwhile time.process_time() < {s}: pass\n"


def _detached_burner(cpu_seconds: float) -> int:
    """A burner re-parented away from this process's tree (its shell exits at once); its pid."""
    out = subprocess.run(
        ["sh", "-c", f"{shlex.quote(sys.executable)} -c '{BURN.format(s=cpu_seconds)}' >/dev/null 2>&1 & echo $!"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return int(out.split()[-1])


def _wait_gone(pid: int, timeout: float = 60.0) -> None:
    t = time.time()
    while time.time() - t < timeout:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    raise AssertionError(f"burner {pid} still running after {timeout} s")


def test_own_work_and_exited_children_are_not_foreign():
    sampler = ContentionSampler(0.5).start()
    before = time.process_time()
    while time.process_time() - before < 0.6:  # the runner itself
        pass
    subprocess.run([sys.executable, "-c", BURN.format(s=0.6)], check=True)  # a child that exits
    mine = time.process_time() - before
    rows = sampler.stop()
    own = sum(r["own_cpu_seconds"] for r in rows)
    assert all(r["error"] is None for r in rows) and rows[0]["cpus"] >= 1
    # the child's CPU is recovered from the runner's reaped-children time
    assert own >= mine + 0.5, (own, mine)
    spans = [(r["started_at"], r["ended_at"]) for r in rows]
    assert all(a < b for a, b in spans) and all(b == c for (_, b), (c, _) in zip(spans, spans[1:]))


def test_a_process_outside_the_trees_is_foreign_unless_it_is_the_engines():
    pid = _detached_burner(1.0)
    sampler = ContentionSampler(0.5).start()
    _wait_gone(pid)
    foreign = sum(r["foreign_cpu_seconds"] for r in sampler.stop())
    assert foreign >= 0.8, foreign

    # the same detached burner named as the engine's (EngineRun.pids names every process of the
    # engine's user): an engine that daemonizes a worker cannot make its own CPU look foreign
    pid = _detached_burner(1.0)
    sampler = ContentionSampler(0.5, pids_fn=lambda: [pid]).start()
    _wait_gone(pid)
    own = sum(r["own_cpu_seconds"] for r in sampler.stop())
    assert own >= 0.8, own
