"""Mirrored pairing (protocol v4's embedded task, issue 21) on a real local evaluation: the engines
start candidate, stock, stock, candidate; each first start serves pass 0 of every workload and
each second start pass 1, so one pass pair has the candidate served first and the other the
stock; the task's placement reaches both engines and the provenance says what ran. The stand-in
SSE engines (stand_in.py) make it an evaluation of seconds; v4's values (two passes, mirrored,
huge pages: speculator_arena/protocol/versions/v4.yaml) are what is staged, with the stand-in's
short clock.
"""

from __future__ import annotations

import json

import pytest
from ci_profile import MIRRORED_STARTS, stage_ci_protocol
from stand_in import FAST, make_engine, run_stand_in

from speculator_arena.protocol import load_protocol
from speculator_arena.warehouse.evaluations import current_row


@pytest.fixture(scope="module")
def mirrored(built_home, tmp_path_factory):
    root = tmp_path_factory.mktemp("mirrored")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ARENA_PROTOCOL_DIR", str(root / "protocol"))
        mp.setenv("THP_MEM_ALLOC_ENABLE", "0")  # the operator's setting: the version's wins
        stage_ci_protocol(
            root / "protocol",
            **FAST,
            pairing="mirrored",
            passes_per_workload=2,
            placement={"THP_MEM_ALLOC_ENABLE": "1"},  # as protocol/versions/v4.yaml
        )
        cand, stock = make_engine(root / "engines", "cand"), make_engine(root / "engines", "stock")
        yield run_stand_in("fx-mirrored", cand, stock, built_home)


def test_engines_start_candidate_stock_stock_candidate(mirrored):
    wh, eid = mirrored["wh"], mirrored["eid"]
    assert mirrored["status"] == "measured", mirrored["row"]
    starts = sorted(wh.read_table("engine_starts", eid).to_pylist(), key=lambda r: r["start_index"])
    assert [(s["engine"], s["purpose"]) for s in starts] == MIRRORED_STARTS
    # one engine at a time: each start stopped before the next began
    for a, b in zip(starts, starts[1:]):
        assert a["stopped_at"] <= b["started_at"]
    passes = wh.read_table("passes", eid).to_pylist()
    assert len(passes) == 2 * 3 * 2 and all(p["status"] == "complete" for p in passes)
    # each pass inside the start that served it: pass 0 in the engines' first starts, pass 1 in their second
    timed = [s for s in starts if s["purpose"] == "timed"]
    for p in passes:
        inside = [i for i, s in enumerate(timed) if s["started_at"] <= p["started_at"] <= s["stopped_at"]]
        assert len(inside) == 1
        assert timed[inside[0]]["engine"] == p["engine"]
        assert (
            inside[0]
            == ({"candidate": 0, "stock": 1} if p["pass_index"] == 0 else {"stock": 2, "candidate": 3})[p["engine"]]
        )
    # pass 0's pair has the candidate first, pass 1's the stock
    at = {(p["engine"], p["pass_id"]): p["started_at"] for p in passes}
    for w in ("solo", "team", "busy"):
        assert at["candidate", f"{w}-0"] < at["stock", f"{w}-0"]
        assert at["stock", f"{w}-1"] < at["candidate", f"{w}-1"]
    # every start warmed each workload up, the second starts under their own pass ids
    warm = {(r["engine"], r["pass_id"]) for r in wh.read_table("requests", eid).to_pylist() if r["pass_index"] is None}
    assert warm == {
        (e, f"warmup-{w}{a}") for e in ("candidate", "stock") for w in ("solo", "team", "busy") for a in ("", "-again")
    }


def test_the_versions_placement_reaches_both_engines_and_the_provenance_says_what_ran(mirrored):
    wh, eid = mirrored["wh"], mirrored["eid"]
    for s in wh.read_table("engine_starts", eid).to_pylist():
        assert "THP_MEM_ALLOC_ENABLE=1" in s["log_text"], s["log_text"][-400:]
    prov = json.loads(current_row(wh, eid)["provenance"])
    assert prov["pairing"] == "mirrored"
    assert prov["timed_starts"] == [
        {"engine": "candidate", "passes": [0]},
        {"engine": "stock", "passes": [0]},
        {"engine": "stock", "passes": [1]},
        {"engine": "candidate", "passes": [1]},
    ]
    assert prov["placement"]["engine_variables"]["THP_MEM_ALLOC_ENABLE"] == "1"


def test_a_mirrored_evaluation_scores_from_both_halves(mirrored):
    scored = mirrored["scored"]
    assert not scored["void"] and scored["specscore"] > 0
    for w in ("solo", "team", "busy"):
        assert scored[f"r_{w}"] > 0


def test_mirrored_pairing_needs_an_even_number_of_passes(tmp_path, monkeypatch):
    monkeypatch.setenv("ARENA_PROTOCOL_DIR", str(tmp_path))
    version = stage_ci_protocol(tmp_path, pairing="mirrored", passes_per_workload=3)
    with pytest.raises(ValueError, match="passes_per_workload must be even"):
        load_protocol(version).task("local-smollm2")
