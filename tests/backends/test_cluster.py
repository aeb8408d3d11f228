"""`arena evaluate --backend kubernetes` against a real control plane (Kubernetes 1.36's API
server, scheduler and controllers, conftest.py) with the kubelet stand-in as its GPU node: an
evaluation measured in a pod, landed whole and scored; and every way a pod ends that the tests
can drive through the real API server (docs/operators.md's outcome table): an image that cannot
be pulled, a pod no node can take, an eviction through the eviction subresource, the deadline
exceeded, the runner killed; each void with its reason, the pod deleted, nothing landed.

The evaluations are the CI profile's (tests/runners/ci_profile.py, FAST passes) with the stdlib
SSE stand-in engine (tests/runners/sse_engine.py) as candidate and stock.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from speculator_arena.backends.kubernetes.manifests import EVALUATION_LABEL, RUNNER_CONTAINER
from speculator_arena.cli import main
from speculator_arena.warehouse import Warehouse
from speculator_arena.warehouse.evaluations import current_row

from .conftest import TASK
from .test_launcher import summary_of

NAMESPACE = "arena-evaluations"


def _home(cluster, tmp_path) -> Path:
    """A warehouse whose pools are the artifacts volume's (the launcher compares them)."""
    import shutil

    home = tmp_path / "home"
    shutil.copytree(cluster.artifacts / "pools" / TASK, home / "pools" / TASK)
    return home


def _args(cluster, home, eid: str) -> list[str]:
    return [
        "evaluate",
        "--backend",
        "kubernetes",
        "--task",
        TASK,
        "--engine",
        str(cluster.artifacts / "engines" / "ok"),
        "--stock-engine",
        str(cluster.artifacts / "engines" / "ok"),
        "--home",
        str(home),
        "--evaluation-id",
        eid,
        "--target",
        str(cluster.artifacts / "checkpoints" / TASK),
    ]


def _core(cluster):
    from kubernetes import client, config

    return client.CoreV1Api(config.new_client_from_config(config_file=cluster.kubeconfig))


def _pods(cluster, eid: str) -> list:
    return _core(cluster).list_namespaced_pod(NAMESPACE, label_selector=f"{EVALUATION_LABEL}={eid}").items


def _use(cluster, monkeypatch, **extra) -> None:
    for k, v in {**cluster.env, **extra}.items():
        monkeypatch.setenv(k, v)


