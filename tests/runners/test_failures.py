"""Failures of a real paired evaluation, with real engine processes (stdlib SSE engines), the
real local pools and target: clear status, nothing stored is lost, no partial figure as whole."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from speculator_arena.runners.harness import Evaluation, EvaluationSpec, resume_dead
from speculator_arena.runners.status import EvaluationStateError, current_row, read_state
from speculator_arena.warehouse import Warehouse

FAST = {
    "workloads": {w: {"interleave": 1 if w == "solo" else 2, "pass_seconds": 1,
                      "speed": "request_time" if w == "solo" else "busy_window"} for w in ("solo", "team", "busy")},
    "start_stop": {"health_timeout_seconds": 3, "sigterm_grace_seconds": 3},
    "grace_seconds": 5,
}


def _spec(eid, cand, stock, built):
    return EvaluationSpec(task_id="local-smollm2", engine=str(cand), stock_engine=str(stock), evaluation_id=eid,
                          label=eid, target=str(built["target"]))


def _all_parts_whole(home: Path) -> int:
    n = 0
    for f in (home / "raw").rglob("*.parquet"):
        assert not f.name.startswith(".tmp-")
        pq.read_table(f)  # a torn file would raise
        n += 1
    return n


def _scores(home, eid):
    from speculator_arena.scoring import score_warehouse

    return score_warehouse(Warehouse(home), evaluation_ids=[eid])


def test_paired_evaluation_with_sse_engines_is_measured(built_home, engine_factory, profile):
    profile(**FAST)
    eng = engine_factory("ok")
    ev = Evaluation(_spec("fx-ok", eng, eng, built_home), home=built_home["home"], progress=lambda m: None)
    assert ev.run() == "measured"
    wh = Warehouse(built_home["home"])
    passes = wh.read_table("passes", "fx-ok").to_pylist()
    assert sorted((p["engine"], p["pass_id"]) for p in passes) == sorted(
        (e, f"{w}-{i}") for e in ("candidate", "stock") for w in ("solo", "team", "busy") for i in range(3))
    assert all(p["status"] == "complete" for p in passes)
    assert all(p["memory_status"] == ("sampled" if ev.device.available else "unavailable") for p in passes)
    if not ev.device.available:
        assert wh.read_table("memory", "fx-ok").num_rows == 0  # absent, not zeros
        assert all(p["memory_note"] for p in passes)
    reqs = wh.read_table("requests", "fx-ok").to_pylist()
    # The same sessions, seeds and order for both engines: each lane's first request matches.
    for pid, lanes in (("solo-0", 1), ("team-1", 2), ("busy-2", 3)):
        for lane in range(lanes):
            firsts = {e: min((r for r in reqs if r["engine"] == e and r["pass_id"] == pid and r["lane"] == lane),
                             key=lambda r: r["sent_at"]) for e in ("candidate", "stock")}
            assert firsts["candidate"]["session_id"] == firsts["stock"]["session_id"]
            assert firsts["candidate"]["seed"] == firsts["stock"]["seed"]
    assert any(r["pass_id"].startswith("warmup-") for r in reqs)
    mets = wh.read_table("metrics", "fx-ok").to_pylist()
    assert {m["phase"] for m in mets} == {"before", "after"}
    starts = wh.read_table("engine_starts", "fx-ok").to_pylist()
    assert sorted((s["engine"], s["purpose"]) for s in starts) == [
        ("candidate", "probe"), ("candidate", "timed"), ("stock", "probe"), ("stock", "timed")]
    assert all(s["stop_signal"] == "SIGTERM" and s["healthy_at"] for s in starts)
    assert current_row(wh, "fx-ok")["status"] == "measured"
    with pytest.raises(EvaluationStateError, match="already measured"):
        Evaluation(_spec("fx-ok", eng, eng, built_home), home=built_home["home"]).run()


def test_candidate_never_healthy_fails_and_scores_zero(built_home, engine_factory, profile):
    profile(**FAST)
    ev = Evaluation(_spec("fx-mute", engine_factory("mute", "never_healthy"), engine_factory("ok"), built_home),
                    home=built_home["home"], progress=lambda m: None)
    t0 = time.time()
    assert ev.run() == "failed"
    assert time.time() - t0 < 60
    wh = Warehouse(built_home["home"])
    row = current_row(wh, "fx-mute")
    assert "did not answer /health within 3 s" in row["failure_reason"]
    starts = wh.read_table("engine_starts", "fx-mute").to_pylist()
    assert len(starts) == 1 and starts[0]["healthy_at"] is None and starts[0]["engine"] == "candidate"
    assert wh.read_table("passes", "fx-mute").num_rows == 0
    s = _scores(built_home["home"], "fx-mute").evaluations.iloc[0]
    assert s["specscore"] == 0


def test_candidate_dies_mid_pass(built_home, engine_factory, profile):
    profile(**FAST)
    ev = Evaluation(_spec("fx-die", engine_factory("dies", "die_after=6"), engine_factory("ok"), built_home),
                    home=built_home["home"], progress=lambda m: None)
    assert ev.run() == "failed"
    wh = Warehouse(built_home["home"])
    row = current_row(wh, "fx-die")
    assert row["failure_reason"].startswith("candidate engine died during ")
    passes = wh.read_table("passes", "fx-die").to_pylist()
    assert passes and all(p["engine"] == "candidate" for p in passes)
    assert [p["status"] for p in passes if p["status"] == "aborted"] == ["aborted"] or "warmup" in row["failure_reason"]
    starts = wh.read_table("engine_starts", "fx-die").to_pylist()
    assert starts[0]["died"] is True
    s = _scores(built_home["home"], "fx-die").evaluations.iloc[0]
    assert s["specscore"] == 0
    assert _all_parts_whole(built_home["home"]) > 0


def test_stock_failure_voids_and_keeps_candidate_rows(built_home, engine_factory, profile):
    profile(**FAST)
    ev = Evaluation(_spec("fx-stockfail", engine_factory("ok"), engine_factory("mute", "never_healthy"), built_home),
                    home=built_home["home"], progress=lambda m: None)
    assert ev.run() == "void"
    wh = Warehouse(built_home["home"])
    row = current_row(wh, "fx-stockfail")
    assert row["void_reason"].startswith("stock engine: stock engine did not answer /health")
    passes = wh.read_table("passes", "fx-stockfail").to_pylist()
    assert len(passes) == 9 and {p["engine"] for p in passes} == {"candidate"}
    s = _scores(built_home["home"], "fx-stockfail").evaluations.iloc[0]
    assert s["specscore"] != s["specscore"] and s["specscore_reason"]  # blank with a reason, never a number


def test_runner_killed_mid_pass_then_resume_voids(built_home, engine_factory, profile, tmp_path):
    profile(**{**FAST, "workloads": {w: {"interleave": 1 if w == "solo" else 2, "pass_seconds": 3,
                                         "speed": "request_time" if w == "solo" else "busy_window"}
                                     for w in ("solo", "team", "busy")}})
    eng = engine_factory("ok")
    home = built_home["home"]
    wh = Warehouse(home)
    cmd = [sys.executable, "-m", "speculator_arena.runners.evaluate", "--task", "local-smollm2", "--engine", str(eng),
           "--stock-engine", str(eng), "--evaluation-id", "fx-killed", "--target", str(built_home["target"]),
           "--home", str(home)]
    proc = subprocess.Popen(cmd, env=dict(os.environ), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            st = read_state(wh, "fx-killed") or {}
            if st.get("phase") == "candidate team-0" and st.get("engine_pgid"):
                break
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            time.sleep(0.2)
        else:
            pytest.fail("the runner never reached candidate team-0")
        time.sleep(1.0)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    st = read_state(wh, "fx-killed")
    pgid = st["engine_pgid"]
    assert Path(st["engine_workspace"]).is_dir()
    assert current_row(wh, "fx-killed")["status"] == "running"  # what a dead runner leaves
    assert _all_parts_whole(home) > 0
    solo_before = wh.read_table("passes", "fx-killed").num_rows
    assert solo_before == 3  # solo-0..2 whole; team-0 was in flight and left no pass row
    # A new runner finds the stale run, kills the engine it left, and marks the evaluation void.
    assert resume_dead(wh, "fx-killed", progress=lambda m: None) == "void"
    row = current_row(wh, "fx-killed")
    assert row["void_reason"] == "runner died during candidate team-0"
    from speculator_arena.runners.lifecycle import _proc_pids

    deadline = time.time() + 10
    while _proc_pids(pgid=pgid) and time.time() < deadline:  # SIGKILL is asynchronous
        time.sleep(0.1)
    assert not _proc_pids(pgid=pgid), "the engine the dead runner left is still running"
    assert not Path(st["engine_workspace"]).exists()
    assert wh.read_table("passes", "fx-killed").num_rows == solo_before  # nothing stored was lost
    prov = json.loads(row["provenance"])
    assert "resumed_by" in prov
    s = _scores(home, "fx-killed").evaluations.iloc[0]
    assert s["specscore"] != s["specscore"]
