"""The interleaved pairing (protocol v8's CPU tasks, issue 31) on real local evaluations: both engines
started once and resident, each as a user and in control groups of its own; every pass served by
one engine then the other in the evaluation's A B, B A, B A, A B order while the idle one is
frozen; the probes served by the same starts. And what a candidate gains by working while it is
not measured: nothing. A daemon that spins is frozen with it, a candidate that reaches the frozen
stock engine's port fails, CPU its control group uses while frozen fails it (0 with the reason,
never a void), and its user can neither signal nor read the stock engine's processes.

The stand-in SSE engines (stand_in.py) make each an evaluation of seconds; they run as the
engines' users, so the suite runs these as root (as CI does) and skips them otherwise.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from ci_profile import stage_ci_protocol
from stand_in import FAST, run_with_escaped_spinner, staged_runs

from speculator_arena.protocol import load_protocol
from speculator_arena.runners import freezer
from speculator_arena.runners.interleaved import STOCK_USER, engine_cgroup, pass_order
from speculator_arena.runners.lifecycle import ENGINE_USER
from speculator_arena.warehouse.evaluations import current_row

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scoring"))
import independent  # noqa: E402

pytestmark = pytest.mark.skipif(freezer.unavailable() is not None, reason=f"{freezer.unavailable()}")

PASSES = 4
INTERLEAVED = {
    "pairing": "interleaved",
    "interleaving": {"max_idle_cpu_seconds": 0.05, "probes_on_timed_start": True},
    "passes_per_workload": PASSES,
    "workloads": {w: dict(v, pass_seconds=3, requests_per_lane=2) for w, v in FAST["workloads"].items()},
}


@pytest.fixture(scope="module")
def interleaved(built_home, tmp_path_factory):
    """A protocol version staged with the interleaved pairing, and a runner of evaluations under it."""
    with staged_runs(tmp_path_factory.mktemp("interleaved"), built_home, INTERLEAVED) as run:
        yield run


@pytest.fixture(scope="module")
def hostile_but_harmless(interleaved):
    """A candidate that keeps a detached daemon spinning and tries to signal and read the stock
    engine's processes on every request: everything it tries is stopped by the design."""
    return interleaved("fx-interleaved", "idle_spin,touch_other")


def test_both_engines_start_once_and_serve_every_pass_in_turn(hostile_but_harmless):
    r = hostile_but_harmless
    wh, eid = r["wh"], r["eid"]
    assert r["status"] == "measured", r["row"]
    starts = sorted(wh.read_table("engine_starts", eid).to_pylist(), key=lambda s: s["start_index"])
    # two starts, both timed (the probes ran on them), each as a user of its own
    assert [s["purpose"] for s in starts] == ["timed", "timed"]
    users = {s["engine"]: s["run_as_user"] for s in starts}
    assert users == {"candidate": ENGINE_USER, "stock": STOCK_USER}
    assert all(s["unprivileged"] for s in starts)
    passes = wh.read_table("passes", eid).to_pylist()
    assert len(passes) == 2 * 3 * PASSES and all(p["status"] == "complete" for p in passes)
    # both resident through every pass
    assert max(s["healthy_at"] for s in starts) < min(p["started_at"] for p in passes)
    assert min(s["stopped_at"] for s in starts) > max(p["finished_at"] for p in passes)
    # the pairs follow each other in the evaluation's order, one engine at a time
    order = pass_order(eid, PASSES)
    by = {(p["workload"], p["pass_index"], p["engine"]): p for p in passes}
    for w in ("solo", "team", "busy"):
        for i, (first, second) in enumerate(order):
            a, b = by[w, i, first], by[w, i, second]
            assert a["finished_at"] <= b["started_at"], (w, i)
    served = sorted(passes, key=lambda p: p["started_at"])
    for x, y in zip(served, served[1:]):
        assert x["finished_at"] <= y["started_at"]
    # each pass served the same turns on both engines: the fixed work per lane
    reqs = wh.read_table("requests", eid).to_pylist()
    turns = {}
    for q in reqs:
        if q["pass_index"] is not None:
            turns.setdefault((q["pass_id"], q["engine"]), set()).add((q["session_id"], q["turn"]))
    for p in passes:
        assert turns[p["pass_id"], "candidate"] == turns[p["pass_id"], "stock"], p["pass_id"]
    prov = json.loads(current_row(wh, eid)["provenance"])
    assert prov["pairing"] == "interleaved"
    assert prov["engine_order"] == [list(pair) for pair in order]


