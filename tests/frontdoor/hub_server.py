"""A hub-shaped HTTP server on 127.0.0.1 (stdlib), so that the real `huggingface_hub` client is
tested against the Hugging Face hub's own routes: repository metadata
(`/api/models/<repo>/revision/<rev>`), its file tree (`/api/models/<repo>/tree/<rev>`) and file downloads (`/<repo>/resolve/<rev>/<file>`). It
records every path asked for, so a test can assert that a Python file was never fetched, and
answers only while its `gate` is set, so a test can hold a fetch midway.
"""

from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlparse


class HubServer:
    def __init__(self):
        self.repos: dict[tuple[str, str], dict[str, bytes]] = {}
        self.requests: list[str] = []
        self.gate = threading.Event()
        self.gate.set()
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _send(self, code, body: bytes, headers: dict, head: bool = False):
                self.send_response(code)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if not head:
                    self.wfile.write(body)

            def _route(self, head: bool):
                hub.gate.wait(60)
                path = unquote(urlparse(self.path).path)
                hub.requests.append(path)
                parts = path.strip("/").split("/")
                if parts[:2] == ["api", "models"] and "revision" in parts:
                    i = parts.index("revision")
                    repo, rev = "/".join(parts[2:i]), parts[i + 1]
                    files = hub.repos.get((repo, rev))
                    if files is None:
                        return self._send(
                            404,
                            b'{"error":"Repository not found"}',
                            {"Content-Type": "application/json", "X-Error-Code": "RepoNotFound"},
                            head,
                        )
                    info = {
                        "id": repo,
                        "modelId": repo,
                        "sha": rev,
                        "private": False,
                        "siblings": [
                            {"rfilename": n, "size": len(b), "blobId": hashlib.sha1(b).hexdigest()}
                            for n, b in sorted(files.items())
                        ],
                    }
                    return self._send(200, json.dumps(info).encode(), {"Content-Type": "application/json"}, head)
                if parts[:2] == ["api", "models"] and "tree" in parts:
                    i = parts.index("tree")
                    files = hub.repos.get(("/".join(parts[2:i]), parts[i + 1]))
                    if files is None:
                        return self._send(
                            404,
                            b'{"error":"Repository not found"}',
                            {"Content-Type": "application/json", "X-Error-Code": "RepoNotFound"},
                            head,
                        )
                    tree = [
                        {"type": "file", "path": n, "size": len(b), "oid": hashlib.sha1(b).hexdigest()}
                        for n, b in sorted(files.items())
                    ]
                    return self._send(200, json.dumps(tree).encode(), {"Content-Type": "application/json"}, head)
                if "resolve" in parts:
                    i = parts.index("resolve")
                    repo, rev, name = "/".join(parts[:i]), parts[i + 1], "/".join(parts[i + 2 :])
                    body = hub.repos.get((repo, rev), {}).get(name)
                    if body is None:
                        return self._send(404, b"not found", {"X-Error-Code": "EntryNotFound"}, head)
                    return self._send(
                        200,
                        body,
                        {
                            "X-Repo-Commit": rev,
                            "ETag": f'"{hashlib.sha1(body).hexdigest()}"',
                            "Content-Type": "application/octet-stream",
                        },
                        head,
                    )
                return self._send(404, b"{}", {"Content-Type": "application/json"}, head)

            def do_GET(self):
                self._route(False)

            def do_HEAD(self):
                self._route(True)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def add(self, repo: str, revision: str, files: dict[str, bytes]) -> None:
        self.repos[(repo, revision)] = files

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