def _running_pod(cluster, eid: str, timeout: float = 90):
    """The evaluation's pod once its runner container runs."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        for pod in _pods(cluster, eid):
            for cs in pod.status.container_statuses or []:
                if cs.name == RUNNER_CONTAINER and cs.state.running:
                    return pod
        time.sleep(0.2)
    raise AssertionError(f"the pod of {eid} never ran its runner")


def _assert_void_and_clean(cluster, home, out: dict, eid: str, kind: str) -> None:
    assert out["status"] == "void", out
    assert out["void_reason"].startswith(f"pod {kind}:"), out["void_reason"]
    assert {t: n for t, n in out["rows"].items() if n and t != "evaluations"} == {}, out["rows"]
    assert _pods(cluster, eid) == []
    assert not (cluster.results / eid).exists()
    assert current_row(Warehouse(home), eid)["status"] == "void"


def test_an_evaluation_in_a_pod_is_measured_landed_whole_and_scored(kube_cluster, tmp_path, monkeypatch, capsys):
    _use(kube_cluster, monkeypatch)
    home = _home(kube_cluster, tmp_path)
    t0 = time.monotonic()
    rc = main([*_args(kube_cluster, home, "k8s-measured"), "--rerun-contended", "2"])
    out = summary_of(capsys.readouterr().out)
    print(f"[kube] measured evaluation in {time.monotonic() - t0:.1f} s", file=sys.stderr)
    assert rc == 0 and out["status"] == "measured", (
        out,
        kube_cluster.node.logs_of(EVALUATION_LABEL, out["evaluation_id"]),
    )
    eid = out["evaluation_id"]
    assert out["rows"]["passes"] > 0 and out["rows"]["probe_scored"] > 0 and out["rows"]["engine_starts"] == 4
    row = current_row(Warehouse(home), eid)
    prov = json.loads(row["provenance"])
    assert prov["backend"] == "kubernetes" and prov["pod_outcome"] == "succeeded"
    assert prov["engine_isolation"] == "pod-two-containers"
    # The engines ran in the engine container, under its uid, not the runner's.
    starts = Warehouse(home).read_table("engine_starts", eid).to_pylist()
    assert {s["run_as_user"] for s in starts} == {f"uid {kube_cluster.engine_uid}"}
    assert _pods(kube_cluster, eid) == [] and not (kube_cluster.results / eid).exists()

    monkeypatch.setenv("ARENA_HOME", str(home))
    assert main(["score", "--evaluation", eid, "--json"]) == 0
    scored = summary_of(capsys.readouterr().out)
    mine = [e for e in scored["evaluations"] if e["evaluation_id"] == eid]
    assert len(mine) == 1 and mine[0]["status"] == "measured", scored


def test_an_image_that_cannot_be_pulled_is_void(kube_cluster, tmp_path, monkeypatch, capsys):
    _use(kube_cluster, monkeypatch, ARENA_K8S_IMAGE="registry.invalid/speculator-arena/no-such-image:0")
    home = _home(kube_cluster, tmp_path)
    assert main(_args(kube_cluster, home, "k8s-pull")) == 0
    out = summary_of(capsys.readouterr().out)
    _assert_void_and_clean(kube_cluster, home, out, "k8s-pull", "image_pull")
    assert "ErrImagePull" in out["void_reason"] or "ImagePullBackOff" in out["void_reason"]


def test_a_pod_no_node_can_take_is_void_after_the_timeout(kube_cluster, tmp_path, monkeypatch, capsys):
    _use(kube_cluster, monkeypatch, ARENA_K8S_MEMORY_LIMIT="64Ti")  # more than any node has
    home = _home(kube_cluster, tmp_path)
    assert main(_args(kube_cluster, home, "k8s-unschedulable")) == 0
    out = summary_of(capsys.readouterr().out)
    _assert_void_and_clean(kube_cluster, home, out, "k8s-unschedulable", "unschedulable")
    assert "Insufficient memory" in out["void_reason"]


def _assert_engine_isolated_as_stored(cluster, pod) -> None:
    """The engine container's isolation as the API server stored the pod (after its admission
    plugins, ServiceAccount's token injection included), not as the launcher meant to send it:
    its own uid, no pool or results mount, no service-account token anywhere in the pod."""
    from speculator_arena.backends.kubernetes.in_pod import POD_RESULTS
    from speculator_arena.backends.kubernetes.manifests import ENGINE_CONTAINER

    (engine,) = [c for c in pod.spec.init_containers if c.name == ENGINE_CONTAINER]
    assert engine.security_context.run_as_user == cluster.engine_uid != cluster.runner_uid
    assert engine.restart_policy == "Always"  # a native sidecar, as stored
    paths = [m.mount_path for m in engine.volume_mounts]
    assert not any(p.startswith(POD_RESULTS) or "/pools" in p for p in paths), paths
    assert pod.spec.automount_service_account_token is False
    assert not [v for v in pod.spec.volumes if v.projected is not None], "a service-account token was injected"
    for c in [*pod.spec.init_containers, *pod.spec.containers]:
        assert not any("serviceaccount" in m.mount_path for m in c.volume_mounts or [])


def _evict(cluster, pod) -> None:
    from kubernetes import client

    body = client.V1Eviction(metadata=client.V1ObjectMeta(name=pod.metadata.name, namespace=NAMESPACE))
    _core(cluster).create_namespaced_pod_eviction(pod.metadata.name, NAMESPACE, body)


def _shorten_deadline(cluster, pod) -> None:
    _core(cluster).patch_namespaced_pod(pod.metadata.name, NAMESPACE, {"spec": {"activeDeadlineSeconds": 1}})


def _kill_runner(cluster, pod) -> None:
    run = cluster.node.run_of(NAMESPACE, pod.metadata.name)
    os.killpg(run.container(RUNNER_CONTAINER).proc.pid, signal.SIGKILL)


# In the full profile: in a fresh-clone CI run (the whole suite, 2026-12-04) all three launchers were
# still following their pod 120 s after it was evicted, deadlined or its runner killed, where alone
# (twice) each ended in under a minute; issue 32 keeps the cause open. The measured, unpullable,
# unschedulable and resume cases stay in CI.
@pytest.mark.full
@pytest.mark.parametrize(
    "act, kind, words",
    [
        (_evict, "evicted", "EvictionByEvictionAPI"),
        (_shorten_deadline, "deadline_exceeded", "activeDeadlineSeconds"),
        (_kill_runner, "runner_failed", "exit code 137"),
    ],
    ids=["evicted", "deadline", "runner-killed"],
)
def test_a_running_pod_that_ends_badly_is_void_and_nothing_lands(
    kube_cluster, tmp_path, monkeypatch, capsys, act, kind, words
):
    _use(kube_cluster, monkeypatch)
    home = _home(kube_cluster, tmp_path)
    eid = f"k8s-{kind.replace('_', '-')}"
    done = {}
    launcher = threading.Thread(target=lambda: done.update(rc=main(_args(kube_cluster, home, eid))))
    launcher.start()
    try:
        pod = _running_pod(kube_cluster, eid)
        _assert_engine_isolated_as_stored(kube_cluster, pod)
        act(kube_cluster, pod)
    finally:
        launcher.join(timeout=120)
    assert done.get("rc") == 0
    out = summary_of(capsys.readouterr().out)
    _assert_void_and_clean(kube_cluster, home, out, eid, kind)
    assert words in out["void_reason"], out["void_reason"]


def test_resume_finds_the_pod_of_a_killed_launcher_and_lands_it(kube_cluster, tmp_path, monkeypatch, capsys):
    """The launcher (`arena evaluate`, its own process) is SIGKILLed while its pod runs;
    `arena evaluate --resume` finds the pod by its evaluation's label, waits for its end, deletes
    it and lands the results whole (or voids the evaluation, by how the pod ended)."""
    _use(kube_cluster, monkeypatch)
    home = _home(kube_cluster, tmp_path)
    eid = "k8s-resumed"
    env = {**os.environ, **kube_cluster.env, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen(
        [sys.executable, "-m", "speculator_arena.cli", *_args(kube_cluster, home, eid)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        _running_pod(kube_cluster, eid)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert current_row(Warehouse(home), eid)["status"] == "running"
    assert main(["evaluate", "--resume", eid, "--home", str(home)]) == 0
    out = summary_of(capsys.readouterr().out)
    assert _pods(kube_cluster, eid) == [] and not (kube_cluster.results / eid).exists()
    if out["status"] == "void":  # a contended host voids it in the pod; the pod's own verdict landed
        assert "host contended" in out["void_reason"], (out, kube_cluster.node.logs_of(EVALUATION_LABEL, eid))
    else:
        assert out["status"] == "measured" and out["rows"]["passes"] > 0, out
