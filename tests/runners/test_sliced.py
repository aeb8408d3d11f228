"""The sliced pass (`interleaving.slice_seconds`, issue 31) on real local evaluations with the
stand-in engines: both resident engines serve each pass at once, thawed in turn, and every time
of the pass is stored on the serving engine's own clock. What is checked: the slices alternate
and never overlap; every stored time of a pass lies within its engine's thawed seconds; both
engines serve the same turns; the evaluation scores and the independent recomputation agrees; a
candidate's spinning daemon is frozen with it (it gains nothing); CPU its group uses between its
slices scores 0 with the reason. And the engine clock itself, on its own.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from stand_in import FAST, run_with_escaped_spinner, staged_runs

from speculator_arena.runners import freezer
from speculator_arena.runners.interleaved import pass_order
from speculator_arena.runners.sliced import EngineClock
from speculator_arena.runners.sse_decode import StreamResult
from speculator_arena.warehouse.evaluations import current_row

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scoring"))
import independent  # noqa: E402

needs_freezer = pytest.mark.skipif(freezer.unavailable() is not None, reason=f"{freezer.unavailable()}")

PASSES = 4
SLICE = 0.2
SLICED = {
    "pairing": "interleaved",
    "interleaving": {
        "max_idle_cpu_seconds": 0.05,
        "probes_on_timed_start": True,
        "slice_seconds": SLICE,
        "fresh_starts_per_workload": True,
        "alternate_start_order": True,
    },
    "passes_per_workload": PASSES,
    "workloads": {w: dict(v, pass_seconds=2, requests_per_lane=2) for w, v in FAST["workloads"].items()},
}


def test_the_engine_clock_counts_only_thawed_seconds():
    c = EngineClock(100.0)
    assert c.at(105.0) == 100.0  # never thawed yet
    c.thawed(110.0)
    assert c.at(110.5) == pytest.approx(100.5)
    c.frozen(111.0)
    assert c.at(111.0) == pytest.approx(101.0)
    assert c.at(115.0) == pytest.approx(101.0)  # frozen: the moment it was frozen
    c.thawed(120.0)
    c.frozen(120.25)
    c.thawed(130.0)
    assert c.at(125.0) == pytest.approx(101.25)
    assert c.at(130.5) == pytest.approx(101.75)
    assert c.at(109.0) == 100.0 and c.at(110.75) == pytest.approx(100.75)
    r = StreamResult(sent_at=110.5)
    r.chunk_times, r.ended_at, r.lines = [111.5, 120.1], 130.25, [(111.5, b"x")]
    c.map_result(r)
    assert [r.sent_at, *r.chunk_times, r.ended_at] == pytest.approx([100.5, 101.0, 101.1, 101.5])
    assert r.lines == [(pytest.approx(101.0), b"x")]


@pytest.fixture(scope="module")
def sliced(built_home, tmp_path_factory):
    """A protocol version staged with the sliced pass, and a runner of evaluations under it."""
    # replies slow enough that a pass takes several slices
    with staged_runs(tmp_path_factory.mktemp("sliced"), built_home, SLICED, {"ENGINE_CHUNK_DELAY": "0.04"}) as run:
        yield run


@pytest.fixture(scope="module")
def spinning(sliced):
    """A candidate whose detached daemon spins whenever it is thawed."""
    return sliced("fx-sliced", "idle_spin")


@needs_freezer
def test_both_engines_serve_each_pass_in_alternating_slices(spinning):
    r = spinning
    wh, eid = r["wh"], r["eid"]
    assert r["status"] == "measured", r["row"]
    slices = wh.read_table("slices", eid).to_pylist()
    passes = wh.read_table("passes", eid).to_pylist()
    assert len(passes) == 2 * 3 * PASSES and all(p["status"] == "complete" for p in passes)
    order = pass_order(eid, PASSES)
    by_pass: dict[str, list] = {}
    for s in sorted(slices, key=lambda s: s["started_at"]):
        by_pass.setdefault(s["pass_id"], []).append(s)
    assert set(by_pass) == {p["pass_id"] for p in passes}
    for pass_id, ss in by_pass.items():
        i = int(pass_id.rsplit("-", 1)[1])
        assert ss[0]["engine"] == order[i][0], pass_id  # the pass's first engine thawed first
        assert [s["slice_index"] for s in ss] == list(range(len(ss)))
        for a, b in zip(ss, ss[1:]):
            assert a["ended_at"] <= b["started_at"], pass_id  # never two thawed at once
        # they take turns: a run of one engine's slices only once the other has answered
        engines = [s["engine"] for s in ss]
        switches = sum(x != y for x, y in zip(engines, engines[1:]))
        assert switches >= 2, (pass_id, engines)
        for a, b in zip(ss, ss[1:]):  # a slice the other engine follows lasted about a slice
            assert b["engine"] == a["engine"] or a["ended_at"] - a["started_at"] < SLICE + 0.15, (pass_id, a)
    # every stored time of a pass on its engine's clock: within the seconds the engine was thawed
    reqs = [q for q in wh.read_table("requests", eid).to_pylist() if q["pass_index"] is not None]
    for p in passes:
        thawed = sum(s["ended_at"] - s["started_at"] for s in by_pass[p["pass_id"]] if s["engine"] == p["engine"])
        assert p["finished_at"] - p["started_at"] == pytest.approx(thawed, abs=1e-6), p
        mine = [q for q in reqs if q["pass_id"] == p["pass_id"] and q["engine"] == p["engine"]]
        assert mine
        for q in mine:
            times = [q["sent_at"], q["ended_at"], *q["chunk_times"]]
            assert all(p["started_at"] <= x <= p["finished_at"] + 1e-6 for x in times), (p["pass_id"], q)
            assert q["sent_at"] < p["ends_at"]
    # the same turns on both engines
    turns: dict = {}
    for q in reqs:
        turns.setdefault((q["pass_id"], q["engine"]), set()).add((q["session_id"], q["turn"]))
    for p in passes:
        assert turns[p["pass_id"], "candidate"] == turns[p["pass_id"], "stock"], p["pass_id"]
    prov = json.loads(current_row(wh, eid)["provenance"])
    assert prov["pairing"] == "interleaved" and prov["slice_seconds"] == SLICE


@needs_freezer
def test_each_workload_is_served_by_fresh_starts_of_both_engines(spinning):
    """`fresh_starts_per_workload`: three timed starts per engine, every slice of a workload within
    one start of its engine, and no two workloads on the same start; `alternate_start_order`: the
    workloads' start pairs begin A, B, A (A the engine the pass order serves first)."""
    wh, eid = spinning["wh"], spinning["eid"]
    starts = [s for s in wh.read_table("engine_starts", eid).to_pylist() if s["purpose"] == "timed"]
    by_time = sorted(starts, key=lambda s: s["started_at"])
    a, b = pass_order(eid, PASSES)[0]
    assert [s["engine"] for s in by_time] == [a, b, b, a, a, b], [s["engine"] for s in by_time]
    for engine in ("candidate", "stock"):
        mine = sorted((s for s in starts if s["engine"] == engine), key=lambda s: s["started_at"])
        assert len(mine) == 3, mine
        served: dict[str, set] = {}
        for sl in wh.read_table("slices", eid).to_pylist():
            if sl["engine"] != engine:
                continue
            within = [
                k
                for k, s in enumerate(mine)
                if s["healthy_at"] <= sl["started_at"] and sl["ended_at"] <= s["stopped_at"]
            ]
            assert len(within) == 1, sl
            served.setdefault(sl["workload"], set()).add(within[0])
        assert all(len(v) == 1 for v in served.values()), served
        assert len({next(iter(v)) for v in served.values()}) == 3, served


