"""Engines run unprivileged or not at all (runners/privileges.py). An arena installed where the
engine's user cannot reach it is refused at once by every command that would start an engine,
with the directory that blocks and the fix, before anything is built or stored; a participant's
submission runs as the runner's own user only where the operator says so. The install is real: a
venv and the package inside a 0700 folder (what `mktemp -d` makes), run as a fresh process."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

import pytest

from speculator_arena.runners import privileges
from speculator_arena.runners.lifecycle import EngineRun, free_port

REPO = Path(__file__).resolve().parents[2]
ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="only a root runner switches to the engine's user")


@pytest.fixture(scope="module")
def private_install():
    """A venv in a 0700 folder whose interpreter imports the arena's package from inside that folder
    (the package linked in, its dependencies through a .pth file): what a clone inside a
    `mktemp -d` folder is to the engine's user."""
    top = Path(tempfile.mkdtemp(prefix="arena-private-"))  # mode 0700, as mktemp -d
    venv = top / "clone" / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = Path(
        subprocess.run(
            [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    (site / "arena-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    src = top / "clone" / "src"
    src.mkdir()
    (src / "speculator_arena").symlink_to(REPO / "speculator_arena")
    yield {"top": top, "python": venv / "bin" / "python", "src": src}
    import shutil

    shutil.rmtree(top, ignore_errors=True)


def _arena(install, home: Path, *args: str, **env) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if not k.startswith(("ARENA_NO_PRIVILEGE", "ARENA_ALLOW_UN"))}
    e.update(PYTHONPATH=str(install["src"]), ARENA_HOME=str(home), **env)
    return subprocess.run(
        [str(install["python"]), "-m", "speculator_arena.cli", *args],
        env=e,
        cwd=str(home.parent),  # not the clone: `-m` puts the working directory first on the path
        capture_output=True,
        text=True,
        timeout=300,
    )


@needs_root
def test_a_private_install_is_refused_at_once_with_the_fix(private_install, tmp_path):
    home = tmp_path / "home"
    t0 = time.time()
    demo = _arena(private_install, home, "demo", "--home", str(home))
    took = time.time() - t0
    assert demo.returncode == 2, demo.stderr[-3000:]
    top = private_install["top"]
    assert f"cannot reach {private_install['src'] / 'speculator_arena'} " in demo.stderr, demo.stderr
    assert f"the directory {top} is closed to other users" in demo.stderr, demo.stderr
    assert f"chmod o+x {top}" in demo.stderr and "never runs an engine as root" in demo.stderr
    assert took < 60 and not (home / "pools").exists()  # refused before the pools or the target
    ev = _arena(
        private_install, home, "evaluate", "--task", "local-smollm2", "--engine", str(REPO / "engines" / "dev-ngram")
    )
    assert ev.returncode == 2 and "never runs an engine as root" in ev.stderr, ev.stderr[-3000:]
    assert not (home / "raw").exists()  # nothing stored
    worker = _arena(private_install, home, "queue", "work", "--once")
    assert worker.returncode == 2 and "never runs an engine as root" in worker.stderr, worker.stderr[-3000:]
    assert "never runs an engine as root" in privileges.recorded_refusal(home)  # the API now refuses submissions


@needs_root
def test_an_engine_start_the_user_cannot_reach_is_refused_not_run_as_root(private_install, engine_factory, tmp_path):
    er = EngineRun(
        engine="candidate",
        purpose="timed",
        start_index=1,
        src=engine_factory("eng"),
        env_vars={"PATH": "/usr/bin:/bin", "TARGET": str(tmp_path)},
        port=free_port(),
        private_root=tmp_path / "private",
    )
    with pytest.raises(privileges.PrivilegeRefused, match="never runs an engine as root"):
        er.start([private_install["python"].parent])
    assert er.proc is None  # nothing was started, as root or otherwise
    er.cleanup()


def test_a_submission_runs_as_the_runners_user_only_where_the_operator_says_so(monkeypatch):
    monkeypatch.setenv("ARENA_NO_PRIVILEGE_DROP", "1")
    monkeypatch.delenv("ARENA_ALLOW_UNISOLATED_SUBMISSIONS", raising=False)
    assert privileges.preflight() == privileges.ISOLATION_NONE  # an operator's own engine: recorded
    with pytest.raises(privileges.PrivilegeRefused, match="ARENA_ALLOW_UNISOLATED_SUBMISSIONS=1"):
        privileges.preflight(submission=True)
    monkeypatch.setenv("ARENA_ALLOW_UNISOLATED_SUBMISSIONS", "1")
    assert privileges.preflight(submission=True) == privileges.ISOLATION_NONE
    assert privileges.preflight(submission=True, backend="kubernetes") == privileges.ISOLATION_SIDECAR


@needs_root
@pytest.mark.engines
def test_this_install_passes_the_preflight():
    """The suite's own clone: where it fails, every engine test would fail with it (conftest says
    so once, at the start)."""
    assert privileges.preflight() == privileges.ISOLATION_USER
