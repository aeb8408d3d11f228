"""The launcher's API calls through the real `kubernetes` client, over HTTP, against a canned
server on 127.0.0.1 (fixed answers in the API server's JSON shapes; it is not Kubernetes: what
an API server would admit or refuse is not tested here, see test_launcher.py's cluster tests)."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml
from kubernetes import client as k8s

from speculator_arena.backends.kubernetes.launcher import KubernetesLauncher, PodEnded, wait_until_started
from speculator_arena.backends.kubernetes.manifests import to_dict
from speculator_arena.backends.kubernetes.settings import KubernetesSettings

NS = "arena-evaluations"


class Canned:
    """Answers by (method, path): a list of (status, body) served in order, the last repeated."""

    def __init__(self):
        self.answers: dict[tuple[str, str], list] = {}
        self.seen: list[tuple[str, str, dict | None]] = []

    def handler(self):
        canned = self

        class H(BaseHTTPRequestHandler):
            def _answer(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(n)) if n else None
                path = self.path.split("?")[0]
                canned.seen.append((self.command, path, body))
                queue = canned.answers.get((self.command, path)) or [(404, {"kind": "Status", "code": 404})]
                status, out = queue.pop(0) if len(queue) > 1 else queue[0]
                out = body if out == "echo" else out
                data = json.dumps(out).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PATCH = do_DELETE = _answer

            def log_message(self, *args):
                pass

        return H


@pytest.fixture
def api(tmp_path):
    canned = Canned()
    server = ThreadingHTTPServer(("127.0.0.1", 0), canned.handler())
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    host = f"http://127.0.0.1:{server.server_address[1]}"
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "canned",
                "clusters": [{"name": "canned", "cluster": {"server": host}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "canned", "context": {"cluster": "canned", "user": "u", "namespace": NS}}],
            }
        )
    )
    yield canned, str(kubeconfig)
    server.shutdown()
    server.server_close()


def _pod(phase, *, age_s, scheduled=None, running=False) -> dict:
    now = datetime.now(UTC)
    conditions = (
        [
            k8s.V1PodCondition(
                type="PodScheduled",
                status="False",
                reason="Unschedulable",
                message="0/2 nodes are available: 2 Insufficient nvidia.com/gpu.",
            )
        ]
        if scheduled is False
        else None
    )
    statuses = (
        [
            k8s.V1ContainerStatus(
                name="runner",
                image="i",
                image_id="",
                ready=True,
                restart_count=0,
                state=k8s.V1ContainerState(running=k8s.V1ContainerStateRunning(started_at=now)),
            )
        ]
        if running
        else None
    )
    return to_dict(
        k8s.V1Pod(
            api_version="v1",
            kind="Pod",
            metadata=k8s.V1ObjectMeta(name="p", namespace=NS, creation_timestamp=now - timedelta(seconds=age_s)),
            spec=k8s.V1PodSpec(containers=[k8s.V1Container(name="runner", image="i")]),
            status=k8s.V1PodStatus(phase=phase, conditions=conditions, container_statuses=statuses),
        )
    )


def _launcher(kubeconfig, tmp_path, **settings):
    return KubernetesLauncher(
        KubernetesSettings(kubeconfig=kubeconfig, poll_interval_s=0.01, **settings),
        tmp_path / "home",
        progress=lambda m: None,
    )


def test_namespace_objects_are_created_or_patched_and_missing_volumes_refused(api, tmp_path):
    canned, kubeconfig = api
    canned.answers = {
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
    calls = [(m, p) for m, p, _ in canned.seen]
    assert calls[:3] == [
        ("POST", "/api/v1/namespaces"),
        ("PATCH", f"/api/v1/namespaces/{NS}"),
        ("POST", f"/api/v1/namespaces/{NS}/resourcequotas"),
    ]
    patched = canned.seen[1][2]
    assert patched["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    policy = next(b for m, p, b in canned.seen if p.endswith("/networkpolicies"))
    assert policy["spec"]["policyTypes"] == ["Ingress", "Egress"] and policy["spec"]["egress"] == []


def test_a_pod_no_node_takes_is_ended_after_the_timeout(api, tmp_path):
    canned, kubeconfig = api
    path = f"/api/v1/namespaces/{NS}/pods/p"
    canned.answers = {
        ("GET", path): [
            (200, _pod("Pending", age_s=5, scheduled=False)),
            (200, _pod("Pending", age_s=100, scheduled=False)),
        ]
    }
    launcher = _launcher(kubeconfig, tmp_path, unschedulable_timeout_s=60)
    with pytest.raises(PodEnded) as ended:
        wait_until_started(launcher.core, NS, "p", launcher.s, sleep=lambda s: None)
    assert ended.value.outcome.kind == "unschedulable" and "Insufficient nvidia.com/gpu" in ended.value.outcome.reason
    assert sum(1 for m, p, _ in canned.seen if p == path) == 2


def test_a_pod_that_starts_is_followed_and_a_gone_pod_deletes_quietly(api, tmp_path):
    canned, kubeconfig = api
    path = f"/api/v1/namespaces/{NS}/pods/p"
    canned.answers = {
        ("GET", path): [
            (404, {"kind": "Status", "code": 404}),
            (200, _pod("Pending", age_s=1)),
            (200, _pod("Running", age_s=2, running=True)),
        ]
    }
    launcher = _launcher(kubeconfig, tmp_path)
    wait_until_started(launcher.core, NS, "p", launcher.s, sleep=lambda s: None)
    assert sum(1 for m, p, _ in canned.seen if p == path) == 3
    launcher.delete_pod("p")  # 404: already gone
    assert canned.seen[-1][:2] == ("DELETE", path)