@needs_freezer
def test_a_spinning_daemon_is_frozen_with_its_engine_and_the_evaluation_scores(spinning):
    wh, eid = spinning["wh"], spinning["eid"]
    passes = wh.read_table("passes", eid).to_pylist()
    assert all(p["idle_engine_cpu_seconds"] <= 0.05 for p in passes)
    slices = wh.read_table("slices", eid).to_pylist()
    cand = [s for s in slices if s["engine"] == "candidate"]
    # the daemon spun in the candidate's slices (about a core), never in the stock engine's
    spin = sum(s["cpu_seconds"] for s in cand) / sum(s["ended_at"] - s["started_at"] for s in cand)
    assert spin > 0.5, spin
    assert max(s["other_cpu_seconds"] for s in slices) <= 0.05
    scored = spinning["scored"]
    assert not scored["void"] and scored["specscore"] > 0, scored["specscore_reason"]


@pytest.fixture(scope="module")
def escaped(sliced):
    return run_with_escaped_spinner("fx-sliced-escape", sliced)


@needs_freezer
def test_cpu_the_candidates_group_uses_between_its_slices_scores_0(escaped):
    r = escaped
    assert r["status"] == "failed", (r["row"]["void_reason"], r["row"]["failure_reason"])
    assert "outside its own slices" in r["row"]["failure_reason"]
    assert "candidate engine used" in r["row"]["failure_reason"]
    assert r["scored"]["specscore"] == 0 and not r["scored"]["void"]


@needs_freezer
def test_the_independent_recomputation_agrees_on_sliced_passes(spinning, escaped, built_home):
    tokenizer = independent.load_tokenizer(built_home["target"])
    for r, outcome in ((spinning, "score"), (escaped, "zero")):
        ind = independent.recompute(r["wh"].home, r["eid"], tokenizer)
        assert ind.outcome == outcome, ind.reasons
        assert ind.specscore == pytest.approx(float(r["scored"]["specscore"]), rel=1e-9)
