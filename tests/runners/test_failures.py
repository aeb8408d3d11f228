"""A real paired evaluation, and its failures: clear status, nothing stored is lost, no partial
figure as whole.

The healthy evaluation is the session's real one (the dev engines serving SmolLM2 on CPU,
tests/real_evaluation.py). The failures need faults a real engine cannot be made to show on cue
(never healthy, dying after N requests, a runner killed mid-pass), so they run the stand-in stdlib
SSE engine (sse_engine.py) with the real local pools and target."""

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
from stand_in import FAST, stand_in_spec

from speculator_arena.protocol import load_protocol
from speculator_arena.runners.harness import Evaluation, resume_dead
from speculator_arena.runners.spec import EvaluationSpec
from speculator_arena.runners.status import EvaluationStateError, read_state
from speculator_arena.warehouse import Warehouse
from speculator_arena.warehouse.evaluations import current_row


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


def test_real_paired_evaluation_is_measured(real_evaluation, smollm2_target):
    """The session's real evaluation (tests/real_evaluation.py: the dev n-gram engine against the
    stock engine, both serving SmolLM2 on CPU) is whole: every timed pass of both engines, the same
    sessions and seeds on both sides, warm-ups, counters, probes, the timed starts its version's
    pairing asks and one probe start per engine, each stopped by SIGTERM, and a measured evaluation
    that scores to a number."""
    home, eid = real_evaluation.home, real_evaluation.evaluation_id
    wh = Warehouse(home)
    row = current_row(wh, eid)
    assert row["status"] == "measured", (row["void_reason"], row["failure_reason"])
    task = load_protocol(row["protocol_version"]).task(row["task_id"])
    passes = wh.read_table("passes", eid).to_pylist()
    assert sorted((p["engine"], p["pass_id"]) for p in passes) == sorted(
        (e, f"{w}-{i}")
        for e in ("candidate", "stock")
        for w in ("solo", "team", "busy")
        for i in range(task.passes_per_workload)
    )
    assert all(p["status"] == "complete" for p in passes)
    device = json.loads(row["provenance"])["device"]
    assert all(p["memory_status"] == ("sampled" if device["nvml"] else "unavailable") for p in passes)
    if not device["nvml"]:
        assert wh.read_table("memory", eid).num_rows == 0  # absent, not zeros
        assert all(p["memory_note"] for p in passes)
    reqs = wh.read_table("requests", eid).to_pylist()
    # The same sessions, seeds and order for both engines: each lane's first request matches.
    assert all(p["lanes"] == task.lanes[p["workload"]] for p in passes)
    lanes_of = {p["pass_id"]: p["lanes"] for p in passes}
    for pid in ("solo-0", "team-1", f"busy-{task.passes_per_workload - 1}"):
        for lane in range(lanes_of[pid]):
            firsts = {
                e: min(
                    (r for r in reqs if r["engine"] == e and r["pass_id"] == pid and r["lane"] == lane),
                    key=lambda r: r["sent_at"],
                )
                for e in ("candidate", "stock")
            }
            assert firsts["candidate"]["session_id"] == firsts["stock"]["session_id"]
            assert firsts["candidate"]["seed"] == firsts["stock"]["seed"]
    assert any(r["pass_id"].startswith("warmup-") for r in reqs)
    timed = [r for r in reqs if not r["pass_id"].startswith("warmup-")]
    for e in ("candidate", "stock"):  # real replies: every pass of both engines finished requests with text
        for pid in lanes_of:
            done = [r for r in timed if r["engine"] == e and r["pass_id"] == pid and r["done"]]
            assert done and sum(r["output_tokens"] for r in done) > 0, (e, pid)
    texts = {(r["engine"], r["request_id"]): r["text"] for r in wh.read_table("replies", eid).to_pylist()}
    assert all(texts.get((r["engine"], r["request_id"])) for r in timed if r["done"] and r["output_tokens"])
    mets = wh.read_table("metrics", eid).to_pylist()
    assert {m["phase"] for m in mets} == {"before", "after"}
    assert {m["engine"] for m in mets} == {"candidate", "stock"}
    for table, engine_col in (
        ("probe_greedy", "engine"),
        ("probe_fidelity", "engine"),
        ("probe_scored", "reply_engine"),
    ):
        probes = wh.read_table(table, eid).to_pylist()
        assert {p[engine_col] for p in probes if p["answered"]} == {"candidate", "stock"}, table
    starts = wh.read_table("engine_starts", eid).to_pylist()
    if task.pairing == "interleaved":  # both resident once; the probes on them when the version says so
        expected = [("candidate", "timed"), ("stock", "timed")]
        restarts = not task.interleaving.probes_on_timed_start
    else:
        expected, restarts = [(engine, "timed") for engine, _ in task.pass_halves()], True
    expected += [("candidate", "probe"), ("stock", "probe")] if restarts else []
    assert sorted((s["engine"], s["purpose"]) for s in starts) == sorted(expected)
    assert all(s["stop_signal"] == "SIGTERM" and s["healthy_at"] and not s["died"] for s in starts)
    scored = _scores(home, eid).evaluations.iloc[0]
    assert scored["specscore"] == scored["specscore"], scored["specscore_reason"]  # a number, never blank
    with pytest.raises(EvaluationStateError, match="already measured"):
        Evaluation(
            EvaluationSpec(
                task_id=row["task_id"], engine="engines/dev-ngram", evaluation_id=eid, target=str(smollm2_target)
            ),
            home=home,
        ).run()


