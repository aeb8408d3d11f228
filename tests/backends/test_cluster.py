"""`arena evaluate --backend kubernetes` against a real control plane (Kubernetes 1.36's API
server, scheduler and controllers, conftest.py) with the kubelet stand-in as its GPU node: an
evaluation measured in a pod, landed whole and scored; and every way a pod ends that the tests
can drive through the real API server (docs/operators/kubernetes.md's outcome table): an image that cannot
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


# In a fresh-clone CI run (the whole suite, 2026-12-04) all three launchers were still following
# their pod 120 s after it was evicted, deadlined or its runner killed, where alone each ended in
# under a minute: dagster-k8s read the runner's log with an hour's timeout, and a stream left open
# after the pod ended held it. The launcher's reads are bounded now (`BoundedLogReader`; 15 s here).
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


def _engine_archive(engine: Path) -> str:
    """The stand-in engine as a submission's inline `.tar.gz` (base64)."""
    import base64
    import io
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for f in sorted(engine.iterdir()):
            tf.add(f, arcname=f.name)
    return base64.b64encode(buf.getvalue()).decode()


def _tick(home):
    import dagster as dg

    from speculator_arena.assets.resources import default_resources
    from speculator_arena.assets.submissions import submission_queue
    from speculator_arena.dagster_project.launch import dagster_instance

    with dg.build_sensor_context(instance=dagster_instance(home), resources=default_resources(home)) as ctx:
        return submission_queue(ctx)


