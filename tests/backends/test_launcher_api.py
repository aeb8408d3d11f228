"""The launcher's API calls through the real `kubernetes` client and dagster-k8s' Pipes client,
over HTTP, against a recording stand-in of the API server on 127.0.0.1 (k8s_api.py: what an API
server would admit or refuse is not tested here, see test_launcher.py's cluster tests).

The pod is named once: every request from its creation to its deletion names the pod created,
for a measured run and for every end of the outcome table (pod_shapes.ENDS)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import dagster as dg
import pytest
from dagster_pipes import _make_message

from speculator_arena.backends.kubernetes import manifests
from speculator_arena.backends.kubernetes.commands import example_spec
from speculator_arena.backends.kubernetes.launcher import KubernetesLauncher, PodEnded, wait_until_started
from speculator_arena.backends.kubernetes.manifests import to_dict
from speculator_arena.backends.kubernetes.outcome import is_started
from speculator_arena.backends.kubernetes.settings import KubernetesSettings
from speculator_arena.protocol import load_protocol

from .k8s_api import PodScript, serve
from .pod_shapes import ENDS, NOW, RUNNING, TIMEOUT, pod, unschedulable, waiting

NS = "arena-evaluations"
TASK = "local-smollm2"


@pytest.fixture
def api(tmp_path):
    recording, kubeconfig, stop = serve(tmp_path, NS)
    yield recording, kubeconfig
    stop()


def _launcher(kubeconfig, tmp_path, said=None, **settings):
    settings = {"unschedulable_timeout_s": TIMEOUT, **settings}
    return KubernetesLauncher(
        KubernetesSettings(kubeconfig=kubeconfig, poll_interval_s=0.01, **settings),
        tmp_path / "home",
        progress=(said.append if said is not None else lambda m: None),
    )


def _status(p) -> dict | None:
    return None if p is None else to_dict(p)["status"]


def _age(p) -> float:
    return (NOW - p.metadata.creation_timestamp).total_seconds() if p is not None else 0.0


def _pipes(method: str, **params) -> str:
    return json.dumps(_make_message(method, params or None))


MEASURED_LOG = [
    _pipes("opened", extras={}),
    "[evaluate local-smollm2-example] task local-smollm2, split dev, engine engines/dev-stock",
    _pipes("report_custom_message", payload={"event": "results", "status": "measured", "parts": 106}),
    _pipes("closed"),
]


def _run_pod(launcher: KubernetesLauncher) -> dict:
    """Run the example evaluation's pod from a Dagster asset, as the `evaluation` asset does."""
    task = load_protocol().task(TASK)
    got = {}

    @dg.asset(name="evaluation")
    def evaluation(context):
        got["name"] = launcher.name_pod(context)
        pod_obj = manifests.evaluation_pod(example_spec(TASK, None), task, launcher.s, name=got["name"])
        got["outcome"] = launcher.run_pod(context, pod_obj, task)
        return dg.MaterializeResult()

    dg.materialize([evaluation], instance=dg.DagsterInstance.ephemeral(), raise_on_error=True)
    return got


@pytest.mark.parametrize("case, end, kind, words", ENDS)
def test_one_pod_name_from_create_to_delete(api, tmp_path, capsys, case, end, kind, words):
    recording, kubeconfig = api
    never_starts = end is not None and end.status.phase == "Pending" and not is_started(end, "runner")
    running = pod("Running", state=RUNNING, engine=RUNNING)
    recording.script = PodScript(
        start=_status(end if never_starts else running), end=_status(end), log=MEASURED_LOG, age_s=_age(end)
    )
    said = []
    got = _run_pod(_launcher(kubeconfig, tmp_path, said))
    assert got["outcome"].kind == kind, (case, got["outcome"])
    name, calls = got["name"], recording.pod_names()
    assert calls[0] == ("create", name) and calls[-1] == ("delete", name), calls
    assert {n for _, n in calls} == {name}, calls  # every get, list, log and delete: the created pod
    assert recording.pods == {}  # nothing left behind
    created = recording.requests[0].body
    env = {c["name"]: {e["name"] for e in c.get("env") or []} for c in created["spec"]["containers"]}
    assert "DAGSTER_PIPES_CONTEXT" in env["runner"]  # the Pipes session is the runner's alone
    assert all("DAGSTER_PIPES_CONTEXT" not in {e["name"] for e in c["env"]} for c in created["spec"]["initContainers"])
    if never_starts:
        assert ("log", name) not in calls
    else:
        assert ("log", name) in calls
        # The pod's Pipes messages reached the launcher; its other log lines went to stderr, not
        # to stdout, where `arena evaluate` prints its summary.
        assert any('"status": "measured"' in m for m in said), said
        out = capsys.readouterr()
        assert "task local-smollm2, split dev" in out.err and "task local-smollm2" not in out.out


