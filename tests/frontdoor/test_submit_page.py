"""The board's Submit page, run by Streamlit's AppTest against the real API (uvicorn on
127.0.0.1): a refusal shows the API's reason, a repository engine is accepted and its status
shown."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from .conftest import REPO, TASK
from .test_refusals import _git_repo, _head
from .test_server import ApiServer

APP = REPO / "speculator_arena" / "dashboards" / "app.py"


@pytest.fixture
def page(arena_home, monkeypatch):
    from streamlit.testing.v1 import AppTest

    from speculator_arena.frontdoor.accounts import invite
    from speculator_arena.frontdoor.state import connect

    monkeypatch.setenv("ARENA_ENGINE_REPO_SCHEMES", "file")
    _, token = invite(connect(arena_home), "streamlit-user")
    server = ApiServer(arena_home)
    monkeypatch.setenv("ARENA_URL", server.url)
    try:
        at = AppTest.from_file(str(APP), default_timeout=120)
        at.run()
        at.switch_page("views/submit.py").run()
        yield at, token
    finally:
        server.stop()


def _fill(at, token: str, repo: str) -> None:
    at.text_input(key="submit_token").set_value(token)
    at.selectbox(key="submit_task").set_value(TASK)
    at.selectbox(key="submit_kind").set_value("ngram")
    at.text_input(key="submit_repo").set_value(repo)


def test_submit_page_shows_a_refusal(page, tmp_path):
    at, _ = page
    assert not at.exception, [e.value for e in at.exception]
    _fill(at, "sa_wrong", f"file://{tmp_path}@{'a' * 40}")
    at.button[0].click().run()  # the form's submit button
    assert not at.exception, [e.value for e in at.exception]
    assert any("401" in e.value and "invalid or revoked token" in e.value for e in at.error), [
        e.value for e in at.error
    ]


def test_submit_page_submits_and_shows_the_status(page, public_dir, arena_home):
    at, token = page
    repo = _git_repo(public_dir / "engine", {"launch.sh": (REPO / "engines" / "dev-ngram" / "launch.sh").read_bytes()})
    _fill(at, token, f"file://{repo}@{_head(repo)}")
    at.button[0].click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    success = at.success[0].value
    assert success.startswith("Accepted: submission sub-")
    sid = success.split("submission ")[1].split(",")[0]
    from speculator_arena.frontdoor.state import connect

    row = connect(arena_home).execute("SELECT * FROM submissions WHERE submission_id = ?", (sid,)).fetchone()
    assert row["engine_source"] == f"file://{repo}@{_head(repo)}" and row["solution_kind"] == "ngram"
    assert at.text_input(key="submit_follow").value == sid
    deadline = time.time() + 60
    while True:  # the repository is fetched out of the request: `fetching`, then `queued`
        next(b for b in at.button if b.label == "Refresh status").click().run()
        assert not at.exception, [e.value for e in at.exception]
        if at.metric[0].value != "fetching" or time.time() > deadline:
            break
        time.sleep(0.5)
    assert at.metric[0].value == "queued", [e.value for e in at.error]
    row = connect(arena_home).execute("SELECT * FROM submissions WHERE submission_id = ?", (sid,)).fetchone()
    assert Path(row["engine_dir"]).name == "tree"


def test_submit_page_sends_a_lowbarena_checkpoint(workspace, page, public_dir, arena_home):
    """A LowBArena task: the page asks for the quantized checkpoint and the quantization's label
    in place of a speculator and a speculator kind; the API seals the checkpoint."""
    from speculator_arena.frontdoor.state import connect

    from .test_lowb_submissions import LOWB_TASK, prepare_target, quantized_checkpoint

    at, token = page
    prepare_target(arena_home, LOWB_TASK, 1_000_000)
    ckpt = quantized_checkpoint(workspace / "smollm2-w8")
    repo = _git_repo(
        public_dir / "engine", {"launch.sh": (REPO / "engines" / "dev-lowb-stock" / "launch.sh").read_bytes()}
    )
    at.text_input(key="submit_token").set_value(token)
    at.selectbox(key="submit_task").set_value(LOWB_TASK).run()
    keys = {w.key for w in at.text_input}
    assert "submit_artifact" in keys and "submit_speculator" not in keys
    at.text_input(key="submit_lowb_kind").set_value("int8")
    at.text_input(key="submit_repo").set_value(f"file://{repo}@{_head(repo)}")
    at.text_input(key="submit_artifact").set_value(f"workspace:{ckpt}")
    at.button[0].click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    sid = at.success[0].value.split("submission ")[1].split(",")[0]
    row = connect(arena_home).execute("SELECT * FROM submissions WHERE submission_id = ?", (sid,)).fetchone()
    assert row["task_id"] == LOWB_TASK and row["solution_kind"] == "int8"
    assert row["artifact_source"] == f"workspace:{ckpt}" and row["artifact_digest"]
