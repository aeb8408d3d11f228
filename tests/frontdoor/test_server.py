"""The API served by real uvicorn (`arena api`) on 127.0.0.1 in a subprocess: concurrent
submissions at an account's last free slot (two worker processes), and the server killed in the
middle of submissions (no accepted one lost, no half-written one stored)."""

from __future__ import annotations

import base64
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from speculator_arena.protocol import load_protocol

from .conftest import DEV_NGRAM, submission


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ApiServer:
    """`arena api` in a subprocess; `env` adds settings, `user` runs it as that user (from root)."""

    def __init__(self, home, workers: int = 1, env: dict | None = None, user: str | None = None):
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = dict(os.environ, ARENA_HOME=str(home), **(env or {}))
        ids = {}
        if user:
            import pwd

            pw = pwd.getpwnam(user)
            ids = dict(user=pw.pw_uid, group=pw.pw_gid, extra_groups=[])
            env["HOME"] = "/nonexistent"
        self.log = tempfile.TemporaryFile()  # a file, not a pipe: a server that logs much never blocks
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "speculator_arena.cli", "api", "--port", str(self.port), "--workers", str(workers)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=self.log,
            start_new_session=True,
            cwd=str(Path(__file__).resolve().parents[2]),
            **ids,
        )
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                if httpx.get(f"{self.url}/api/protocol", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if self.proc.poll() is not None:
                raise RuntimeError(f"arena api exited: {self.log_text()[-2000:]}")
            time.sleep(0.2)
        self.kill()
        raise RuntimeError("arena api did not answer within 60 s")

    def log_text(self) -> str:
        self.log.seek(0)
        return self.log.read().decode("utf-8", "replace")

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                pass
        self.kill()


@pytest.fixture
def server_factory(arena_home):
    started = []

    def start(workers: int = 1) -> ApiServer:
        s = ApiServer(arena_home, workers)
        started.append(s)
        return s

    yield start
    for s in started:
        s.stop()


def _invite(home, name, kind="participant") -> str:
    from speculator_arena.frontdoor.accounts import invite
    from speculator_arena.frontdoor.state import connect

    return invite(connect(home), name, kind)[1]


def test_concurrent_submissions_at_the_last_slot(arena_home, server_factory):
    """A study agent's one `test` slot; eight submissions at once to two uvicorn workers: one accepted."""
    server = server_factory(workers=2)
    token = _invite(arena_home, "racer", "study_agent")
    assert load_protocol().quota("study_agent", "test") == 1
    doc = submission(split="test")
    barrier = threading.Barrier(8)

    def fire(_):
        with httpx.Client(timeout=60) as c:
            barrier.wait()
            return c.post(f"{server.url}/api/submissions", json=doc, headers={"Authorization": f"Bearer {token}"})

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(fire, range(8)))
    codes = sorted(r.status_code for r in answers)
    assert codes == [201] + [429] * 7, [r.text for r in answers]
    assert all("quota used: 1 of 1 test" in r.json()["error"] for r in answers if r.status_code == 429)
    from speculator_arena.frontdoor.state import connect

    assert connect(arena_home).execute("SELECT count(*) FROM submissions").fetchone()[0] == 1


def test_server_killed_mid_submission(arena_home, server_factory):
    """SIGKILL while submissions are being taken: every 201 is stored whole; nothing else is."""
    from speculator_arena.frontdoor.state import connect
    from speculator_arena.sealed.archive import pack_engine
    from speculator_arena.sealed.store import store_dir, verify_sealed

    server = server_factory()
    token = _invite(arena_home, "victim")
    # engines big enough (random, incompressible) that a kill lands inside one
    engines = []
    for i in range(6):
        d = arena_home.parent / f"engine{i}"
        d.mkdir()
        (d / "launch.sh").write_bytes((DEV_NGRAM / "launch.sh").read_bytes())
        (d / "weights.bin").write_bytes(os.urandom(1_500_000))
        engines.append(base64.b64encode(pack_engine(d)).decode())
    answers: list = []

    def fire(inline):
        doc = submission()
        doc["engine"] = {"inline": inline}
        try:
            with httpx.Client(timeout=60) as c:
                answers.append(
                    c.post(f"{server.url}/api/submissions", json=doc, headers={"Authorization": f"Bearer {token}"})
                )
        except httpx.HTTPError as exc:
            answers.append(exc)

    threads = [threading.Thread(target=fire, args=(e,)) for e in engines]
    for t in threads:
        t.start()
    deadline = time.time() + 60
    while not any(getattr(a, "status_code", None) == 201 for a in answers) and time.time() < deadline:
        time.sleep(0.01)
    server.kill()
    for t in threads:
        t.join(60)
    accepted = {a.json()["submission_id"] for a in answers if getattr(a, "status_code", None) == 201}
    assert accepted, "no submission was accepted before the kill"
    assert len(accepted) < len(engines), "every submission finished before the kill: nothing was cut short"
    con = connect(arena_home)
    rows = {r["submission_id"]: dict(r) for r in con.execute("SELECT * FROM submissions")}
    assert accepted <= set(rows)  # no accepted submission lost
    for row in rows.values():  # and every stored one is whole: its sealed engine verifies
        assert verify_sealed(row["engine_dir"], arena_home) == row["engine_digest"]
    # a restarted server clears what the killed one left in staging and serves the stored ones
    server = server_factory()
    staging = arena_home / "frontdoor" / "staging"
    assert list(staging.iterdir()) == []
    for sid in accepted:
        r = httpx.get(f"{server.url}/api/submissions/{sid}", headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 200 and r.json()["status"] == "queued"
    sealed_ok = {row["engine_digest"] for row in rows.values()}
    for entry in store_dir(arena_home).iterdir():  # sealed copies without a row are whole too (inert)
        assert verify_sealed(entry / "tree", arena_home) == entry.name
    assert sealed_ok <= {e.name for e in store_dir(arena_home).iterdir()}
