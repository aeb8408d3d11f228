"""Tried as a new user would: an operator invites an account, the participant submits
`engines/dev-ngram` inline with `arena submit` to `arena api` on localhost, the queue runs the
evaluation (the real runner, the development engine, SmolLM2 on CPU, the CI profile), and the
account is ranked on the board JSON as a participant, not a reference."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import httpx
import pytest

from .conftest import DEV_NGRAM, REPO, TASK
from .test_server import ApiServer

# one module fixture: the queue runs the submission's evaluation, which the three tests read
pytestmark = [pytest.mark.slow, pytest.mark.serial, pytest.mark.engines]


def _arena(args, env, **kw):
    return subprocess.run(
        [sys.executable, "-m", "speculator_arena.cli", *args], env=env, cwd=REPO, capture_output=True, text=True, **kw
    )


@pytest.fixture(scope="module")
def door(tmp_path_factory, shared_data, smollm2_target, built_local):
    """The whole way in, once: invite, `arena submit` (watching), `arena queue work --once`, and the
    board JSON while the API serves; what each step answered, for the tests below."""
    sys.path.insert(0, str(REPO / "tests" / "runners"))
    from ci_profile import ENGINE_THREADS, stage_tiny_protocol

    root = tmp_path_factory.mktemp("door_e2e")
    home = root / "arena_home"
    # The session's pools (tests/pool_fixtures.py), copied: the served pool is a link into its builds.
    shutil.copytree(built_local["home"] / "pools", home / "pools", symlinks=True)
    # One pass of a second or two per workload, no warm-up waves and the fewest probes that leave
    # every gate measured: what is under test is the way in (invite, submit, queue, board), not the
    # speed figures or the gates' power, which the session's real evaluation and the attack runs test.
    # The statistical gates are loose (ci_profile.LOOSE_LIMITS): with this few probe items an honest
    # engine fails one of them by chance about one run in ten, and the rank asserted below is the
    # subject here.
    version = stage_tiny_protocol(root / "protocol")
    env = dict(
        os.environ,
        ARENA_HOME=str(home),
        ARENA_PROTOCOL_DIR=str(root / "protocol"),
        ARENA_SHARED_DATA=str(shared_data),
        OMP_NUM_THREADS=ENGINE_THREADS,
    )
    with pytest.MonkeyPatch.context() as mp:
        for k, v in env.items():
            mp.setenv(k, v)
        invited = _arena(["accounts", "invite", "newcomer"], env, check=True)
        token = invited.stdout.strip()
        server = ApiServer(home)
        try:
            submit = subprocess.Popen(
                [sys.executable, "-m", "speculator_arena.cli", "submit", "--task", TASK, "--split", "dev"]
                + ["--engine", str(DEV_NGRAM), "--kind", "ngram", "--method", "n-gram lookup, 4 tokens", "--poll", "2"],
                env=dict(env, ARENA_URL=server.url, ARENA_TOKEN=token),
                cwd=REPO,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            deadline = time.time() + 60
            while not list((home / "frontdoor").glob("state.db")) or _count(home) == 0:
                assert time.time() < deadline and submit.poll() is None, submit.communicate()
                time.sleep(0.5)
            worker = _arena(["queue", "work", "--once"], env, timeout=1800)
            assert worker.returncode == 0, worker.stderr[-3000:]
            out, err = submit.communicate(timeout=300)
            board = httpx.get(f"{server.url}/api/board", params={"task": TASK, "split": "dev"}, timeout=120).json()
        finally:
            server.stop()
    result = json.loads(out)
    return {
        "home": home,
        "env": env,
        "version": version,
        "invited": invited,
        "token": token,
        "submit_rc": submit.returncode,
        "err": err,
        "status": result["submission"],
        "entry": result["board"],
        "board": board,
    }


def test_an_invited_participant_submits_and_watches_it_measured(door):
    assert door["token"].startswith("sa_") and "shown once" in door["invited"].stderr
    status, err = door["status"], door["err"]
    assert status["status"] == "measured", (status["void_reason"], status["failure_reason"], err[-2000:])
    assert door["submit_rc"] == 0, err[-2000:]
    for word in ("queued", "running", "measured"):
        assert word in err  # the participant watched it move


def test_the_board_ranks_the_submission_as_a_participant(door):
    status, entry, board = door["status"], door["entry"], door["board"]
    assert entry is not None and entry["section"] == "participants" and entry["is_reference"] is False
    assert entry["specscore"] is not None and entry["label"] == "newcomer", entry
    assert board["protocol_version"] == door["version"]
    ours = [r for r in board["participants"] if r["evaluation_id"] == status["evaluation_id"]]
    assert len(ours) == 1 and ours[0]["account_id"].startswith("acct-")
    assert not any(r["evaluation_id"] == status["evaluation_id"] for r in board["references"])
    assert ours[0]["ranked"] and ours[0]["rank"] == 1, (ours[0].get("failed_gates"), ours[0])


def test_the_warehouse_and_the_evaluation_page_carry_the_sealed_digest(door, monkeypatch):
    from speculator_arena.warehouse import Warehouse
    from speculator_arena.warehouse.evaluations import current_row

    status = door["status"]
    row = current_row(Warehouse(door["home"]), status["evaluation_id"])
    provenance = json.loads(row["provenance"])
    assert provenance["engine_sealed_digest"] == status["engine_digest"]
    assert row["submission_id"] == status["submission_id"] and row["is_reference"] is False

    # the board's evaluation page shows the sealed digest in its provenance
    from streamlit.testing.v1 import AppTest

    for k in ("ARENA_HOME", "ARENA_PROTOCOL_DIR"):
        monkeypatch.setenv(k, door["env"][k])
    at = AppTest.from_file(str(REPO / "speculator_arena" / "dashboards" / "app.py"), default_timeout=180)
    at.query_params.update({"task": TASK, "split": "dev", "evaluation": status["evaluation_id"]})
    at.run()
    at.switch_page("views/evaluation.py").run()
    assert not at.exception, [e.value for e in at.exception]
    assert any(status["engine_digest"] in str(j.value) for j in at.json)


def _count(home) -> int:
    from speculator_arena.frontdoor.state import connect

    con = connect(home)
    try:
        return con.execute("SELECT count(*) FROM submissions").fetchone()[0]
    finally:
        con.close()