def test_candidate_never_healthy_fails_and_scores_zero(built_home, engine_factory, profile):
    """Stand-in SSE engine: only it can be made never to answer /health (mode never_healthy)."""
    profile(**FAST)
    ev = Evaluation(
        stand_in_spec("fx-mute", engine_factory("mute", "never_healthy"), engine_factory("ok"), built_home),
        home=built_home["home"],
        progress=lambda m: None,
    )
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
    """Stand-in SSE engine: only it can be made to die after a set number of requests (die_after=6)."""
    profile(**FAST)
    ev = Evaluation(
        stand_in_spec("fx-die", engine_factory("dies", "die_after=6"), engine_factory("ok"), built_home),
        home=built_home["home"],
        progress=lambda m: None,
    )
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
    """Stand-in SSE engines: the stock engine must fail to start on cue (never_healthy), which the
    real stock engine never does."""
    profile(**FAST)
    ev = Evaluation(
        stand_in_spec("fx-stockfail", engine_factory("ok"), engine_factory("mute", "never_healthy"), built_home),
        home=built_home["home"],
        progress=lambda m: None,
    )
    assert ev.run() == "void"
    wh = Warehouse(built_home["home"])
    row = current_row(wh, "fx-stockfail")
    assert row["void_reason"].startswith("stock engine: stock engine did not answer /health")
    passes = wh.read_table("passes", "fx-stockfail").to_pylist()
    assert len(passes) == 9 and {p["engine"] for p in passes} == {"candidate"}
    s = _scores(built_home["home"], "fx-stockfail").evaluations.iloc[0]
    assert s["specscore"] != s["specscore"] and s["specscore_reason"]  # blank with a reason, never a number


def test_runner_killed_mid_pass_then_resume_voids(built_home, engine_factory, profile, tmp_path):
    """Stand-in SSE engine: the runner is SIGKILLed mid-pass, which needs an evaluation of its own
    (the shared real one must stay whole), and the stand-in makes that one take seconds, not minutes."""
    profile(**{**FAST, "workloads": {w: {**v, "pass_seconds": 3} for w, v in FAST["workloads"].items()}})
    eng = engine_factory("ok")
    home = built_home["home"]
    wh = Warehouse(home)
    cmd = [
        sys.executable,
        "-m",
        "speculator_arena.runners.evaluate",
        "--task",
        "local-smollm2",
        "--engine",
        str(eng),
        "--stock-engine",
        str(eng),
        "--evaluation-id",
        "fx-killed",
        "--target",
        str(built_home["target"]),
        "--home",
        str(home),
    ]
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