def test_two_gpu_nodes_run_two_submissions_at_once_and_a_third_waits(kube_cluster, monkeypatch):
    """Issue 32: with two GPU nodes named in `ARENA_DEVICE`, one `arena queue work --once` tick runs
    the two oldest accepted submissions at the same time, each in a pod pinned to its device's node;
    while both run the queue starts nothing (the third waits), and once they end the third is next.

    The home is the artifacts volume itself (laid out like a home, docs/operators/kubernetes.md): the sealed
    engines the front door stores are what the pods read, and the task's sealed target on it is
    the one a submission gets. Both stand-in nodes share this host's two cores, so each evaluation
    may void for host contention (SCORING.md): on a cluster each has its node's CPU to itself."""
    import yaml
    from fastapi.testclient import TestClient

    from speculator_arena.frontdoor.accounts import invite
    from speculator_arena.frontdoor.api import create_app
    from speculator_arena.frontdoor.queue import SUBMISSION_TAG
    from speculator_arena.frontdoor.state import connect
    from speculator_arena.rules.devices import DEVICE_TAG
    from speculator_arena.runners.summary import CONTENDED
    from speculator_arena.sealed.trees import remove_tree

    from .conftest import _wait
    from .kubelet_standin import KubeletStandIn

    home, nodes = kube_cluster.artifacts, ["gpu-node-1", "gpu-node-2"]
    core = _core(kube_cluster)
    # Two evaluations on this host's two cores start four engines at once: the staged profile's 3 s
    # to answer /health is too short for that (not for one evaluation), so this test's version gives
    # them 30 s; the launcher pins it, and the pods read it from the image's protocol folder.
    staged = max(kube_cluster.protocol_dir.glob("v*.yaml"), key=lambda f: int(f.stem[1:]))
    doc = yaml.safe_load(staged.read_text())
    doc["version"] += 1
    doc["notes"] = "cluster tests: two evaluations on one host's cores, 30 s for an engine's /health"
    doc["tasks"][TASK]["start_stop"]["health_timeout_seconds"] = 30
    shared_host = kube_cluster.protocol_dir / f"v{doc['version']}.yaml"
    shared_host.write_text(yaml.safe_dump(doc, sort_keys=False))
    second = KubeletStandIn(
        kube_cluster.kubeconfig, nodes[1], kube_cluster.artifacts.parent / "kubelet-2", kube_cluster.node.images
    ).start()
    try:
        _wait(lambda: core.read_node(nodes[1]).status.allocatable.get("nvidia.com/gpu") == "1", "the second GPU node")
        _use(
            kube_cluster,
            monkeypatch,
            ARENA_HOME=str(home),
            DAGSTER_HOME=str(home / "dagster"),  # set here so that the test leaves it as it was
            ARENA_BACKEND="kubernetes",
            ARENA_DEVICE=",".join(nodes),
        )
        con = connect(home)
        _, token = invite(con, "two-gpus")
        con.close()
        doc = {
            "task_id": TASK,
            "split": "dev",
            "engine": {"inline": _engine_archive(kube_cluster.artifacts / "engines" / "ok")},
            "solution": {"method": "stand-in", "kind": "ngram"},
        }
        with TestClient(create_app(home)) as front:
            subs = []
            for _ in range(3):
                r = front.post("/api/submissions", json=doc, headers={"Authorization": f"Bearer {token}"})
                assert r.status_code == 201, r.text
                subs.append(r.json())
        eids = [s["evaluation_id"] for s in subs]

        t0 = time.monotonic()
        worker = subprocess.Popen(
            [sys.executable, "-m", "speculator_arena.cli", "queue", "work", "--once"],
            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            pods = [_running_pod(kube_cluster, eid, timeout=180) for eid in eids[:2]]
            # the oldest two, each pinned to its device's node, both running at this moment
            assert [p.spec.node_name for p in pods] == nodes
            now = [_pods(kube_cluster, eid) for eid in eids[:2]]
            assert all(len(ps) == 1 and ps[0].status.phase == "Running" for ps in now), now
            busy = _tick(home)
            assert f"every device is busy ({', '.join(nodes)})" in busy.skip_message, busy
            assert _pods(kube_cluster, eids[2]) == []
            out, _ = worker.communicate(timeout=600)
        finally:
            if worker.poll() is None:
                worker.kill()
        print(f"[kube] two evaluations on two nodes in {time.monotonic() - t0:.1f} s\n{out[-8000:]}", file=sys.stderr)
        assert worker.returncode == 0, out[-4000:]
        for sub, node in zip(subs[:2], nodes, strict=True):
            eid = sub["evaluation_id"]
            row = current_row(Warehouse(home), eid)
            assert row["status"] in ("measured", "void"), (row, out[-3000:])
            if row["status"] == "void":
                assert CONTENDED in row["void_reason"], (row["void_reason"], out[-3000:])
            assert json.loads(row["provenance"])["backend"] == "kubernetes"
            assert f"queue: evaluating {eid} (submission {sub['submission_id']}) on {node}" in out, out[-3000:]
            assert _pods(kube_cluster, eid) == [] and not (kube_cluster.results / eid).exists()
        third = current_row(Warehouse(home), eids[2])
        assert third is None or third["status"] == "queued", third  # never started
        (nxt,) = _tick(home).run_requests
        assert nxt.tags[SUBMISSION_TAG] == subs[2]["submission_id"] and nxt.tags[DEVICE_TAG] in nodes
    finally:
        second.stop()
        remove_tree(home / "sealed")
        shared_host.unlink()


def test_the_m_c_fit_runs_in_a_pod_with_its_own_deadline(kube_cluster, tmp_path, monkeypatch, capsys):
    """The calibration's m/c fit is a spec the backends run as any other (issue 34): through the
    runner's entry (`arena evaluate --fit`), in a pod whose runner serves one short stock pass per
    grid point in the engine container, under the fit's own deadline; its rows land whole and it
    ends void with the fit's reason."""
    from speculator_arena.backends.kubernetes.deadline import active_deadline_seconds
    from speculator_arena.protocol import load_protocol
    from speculator_arena.runners.fit_passes import FIT_VOID_REASON

    _use(kube_cluster, monkeypatch)
    home = _home(kube_cluster, tmp_path)
    rc = main([*_args(kube_cluster, home, "k8s-fit"), "--fit", "1:1,2:0.5", "--fit-seconds", "1"])
    out = summary_of(capsys.readouterr().out)
    assert out["status"] == "void" and out["void_reason"] == FIT_VOID_REASON, (
        rc,
        out,
        kube_cluster.node.logs_of(EVALUATION_LABEL, "k8s-fit"),
    )
    wh = Warehouse(home)
    requests = wh.read_table("requests", "k8s-fit").to_pylist()
    assert {r["pass_id"] for r in requests} == {"fit-m1-c1", "fit-m2-c0.5"}
    assert {r["engine"] for r in requests} == {"stock"} and any(r["done"] for r in requests)
    prov = json.loads(current_row(wh, "k8s-fit")["provenance"])
    assert prov["backend"] == "kubernetes" and prov["pod_outcome"] == "succeeded"
    fit = {"workload": "busy", "seconds": 1.0, "points": [[1, 1.0], [2, 0.5]]}
    task = load_protocol().task(TASK)
    assert prov["active_deadline_seconds"] == active_deadline_seconds(task, fit) < active_deadline_seconds(task)
    starts = wh.read_table("engine_starts", "k8s-fit").to_pylist()
    assert len(starts) == 1 and starts[0]["run_as_user"] == f"uid {kube_cluster.engine_uid}", (out, starts)
    assert _pods(kube_cluster, "k8s-fit") == [] and not (kube_cluster.results / "k8s-fit").exists()
