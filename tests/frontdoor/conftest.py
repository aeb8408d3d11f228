"""Fixtures of the front door's tests: an ARENA_HOME with one invited account, the real FastAPI
app (in-process through Starlette's TestClient; tests/frontdoor/test_server.py runs it under
uvicorn), tar.gz builders for bad archives, and the hub-shaped server.

The home lies in a folder others may pass through (not pytest's own, which is root's alone), so
that when the tests run as root the intake's children really run as `arena-intake`, as on the
arena's machines; what those children read (test repositories) lies in `public_dir`."""

from __future__ import annotations

import base64
import io
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))  # hub_server
TASK = "local-smollm2"
DEV_NGRAM = REPO / "engines" / "dev-ngram"


def tar_gz(members: list[tuple[tarfile.TarInfo, bytes | None]]) -> bytes:
    """A .tar.gz of exactly these members (built by hand, so that unsafe ones can be made)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for info, data in members:
            if data is not None:
                info.size = len(data)
            tf.addfile(info, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def file_member(name: str, data: bytes, mode: int = 0o644) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.mode = mode
    return info, data


LAUNCH = file_member("launch.sh", b'#!/bin/bash\nexec python3 -m http.server "$PORT"\n', 0o755)


def submission(inline: bytes | None = None, **over) -> dict:
    doc = {
        "task_id": TASK,
        "split": "dev",
        "engine": {"inline": base64.b64encode(inline or tar_gz([LAUNCH])).decode()},
        "solution": {"method": "test", "kind": "ngram"},
    }
    doc.update(over)
    return doc


def stage_protocol(directory: Path, monkeypatch, **submission_overrides) -> int:
    """Stage the latest version with changed `submission:` values as a new version (ARENA_PROTOCOL_DIR)."""
    import yaml

    from speculator_arena.protocol import load_protocol

    doc = load_protocol().model_dump(mode="json")
    doc["version"] += 1
    doc["notes"] = "front door tests: smaller submission limits"
    doc["submission"].update(submission_overrides)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"v{doc['version']}.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    monkeypatch.setenv("ARENA_PROTOCOL_DIR", str(directory))
    return doc["version"]


@pytest.fixture
def public_dir():
    """A fresh folder under /tmp that every user may read (pytest's tmp_path is root's alone)."""
    d = Path(tempfile.mkdtemp(prefix="arena-fd-"))
    os.chmod(d, 0o755)
    yield d
    from speculator_arena.sealed.trees import remove_tree

    remove_tree(d)


@pytest.fixture
def arena_home(public_dir, monkeypatch) -> Path:
    home = public_dir / "arena_home"
    monkeypatch.setenv("ARENA_HOME", str(home))
    return home


@dataclass
class Front:
    home: Path
    client: object
    token: str
    account_id: str

    def post(self, doc=None, *, content: bytes | None = None, token: str | None = None):
        headers = {"Authorization": f"Bearer {self.token if token is None else token}"}
        if content is not None:
            return self.client.post("/api/submissions", content=content, headers=headers)
        return self.client.post("/api/submissions", json=doc, headers=headers)

    def status(self, submission_id: str, token: str | None = None) -> dict:
        r = self.client.get(
            f"/api/submissions/{submission_id}", headers={"Authorization": f"Bearer {token or self.token}"}
        )
        assert r.status_code == 200, r.text
        return r.json()

    def settle(self, response, token: str | None = None, timeout_s: float = 120) -> dict:
        """A 201's submission once the fetch worker is done with it (its status leaves `fetching`)."""
        assert response.status_code == 201, response.text
        sid = response.json()["submission_id"]
        deadline = time.time() + timeout_s
        while (s := self.status(sid, token))["status"] == "fetching":
            assert time.time() < deadline, f"{sid} still fetching after {timeout_s} s"
            time.sleep(0.1)
        return s

    def quota(self, task: str = TASK, split: str = "dev") -> dict:
        r = self.client.get(
            "/api/quota", params={"task": task, "split": split}, headers={"Authorization": f"Bearer {self.token}"}
        )
        assert r.status_code == 200, r.text
        return r.json()

    def stored(self) -> dict:
        """What a submission could have left behind: rows, sealed entries, staging directories."""
        from speculator_arena.frontdoor.state import connect

        con = connect(self.home)
        rows = con.execute("SELECT count(*) FROM submissions").fetchone()[0]
        con.close()
        sealed = self.home / "sealed"
        staging = self.home / "frontdoor" / "staging"
        return {
            "submissions": rows,
            "sealed": sorted(p.name for p in sealed.iterdir()) if sealed.exists() else [],
            "staging": sorted(p.name for p in staging.iterdir()) if staging.exists() else [],
        }

    def assert_fetch_refused(self, response, status: int, words: str) -> None:
        """Accepted as `fetching`, then refused by the fetch worker: nothing sealed, no quota used."""
        s = self.settle(response)
        assert s["status"] == "refused" and s["refusal_status"] == status, (s["refusal"], s["refusal_status"])
        assert words in s["refusal"], s
        stored = self.stored()
        assert stored["sealed"] == [] and stored["staging"] == [], stored
        assert self.quota()["used"] == 0

    def assert_refused(self, response, status: int, words: str) -> None:
        assert response.status_code == status, response.text
        assert words in response.json()["error"], response.json()
        assert self.stored() == {"submissions": 0, "sealed": [], "staging": []}
        assert self.quota()["used"] == 0


