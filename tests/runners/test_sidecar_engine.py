"""The engine in the pod's other container, for real: the engine container's supervisor
(backends/kubernetes/engine_sidecar.py) started as the pod spec says, under the engine's uid
(engine_container.py), and the runner's side (runners/sidecar_engine.py) starting, health-checking
and stopping stdlib SSE engines through it.

The engine's user cannot open the runner's pool or results (here by their modes; in the pod they
are not mounted at all: test_manifests.py), while the sealed target is readable; what an engine
leaves running after its stop, or a supervisor an engine replaced, voids the evaluation.
"""

from __future__ import annotations

import os
import signal
import subprocess

import pytest

from speculator_arena.runners.failures import ArenaVoid
from speculator_arena.runners.lifecycle import free_port
from speculator_arena.runners.sidecar_engine import SidecarEngineRun, Supervisor, identity

from .engine_container import ROOT, EngineContainer, readable_dir, remove
from .stand_in import make_engine

pytestmark = pytest.mark.skipif(not ROOT, reason="an engine container under a uid of its own needs root")

PROBES = (
    'for p in $PROBE_PATHS; do if ls "$p" >/dev/null 2>&1; then echo "READ $p: readable"; '
    'else echo "READ $p: denied"; fi; done\n'
)


@pytest.fixture
def pod(tmp_path):
    """The runner's files (its uid alone: pool, results), the sealed target (everyone may read
    it, as its read-only mount lets the engine), an engine directory, the engine container."""
    shared = readable_dir("arena-sidecar-test-")
    runner = tmp_path / "runner"  # root's, 0700 above it: what the runner's container holds
    for d in ("pools/local-smollm2", "results/raw"):
        (runner / d).mkdir(parents=True)
    (runner / "pools/local-smollm2/probes.jsonl").write_text("{}\n")
    (shared / "target").mkdir()
    (shared / "target/config.json").write_text("{}")
    os.chmod(shared / "target/config.json", 0o644)
    containers = []

    def engine_container(**kw) -> EngineContainer:
        c = EngineContainer(shared / f"engine-scratch-{len(containers)}", **kw)
        containers.append(c)
        return c

    def engine(name: str, extra: str = "") -> object:
        d = make_engine(shared / "engines", name)
        text = (d / "launch.sh").read_text().replace("set -e\n", "set -e\n" + PROBES + extra, 1)
        (d / "launch.sh").write_text(text)
        for p in (shared / "engines", d, *d.iterdir()):
            os.chmod(p, 0o755)
        return d

    yield {"runner": runner, "shared": shared, "container": engine_container, "engine": engine}
    for c in containers:
        c.stop()
    remove(shared)


def _run(sup: Supervisor, src, pod, **env) -> SidecarEngineRun:
    paths = [pod["runner"] / "pools/local-smollm2", pod["runner"] / "results/raw", pod["shared"] / "target"]
    return SidecarEngineRun(
        engine="candidate",
        purpose="timed",
        start_index=1,
        src=src,
        env_vars={"TARGET": str(pod["shared"] / "target"), "PROBE_PATHS": " ".join(map(str, paths)), **env},
        port=free_port(),
        private_root=pod["runner"] / "runs",
        supervisor=sup,
    )


def test_the_engine_runs_under_its_own_uid_and_cannot_open_the_pool_or_the_results(pod):
    c = pod["container"]()
    sup = Supervisor.connect(c.listen, 20)
    assert sup.uid == c.uid != os.geteuid() and identity(sup.pid)[0] == c.uid
    assert sup.gpu["uuid"] is None and sup.gpu["reason"]  # no GPU here: said, not guessed
    er = _run(sup, pod["engine"]("cand"), pod)
    er.start([])
    assert er.wait_healthy(20), c.log.read_text()
    assert er.unprivileged and er.uid == c.uid and er.alive()
    pids = er.pids()
    assert sup.pid in pids and len(pids) >= 2 and {identity(p)[0] for p in pids} == {c.uid}
    er.stop(3)
    assert not er.alive() and er.stop_signal == "SIGTERM" and er.stop_problem is None
    log = er.log_text()
    assert f"READ {pod['runner'] / 'pools/local-smollm2'}: denied" in log, log
    assert f"READ {pod['runner'] / 'results/raw'}: denied" in log
    assert f"READ {pod['shared'] / 'target'}: readable" in log
    assert f"uid={c.uid}" in log and f"uid={os.geteuid()} " not in log
    row = er.row("e1", idle_ok=None, idle_s=None)
    assert row["run_as_user"] == f"uid {c.uid}" and row["unprivileged"] is True
    assert sup.engine_pids() == [sup.pid]  # nothing of the engine is left


def test_an_engine_that_cannot_start_is_the_engines_failure(pod):
    from speculator_arena.runners.lifecycle import EngineStartError

    sup = Supervisor.connect(pod["container"]().listen, 20)
    bad = pod["shared"] / "engines" / "no-launch"
    bad.mkdir(parents=True)
    os.chmod(bad, 0o755)
    with pytest.raises(EngineStartError, match="no launch.sh"):
        _run(sup, bad, pod).start([])


def test_what_an_engine_leaves_running_is_killed_or_voids_the_evaluation(pod):
    escape = "setsid sleep 300 </dev/null >/dev/null 2>&1 &\n"  # outside the engine's process group
    # The pod's supervisor (--own-uid) kills every process of the engine's uid at each stop.
    sup = Supervisor.connect(pod["container"]().listen, 20)
    er = _run(sup, pod["engine"]("escaping", escape), pod)
    er.start([])
    assert er.wait_healthy(20)
    er.stop(3)
    assert er.stop_problem is None and sup.engine_pids() == [sup.pid]
    # A supervisor that does not kill by uid still stops what the engine detached: the engine's
    # reaper (runners/reaper.py) holds it as a descendant.
    c = pod["container"](own_uid=False)
    sup = Supervisor.connect(c.listen, 20)
    er = _run(sup, pod["engine"]("escaping-2", escape), pod)
    er.start([])
    assert er.wait_healthy(20)
    er.stop(3)
    assert er.stop_problem is None and sup.engine_pids() == [sup.pid]
    # A process of the engine's uid that the supervisor neither started nor killed (it was fooled,
    # or broken): the runner sees the leftover itself and the evaluation is void.
    er = _run(sup, pod["engine"]("escaping-3"), pod)
    er.start([])
    assert er.wait_healthy(20)
    stray = subprocess.Popen(["sleep", "300"], user=c.uid, group=c.uid, start_new_session=True)
    try:
        er.stop(3)
        assert er.stop_problem and "left processes" in er.stop_problem, er.stop_problem
    finally:
        stray.kill()
        stray.wait()


def test_a_replaced_supervisor_voids_the_evaluation(pod):
    c = pod["container"]()
    sup = Supervisor.connect(c.listen, 20)
    os.killpg(c.proc.pid, signal.SIGKILL)  # an engine of its uid could do this
    c.proc.wait()
    with pytest.raises(ArenaVoid, match="gone or was replaced"):
        _run(sup, pod["engine"]("cand"), pod).start([])
