"""Refusals after the request (issue 35): what the fetch worker refuses (a hub speculator without
`*.safetensors`, one over the target's share, a hub repository or a git repository that does not
exist) is shown as `refused` with its reason by `GET /api/submissions/<id>` and by the board's
Submit page, its quota is refunded (it counted while it was fetched), and nothing stays sealed
(not even the inline engine sealed with it at the request).

Everything is real: `arena api` under uvicorn, its fetch worker and sandboxed children, the
`huggingface_hub` client against the hub-shaped server on 127.0.0.1 (`hub_server.py`, held
midway through the fetch by its gate), `git daemon` on 127.0.0.1, and the Streamlit page run by
AppTest against the server."""

from __future__ import annotations

import tempfile
from pathlib import Path

import httpx
import pytest

from speculator_arena.protocol import load_protocol

from .conftest import REPO, Front, GitDaemon, submission
from .test_server import ApiServer
from .test_speculator_and_quota import SPEC_REV, TARGET_TASK

APP = REPO / "speculator_arena" / "dashboards" / "app.py"
TARGET_BYTES = 4002  # the target's allowed files on the hub


@pytest.fixture(scope="module")
def arena():
    """`arena api` in a home of its own, fetching from the local hub and the local git daemon."""
    from hub_server import HubServer

    from speculator_arena.frontdoor.accounts import invite
    from speculator_arena.frontdoor.state import connect
    from speculator_arena.sealed.trees import remove_tree

    around = Path(tempfile.mkdtemp(prefix="arena-fd-"))
    around.chmod(0o755)
    home = around / "arena_home"
    con = connect(home)
    account, token = invite(con, "refused-user")
    con.close()
    task = load_protocol().tasks[TARGET_TASK]
    share = load_protocol().submission.speculator_max_share_of_target_bytes
    with HubServer() as hub:
        hub.add(task.model, task.revision, {"config.json": b"{}", "model.safetensors": b"w" * 4000, "m.py": b"x"})
        hub.add("org/no-weights", SPEC_REV, {"config.json": b"{}", "modeling.py": b"import os\n"})
        hub.add("org/too-big", SPEC_REV, {"config.json": b"{}", "model.safetensors": b"s" * int(TARGET_BYTES * share)})
        (around / "git").mkdir()
        daemon = GitDaemon(around / "git")
        env = {
            "HF_ENDPOINT": hub.url,
            "HF_HUB_OFFLINE": "0",
            "HF_HUB_DISABLE_TELEMETRY": "1",
            "ARENA_ENGINE_REPO_SCHEMES": "git",
            "ARENA_FETCH_ALLOW": "127.0.0.1",
        }
        server = ApiServer(home, env=env)
        http = httpx.Client(base_url=server.url, timeout=60)
        try:
            yield Front(home, http, token, account.account_id), hub, daemon, server
        finally:
            http.close()
            server.stop()
            daemon.stop()
    remove_tree(around)


def _hub_speculator(repo: str) -> dict:
    return submission(task_id=TARGET_TASK, speculator={"uri": repo, "revision": SPEC_REV})


def _git_engine(daemon: GitDaemon) -> dict:
    doc = submission(task_id=TARGET_TASK)
    doc["engine"] = {"repository": f"{daemon.url}/absent.git", "commit": "c" * 40}
    return doc


CASES = {
    "hub-without-safetensors": (lambda d: _hub_speculator("org/no-weights"), 422, "no *.safetensors"),
    "hub-over-the-share": (lambda d: _hub_speculator("org/too-big"), 413, "over its limit"),
    "hub-missing": (lambda d: _hub_speculator("org/absent"), 422, "org/absent"),
    "git-missing": (_git_engine, 422, "cannot be fetched"),
}


def _page(server, token: str, submission_id: str):
    """The Submit page following `submission_id`, its status refreshed once."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(APP), default_timeout=120)
    at.run()
    at.switch_page("views/submit.py").run()
    at.text_input(key="submit_token").set_value(token)
    at.text_input(key="submit_follow").set_value(submission_id).run()
    next(b for b in at.button if b.label == "Refresh status").click().run()
    assert not at.exception, [e.value for e in at.exception]
    return at


@pytest.mark.parametrize("case", list(CASES))
def test_a_refused_fetch_says_so_refunds_and_seals_nothing(arena, case, monkeypatch):
    front, hub, daemon, server = arena
    make, code, words = CASES[case]
    before = front.stored()
    held = case.startswith("hub")
    if held:  # the fetch waits on the hub: the submission is `fetching` and counts meanwhile
        hub.gate.clear()
    try:
        r = front.post(make(daemon))
        assert r.status_code == 201 and r.json()["status"] == "fetching", r.text
        sid = r.json()["submission_id"]
        if held:
            assert r.json()["engine_digest"]  # its inline engine, sealed at the request
            assert front.status(sid)["status"] == "fetching"
            assert front.quota(TARGET_TASK)["used"] == 1
    finally:
        hub.gate.set()
    s = front.settle(r, timeout_s=120)
    assert (s["status"], s["refusal_status"]) == ("refused", code), s
    assert words in s["refusal"] and str(front.home) not in s["refusal"], s["refusal"]
    assert s["progress"] is None and s["position"] is None
    assert front.quota(TARGET_TASK) == {
        "task_id": TARGET_TASK,
        "split": "dev",
        "used": 0,
        "limit": load_protocol().quota("participant", "dev"),
        "left": load_protocol().quota("participant", "dev"),
    }
    after = front.stored()
    assert after["sealed"] == before["sealed"] == [] and after["staging"] == [], after
    assert after["submissions"] == before["submissions"] + 1  # the refused row, kept to be shown
    # the board's Submit page shows the same
    monkeypatch.setenv("ARENA_URL", server.url)
    at = _page(server, front.token, sid)
    assert at.metric[0].value == "refused"
    assert any(e.value.startswith(f"Refused ({code}): ") and words in e.value for e in at.error), [
        e.value for e in at.error
    ]


def test_the_queue_never_runs_a_refused_submission(arena):
    """What the Dagster sensor reads: no refused submission is waiting."""
    from speculator_arena.frontdoor.queue import waiting
    from speculator_arena.frontdoor.state import connect
    from speculator_arena.warehouse import Warehouse

    front, _hub, daemon, _server = arena
    s = front.settle(front.post(_git_engine(daemon)))
    assert s["status"] == "refused"
    con = connect(front.home)
    try:
        assert s["submission_id"] not in {w["submission_id"] for w in waiting(con, Warehouse(front.home))}
    finally:
        con.close()
