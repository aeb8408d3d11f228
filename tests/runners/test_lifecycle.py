"""Engine lifecycle against real processes: start as the engine user, health, stop, cleanup."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from speculator_arena.runners.lifecycle import (
    EngineRun,
    EngineStartError,
    _proc_pids,
    detect_offload,
    free_port,
    unpack_engine,
)

ROOT = os.geteuid() == 0


def _run(src, tmp_path, **env) -> EngineRun:
    import sys

    e = {
        "PATH": "/usr/bin:/bin",
        "ARENA_PYTHON": sys.executable,
        "TARGET": str(tmp_path),
        "MAX_NUM_SEQS": "3",
        "GPU_MEMORY_UTILIZATION": "0.90",
    }
    e.update(env)
    return EngineRun(
        engine="candidate",
        purpose="timed",
        start_index=1,
        src=src,
        env_vars=e,
        port=free_port(),
        private_root=tmp_path / "private",
    )


def test_start_health_stop_and_cleanup(engine_factory, tmp_path):
    private = tmp_path / "warehouse_raw"
    private.mkdir(mode=0o700)
    src = engine_factory("eng", "normal hog_shm", PROBE_READ=str(private))
    er = _run(src, tmp_path)
    er.start(readable=[])
    assert er.wait_healthy(20)
    pids = er.pids()
    assert pids and er.alive()
    log = er.log_path.read_text()
    assert "MAX_NUM_SEQS=3" in log
    if ROOT:
        assert er.unprivileged and er.user == "arena-engine", er.privilege_note
        assert f"uid={os.getuid()}" not in log
        assert "denied" in log  # the engine user cannot read the arena's private directory
        shm = [p for p in Path("/dev/shm").iterdir() if p.name.startswith("arena-test-")]
        assert shm and all(p.stat().st_uid == er.uid for p in shm)
    # a generous grace: the engine exits on SIGTERM at once, and a loaded machine (a full CI run)
    # once took longer than 5 s to let it, and a fresh-clone CI run longer than 15 s
    # (test_sigkill_after_grace tests the SIGKILL path)
    er.stop(30)
    assert er.stop_signal == "SIGTERM", er.stop_note
    assert not er.alive() and not _proc_pids(pgid=er.proc.pid)
    assert not er.workspace.exists()
    if ROOT:
        assert not _proc_pids(uid=er.uid)
        assert not [p for p in Path("/dev/shm").iterdir() if p.name.startswith("arena-test-")]
    row = er.row("e1", idle_ok=None, idle_s=None)
    assert row["healthy_at"] >= row["started_at"] and row["unprivileged"] == ROOT
    assert row["offload_detected"] is False


def test_an_engine_started_while_the_runner_ignores_sigterm_still_stops_on_it(engine_factory, tmp_path):
    """An ignored signal survives fork and exec: a CI run once found the stand-in engine ignoring
    SIGTERM (its /proc status), killed after the grace. The engine starts with default signals."""
    import signal

    er = _run(engine_factory("eng", "normal"), tmp_path)
    old = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        er.start(readable=[])
    finally:
        signal.signal(signal.SIGTERM, old)
    assert er.wait_healthy(20)
    ignored = int(
        next(x for x in Path(f"/proc/{er.proc.pid}/status").read_text().splitlines() if x.startswith("SigIgn")).split()[
            1
        ],
        16,
    )
    assert not ignored & (1 << (signal.SIGTERM - 1))
    er.stop(30)
    assert er.stop_signal == "SIGTERM", er.stop_note


def test_sigkill_after_grace(engine_factory, tmp_path):
    er = _run(engine_factory("stubborn", "ignore_term"), tmp_path)
    er.start(readable=[])
    assert er.wait_healthy(20)
    t0 = time.time()
    er.stop(1.5)
    assert er.stop_signal == "SIGKILL"
    assert time.time() - t0 >= 1.4
    assert not _proc_pids(pgid=er.proc.pid)


def test_never_healthy_times_out(engine_factory, tmp_path):
    er = _run(engine_factory("mute", "never_healthy"), tmp_path)
    er.start(readable=[])
    t0 = time.time()
    assert not er.wait_healthy(2.0)
    assert 1.9 <= time.time() - t0 < 6
    assert er.healthy_at is None and er.alive()
    er.stop(5)
    assert not er.alive()


def test_offload_flag_from_startup_log(engine_factory, tmp_path):
    er = _run(engine_factory("offl", "normal offload"), tmp_path)
    er.start(readable=[])
    assert er.wait_healthy(20)
    er.stop(5)
    row = er.row("e1", idle_ok=None, idle_s=None)
    assert row["offload_detected"] is True and "cpu_offload_gb=8" in row["offload_evidence"]
    assert detect_offload("cpu_offload_gb=0 swap_space=4") == (False, None)


def test_unpack_rejects_bad_engines(tmp_path):
    (tmp_path / "noscript").mkdir()
    with pytest.raises(EngineStartError, match="no launch.sh"):
        unpack_engine(tmp_path / "noscript", tmp_path / "out1")
    (tmp_path / "x.tar.gz").write_bytes(b"not a tarball")
    with pytest.raises(EngineStartError, match="cannot be extracted"):
        unpack_engine(tmp_path / "x.tar.gz", tmp_path / "out2")


def test_unpack_tarball(engine_factory, tmp_path):
    import tarfile

    src = engine_factory("tarred")
    tgz = tmp_path / "e.tar.gz"
    with tarfile.open(tgz, "w:gz") as tf:
        tf.add(src, arcname="tarred")
    d = unpack_engine(tgz, tmp_path / "out")
    assert (d / "launch.sh").is_file() and (d / "sse_engine.py").is_file()


def test_without_own_user_only_the_engines_new_shm_is_removed(engine_factory, tmp_path):
    """An engine run as the runner's user: its new /dev/shm files go; others' (held open) stay."""
    mine = Path("/dev/shm") / f"arena-test-keep-{os.getpid()}"
    with open(mine, "wb") as held:
        held.write(b"keep")
        er = _run(engine_factory("shm", "normal hog_shm"), tmp_path)
        er.drop_privileges = False
        er.start(readable=[])
        try:
            assert er.wait_healthy(20)
            assert not er.unprivileged and er.privilege_note
            engine_files = [
                p for p in Path("/dev/shm").iterdir() if p.name.startswith("arena-test-") and "keep" not in p.name
            ]
            assert engine_files
        finally:
            er.stop(5)
        assert mine.exists()
        assert not any(p.exists() for p in engine_files)
    mine.unlink()