def test_the_idle_engine_is_frozen_and_its_spinning_daemon_with_it(hostile_but_harmless):
    r = hostile_but_harmless
    wh, eid = r["wh"], r["eid"]
    passes = wh.read_table("passes", eid).to_pylist()
    limit = 0.05
    for p in passes:
        assert p["idle_engine_cpu_seconds"] is not None and p["engine_cpu_seconds"] is not None
        assert p["idle_engine_cpu_seconds"] <= limit, p
    # the candidate's daemon spun whenever the candidate was thawed (its own passes' CPU shows
    # it: about a core for the pass), and could not leave its control groups
    cand = [p for p in passes if p["engine"] == "candidate"]
    stock = [p for p in passes if p["engine"] == "stock"]
    spin = sum(p["engine_cpu_seconds"] for p in cand) / sum(p["finished_at"] - p["started_at"] for p in cand)
    calm = sum(p["engine_cpu_seconds"] for p in stock) / sum(p["finished_at"] - p["started_at"] for p in stock)
    assert spin > 0.5 and spin > calm + 0.4, (spin, calm)
    log = {s["engine"]: s["log_text"] for s in wh.read_table("engine_starts", eid).to_pylist()}["candidate"]
    assert "SPIN stays in freezer (PermissionError)" in log and "SPIN stays in cpuacct (PermissionError)" in log
    assert "escaped" not in log


def test_the_candidates_user_cannot_signal_or_read_the_stock_engine(hostile_but_harmless):
    r = hostile_but_harmless
    starts = r["wh"].read_table("engine_starts", r["eid"]).to_pylist()
    log = {s["engine"]: s["log_text"] for s in starts}["candidate"]
    touches = [line for line in log.splitlines() if line.startswith("TOUCH ")]
    assert touches, log[-2000:]  # it found the stock engine's processes
    for line in touches:
        assert "signal=PermissionError" in line and "environ=PermissionError" in line, line


def test_an_interleaved_evaluation_scores(hostile_but_harmless):
    scored = hostile_but_harmless["scored"]
    assert not scored["void"] and scored["specscore"] > 0, scored["specscore_reason"]
    for w in ("solo", "team", "busy"):
        assert scored[f"r_{w}"] > 0


def test_a_candidate_reaching_the_frozen_stock_engine_scores_0(interleaved):
    r = interleaved("fx-interleaved-reach", "reach_other")
    assert r["status"] == "failed", (r["row"]["void_reason"], r["row"]["failure_reason"])
    assert "connected to the stock engine's port while it was frozen" in r["row"]["failure_reason"]
    assert r["scored"]["specscore"] == 0 and not r["scored"]["void"]
    assert "candidate failed" in r["scored"]["specscore_reason"]


@pytest.fixture(scope="module")
def escaped(interleaved):
    """A task that escaped the freezer (here: a spinner the test puts into the candidate's CPU
    accounting group only, which no engine can do itself)."""
    return run_with_escaped_spinner("fx-interleaved-escape", interleaved)


def test_cpu_the_candidates_group_uses_while_frozen_scores_0(escaped):
    """What the escaped task used while the candidate was frozen is charged to the candidate."""
    r, eid = escaped, escaped["eid"]
    assert r["status"] == "failed", (r["row"]["void_reason"], r["row"]["failure_reason"])
    assert "candidate engine used" in r["row"]["failure_reason"]
    assert "CPU seconds while frozen" in r["row"]["failure_reason"]
    assert r["scored"]["specscore"] == 0 and not r["scored"]["void"]
    passes = r["wh"].read_table("passes", r["eid"]).to_pylist()
    stock = [p for p in passes if p["engine"] == "stock"]
    assert stock and max(p["idle_engine_cpu_seconds"] for p in stock) > 0.05
    assert not engine_cgroup(eid, "candidate").freezer.exists()


def test_the_independent_recomputation_follows_the_pairing(hostile_but_harmless, escaped, built_home):
    """The same outcome from the raw rows by docs/scoring.md's words (tests/scoring/independent.py):
    the pass ratios of the interleaved passes, and the idle-engine rule."""
    tokenizer = independent.load_tokenizer(built_home["target"])
    for r, outcome in ((hostile_but_harmless, "score"), (escaped, "zero")):
        ind = independent.recompute(r["wh"].home, r["eid"], tokenizer)
        assert ind.outcome == outcome, ind.reasons
        assert ind.specscore == pytest.approx(float(r["scored"]["specscore"]), rel=1e-9)
    assert any("candidate engine used CPU while frozen" in x for x in ind.reasons), ind.reasons


def test_the_interleaved_pairing_needs_its_values(tmp_path, monkeypatch):
    monkeypatch.setenv("ARENA_PROTOCOL_DIR", str(tmp_path))
    version = stage_ci_protocol(tmp_path, pairing="interleaved", interleaving=None)
    with pytest.raises(ValueError, match="interleaved pairing and its `interleaving` values go together"):
        load_protocol(version)


def test_pass_order_is_abba_and_drawn_per_evaluation():
    orders = {tuple(pass_order(f"e{k}", 8)) for k in range(16)}
    assert len(orders) == 2  # candidate first or stock first
    for order in orders:
        a, b = order[0]
        assert list(order) == [(a, b), (b, a), (b, a), (a, b)] * 2
    assert pass_order("same", 8) == pass_order("same", 8)