@pytest.fixture
def front(arena_home, monkeypatch):
    from fastapi.testclient import TestClient

    from speculator_arena.frontdoor.accounts import invite
    from speculator_arena.frontdoor.api import create_app
    from speculator_arena.frontdoor.state import connect

    monkeypatch.setenv("ARENA_ENGINE_REPO_SCHEMES", "file")
    con = connect(arena_home)
    account, token = invite(con, "alice")
    con.close()
    with TestClient(create_app(arena_home)) as client:
        yield Front(arena_home, client, token, account.account_id)


@pytest.fixture
def hub(monkeypatch, tmp_path):
    from hub_server import HubServer
    from huggingface_hub import constants

    with HubServer() as server:
        # The client reads HF_ENDPOINT when it is imported; a test session may have imported it already.
        monkeypatch.setattr(constants, "ENDPOINT", server.url)
        monkeypatch.setattr(
            constants, "HUGGINGFACE_CO_URL_TEMPLATE", server.url + "/{repo_id}/resolve/{revision}/{filename}"
        )
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
        monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        yield server


class GitDaemon:
    """`git daemon` on 127.0.0.1 serving the repositories under `base` (read-only, all exported):
    repositories reached over the network as a participant's would be."""

    def __init__(self, base: Path):
        import socket
        import subprocess

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"git://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            ["git", "daemon", "--reuseaddr", "--export-all", f"--base-path={base}", "--listen=127.0.0.1",
             f"--port={self.port}", str(base)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.time() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                assert time.time() < deadline and self.proc.poll() is None, "git daemon did not start"
                time.sleep(0.1)

    def stop(self) -> None:
        # SIGKILL when SIGTERM is not enough: a full CI run once saw the daemon outlive 10 s of
        # SIGTERM (two teardown errors, nothing wrong with the tests themselves)
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


@pytest.fixture
def git_daemon(public_dir):
    daemon = GitDaemon(public_dir)
    yield daemon
    daemon.stop()


def finish_evaluation(home, evaluation_id: str, status: str) -> None:
    """The evaluation's row as the runner writes it (runners.status), with a final status."""
    import time

    from speculator_arena.runners.status import write_status
    from speculator_arena.warehouse import Warehouse

    now = time.time()
    row = {
        "evaluation_id": evaluation_id,
        "task_id": "local-smollm2",
        "split": "dev",
        "protocol_version": 1,
        "submission_id": evaluation_id,
        "account_id": "a",
        "is_reference": False,
        "label": "x",
        "solution_kind": "ngram",
        "status": "queued",
        "void_reason": None,
        "failure_reason": None,
        "created_at": now,
        "updated_at": now,
        "provenance": "{}",
    }
    write_status(Warehouse(home), row, status, void_reason="stock engine died" if status == "void" else None)


@pytest.fixture
def workspace(tmp_path, monkeypatch) -> Path:
    """An operator-approved workspace (ARENA_WORKSPACES) for LowBArena checkpoints; a test that
    starts an API server asks for it first, so the server sees it."""
    ws = tmp_path / "workspace"
    ws.mkdir()
    monkeypatch.setenv("ARENA_WORKSPACES", str(ws))
    return ws
