"""A stand-in for the Kubernetes API server on 127.0.0.1 that records every request the launcher's
`kubernetes` client makes (method, path, query), with answers in the API server's JSON shapes.

Why our own: no API server can run here (../shared/FACTS.md). It is not Kubernetes: admission,
quota and scheduling are not simulated (test_launcher.py's cluster tests meet the real thing).
What it does simulate is what the launcher's calls depend on, as a 1.36 API server does it: a
created pod is stored under the name in its body and answered under that name only (read,
list by `fieldSelector=metadata.name=`, log, delete; 404 for any other), a log asked without a
container of a pod with more than one regular container is refused with 400, and a pod's status
follows a `PodScript`: its `start` status until the runner's log was followed to its end, then
its `end` status (None: the pod is gone, as when a node's pods are deleted).

Canned answers by (method, path) (`answers`, served in order, the last repeated) take precedence,
for the calls around the pod (namespace objects, claims).
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import yaml


@dataclass
class PodScript:
    start: dict  # the pod's status (API JSON) from its creation until its log was followed
    end: dict | None  # its status afterwards; None: the pod is gone
    log: list[str] = field(default_factory=list)  # the runner container's log lines
    age_s: float = 0.0  # how old the pod says it is when created (creationTimestamp)


@dataclass
class Request:
    method: str
    path: str
    query: dict
    body: dict | None


class RecordingApi:
    def __init__(self, namespace: str):
        self.ns = namespace
        self.requests: list[Request] = []
        self.answers: dict[tuple[str, str], list] = {}
        self.script: PodScript | None = None
        self.pods: dict[str, dict] = {}
        self.followed: set[str] = set()
        self.lock = threading.Lock()

    # ---- what a test reads --------------------------------------------------------------------
    def pod_names(self) -> list[tuple[str, str]]:
        """(verb, pod name) of every request about one pod, in order: create, get, list, log, delete."""
        out = []
        base = f"/api/v1/namespaces/{self.ns}/pods"
        for r in self.requests:
            if r.method == "POST" and r.path == base:
                out.append(("create", (r.body or {}).get("metadata", {}).get("name")))
            elif r.path == base and "fieldSelector" in r.query:
                out.append(("list", r.query["fieldSelector"][0].removeprefix("metadata.name=")))
            elif r.path.startswith(base + "/"):
                name, _, sub = r.path[len(base) + 1 :].partition("/")
                out.append((sub or {"GET": "get", "DELETE": "delete"}.get(r.method, r.method), name))
        return out

    # ---- the server ---------------------------------------------------------------------------
    def _pod(self, name: str) -> dict | None:
        stored = self.pods.get(name)
        if stored is None:
            return None
        status = self.script.end if name in self.followed else self.script.start
        if status is None:  # gone, as if the node's pods were deleted
            del self.pods[name]
            return None
        return {**stored, "status": status}

    def _answer(self, method: str, path: str, query: dict, body: dict | None):
        canned = self.answers.get((method, path))
        if canned:
            status, out = canned.pop(0) if len(canned) > 1 else canned[0]
            return status, (body if out == "echo" else out), None
        base = f"/api/v1/namespaces/{self.ns}/pods"
        if method == "POST" and path == base and self.script is not None:
            name = body["metadata"]["name"]
            if name in self.pods:
                return 409, _status(409, "AlreadyExists", f'pods "{name}" already exists'), None
            created = datetime.now(UTC) - timedelta(seconds=self.script.age_s)
            body["metadata"]["creationTimestamp"] = created.strftime("%Y-%m-%dT%H:%M:%SZ")
            self.pods[name] = body
            return 201, self._pod(name), None
        if method == "GET" and path == base and "fieldSelector" in query:
            name = query["fieldSelector"][0].removeprefix("metadata.name=")
            found = self._pod(name)
            return 200, {"kind": "PodList", "apiVersion": "v1", "items": [found] if found else []}, None
        if path.startswith(base + "/"):
            name, _, sub = path[len(base) + 1 :].partition("/")
            found = self._pod(name)
            if found is None:
                return 404, _status(404, "NotFound", f'pods "{name}" not found'), None
            if method == "GET" and sub == "":
                return 200, found, None
            if method == "GET" and sub == "log":
                containers = [c["name"] for c in found["spec"]["containers"]]
                if "container" not in query and len(containers) != 1:
                    msg = f"a container name must be specified for pod {name}, choose one of: {containers}"
                    return 400, _status(400, "BadRequest", msg), None
                stamped = "timestamps" in query  # one distinct timestamp per line, as a kubelet writes them
                text = "".join(
                    (f"2026-12-01T06:00:{i:02d}.000000000Z " if stamped else "") + line + "\n"
                    for i, line in enumerate(self.script.log)
                )
                if (query.get("follow") or [""])[0].lower() == "true":
                    self.followed.add(name)  # the stream ended: the runner's container has exited
                return 200, None, text
            if method == "DELETE" and sub == "":
                del self.pods[name]
                return 200, _status(200, "Success", f"pod {name} deleted"), None
        return 404, _status(404, "NotFound", f"{method} {path}"), None

    def handler(self):
        api = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(n)) if n else None
                url = urlsplit(self.path)
                query = parse_qs(url.query)
                with api.lock:
                    api.requests.append(Request(self.command, url.path, query, body))
                    status, obj, text = api._answer(self.command, url.path, query, body)
                data = text.encode() if text is not None else json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/plain" if text is not None else "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PATCH = do_DELETE = _serve

            def log_message(self, *args):
                pass

        return Handler


def _status(code: int, reason: str, message: str) -> dict:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "code": code,
        "reason": reason,
        "message": message,
    }


def serve(tmp_path, namespace: str):
    """Start a RecordingApi; (api, kubeconfig path, stop)."""
    api = RecordingApi(namespace)
    server = ThreadingHTTPServer(("127.0.0.1", 0), api.handler())
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "recording",
                "clusters": [
                    {"name": "recording", "cluster": {"server": f"http://127.0.0.1:{server.server_address[1]}"}}
                ],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [
                    {"name": "recording", "context": {"cluster": "recording", "user": "u", "namespace": namespace}}
                ],
            }
        )
    )

    def stop():
        server.shutdown()
        server.server_close()

    return api, str(kubeconfig), stop