def test_a_log_of_a_two_container_pod_needs_the_container_name(api, tmp_path):
    """The stand-in refuses as the API server does; the pod's engine is an init container, so
    dagster-k8s' log read (no container named) gets the runner's log."""
    recording, kubeconfig = api
    recording.script = PodScript(start=_status(pod("Running", state=RUNNING)), end=None)
    body = to_dict(pod("Running", state=RUNNING))
    body["metadata"] = {"name": "two", "namespace": NS}
    body["spec"]["containers"].append({"name": "engine", "image": "i"})
    launcher = _launcher(kubeconfig, tmp_path)
    launcher.core.create_namespaced_pod(NS, body)
    from kubernetes.client.rest import ApiException

    with pytest.raises(ApiException) as refused:
        launcher.core.read_namespaced_pod_log("two", NS)
    assert refused.value.status == 400 and "a container name must be specified" in refused.value.body


def test_namespace_objects_are_created_or_patched_and_missing_volumes_refused(api, tmp_path):
    recording, kubeconfig = api
    recording.answers = {
        ("POST", "/api/v1/namespaces"): [(409, {"kind": "Status", "code": 409, "reason": "AlreadyExists"})],
        ("PATCH", f"/api/v1/namespaces/{NS}"): [(200, "echo")],
        ("POST", f"/api/v1/namespaces/{NS}/resourcequotas"): [(201, "echo")],
        ("POST", f"/apis/networking.k8s.io/v1/namespaces/{NS}/networkpolicies"): [(201, "echo")],
        ("GET", f"/api/v1/namespaces/{NS}/persistentvolumeclaims/arena-artifacts"): [
            (200, {"kind": "PersistentVolumeClaim"})
        ],
    }
    launcher = _launcher(kubeconfig, tmp_path)
    with pytest.raises(RuntimeError, match="no PersistentVolumeClaim arena-results"):
        launcher.ensure_namespace_objects()
    calls = [(r.method, r.path) for r in recording.requests]
    assert calls[:3] == [
        ("POST", "/api/v1/namespaces"),
        ("PATCH", f"/api/v1/namespaces/{NS}"),
        ("POST", f"/api/v1/namespaces/{NS}/resourcequotas"),
    ]
    patched = recording.requests[1].body
    assert patched["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    policy = next(r.body for r in recording.requests if r.path.endswith("/networkpolicies"))
    assert policy["spec"]["policyTypes"] == ["Ingress", "Egress"] and policy["spec"]["egress"] == []


def test_a_pod_no_node_takes_is_ended_after_the_timeout(api, tmp_path):
    recording, kubeconfig = api
    path = f"/api/v1/namespaces/{NS}/pods/p"
    now = datetime.now(UTC)
    recording.answers = {
        ("GET", path): [(200, to_dict(unschedulable(5, now))), (200, to_dict(unschedulable(100, now)))]
    }
    launcher = _launcher(kubeconfig, tmp_path, unschedulable_timeout_s=60)
    with pytest.raises(PodEnded) as ended:
        wait_until_started(launcher.core, NS, "p", launcher.s, sleep=lambda s: None)
    assert ended.value.outcome.kind == "unschedulable" and "Insufficient nvidia.com/gpu" in ended.value.outcome.reason
    assert sum(1 for r in recording.requests if r.path == path) == 2


def test_a_pod_that_starts_is_followed_and_a_gone_pod_deletes_quietly(api, tmp_path):
    recording, kubeconfig = api
    path = f"/api/v1/namespaces/{NS}/pods/p"
    recording.answers = {
        ("GET", path): [
            (404, {"kind": "Status", "code": 404}),
            (200, to_dict(pod("Pending", state=waiting("ContainerCreating")))),
            (200, to_dict(pod("Running", state=RUNNING))),
        ]
    }
    launcher = _launcher(kubeconfig, tmp_path)
    wait_until_started(launcher.core, NS, "p", launcher.s, sleep=lambda s: None)
    assert sum(1 for r in recording.requests if r.path == path) == 3
    launcher.delete_pod("p")  # 404: already gone
    assert (recording.requests[-1].method, recording.requests[-1].path) == ("DELETE", path)
