"""A candidate can never cause a void by what it returns (SCORING.md "Outcomes"), on a real local
evaluation: the candidate is the stand-in SSE engine in mode `malformed=mixed` (only it can be
made to break its output on cue), whose chat streams carry, request after request, each malformed
shape of issue 24 (a `choices` that is a number, content that is not a string, broken JSON, bytes
that are not UTF-8, broken chunked framing), whose `prompt_logprobs` hold numbers that are not
numbers and whose `/metrics` is not Prometheus text. The stock engine is the stand-in as it should
be. One evaluation (the short profile of test_failures.py) serves every test here.

Before the fix the first such stream voided the evaluation ("runner error during candidate
warmup-solo: TypeError: 'int' object is not iterable"): refunded, a free retry for the candidate.
"""

from __future__ import annotations

import pytest
from ci_profile import stage_ci_protocol
from sse_engine import MALFORMED
from stand_in import FAST, MALFORMED_REASONS, make_engine, run_stand_in


@pytest.fixture(scope="module")
def malformed(built_home, tmp_path_factory):
    root = tmp_path_factory.mktemp("malformed")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ARENA_PROTOCOL_DIR", str(root / "protocol"))
        stage_ci_protocol(root / "protocol", **FAST)
        cand = make_engine(root / "engines", "garbled", "malformed=mixed")
        stock = make_engine(root / "engines", "ok")
        yield run_stand_in("fx-malformed", cand, stock, built_home)


def test_a_candidate_streaming_malformed_output_scores_zero_not_void(malformed):
    wh, scored, row = malformed["wh"], malformed["scored"], malformed["row"]
    assert malformed["status"] == "measured" and row["void_reason"] is None and row["failure_reason"] is None, row
    assert scored["specscore"] == 0 and not scored["void"]
    assert isinstance(scored["specscore_reason"], str) and not scored["specscore_reason"].startswith("void")
    reqs = wh.read_table("requests", malformed["eid"]).to_pylist()
    cand = [r for r in reqs if r["engine"] == "candidate"]
    stock = [r for r in reqs if r["engine"] == "stock"]
    assert cand and all(not r["done"] and r["error"] for r in cand)  # every one its failure, with the reason
    assert stock and all(r["done"] and r["error"] is None for r in stock)  # nothing charged to the stock engine
    passes = wh.read_table("passes", malformed["eid"]).to_pylist()
    assert len(passes) == 18 and all(p["status"] == "complete" for p in passes)
    for w in ("solo", "team", "busy"):
        assert scored[f"r_{w}"] == 0


def test_the_candidates_probe_answers_it_cannot_read_are_unanswered(malformed):
    """Its greedy replies are malformed streams, its prompt_logprobs hold a string, a NaN and a
    rank of 2**70: each item is unanswered with the reason (scored as the worst value), while the
    stock engine answered all; its /metrics that is not Prometheus text gives no rows."""
    wh, eid = malformed["wh"], malformed["eid"]
    greedy = wh.read_table("probe_greedy", eid).to_pylist()
    fidelity = wh.read_table("probe_fidelity", eid).to_pylist()
    for rows in (greedy, fidelity):
        assert all(r["answered"] for r in rows if r["engine"] == "stock")
        assert [r for r in rows if r["engine"] == "candidate"]
        assert all(not r["answered"] and r["error"] for r in rows if r["engine"] == "candidate")
    reasons = {r["error"].split(" at reply position")[0] for r in fidelity if r["engine"] == "candidate"}
    prefix = "unreadable prompt_logprobs: prompt_logprobs'"
    assert reasons == {f"{prefix} logprob", f"{prefix} rank"}, reasons
    metrics = wh.read_table("metrics", eid).to_pylist()
    assert {m["engine"] for m in metrics} == {"stock"}


@pytest.mark.parametrize("shape", MALFORMED)
def test_each_malformed_shape_is_the_candidates_failure(malformed, shape):
    """The requests whose stream carried `shape` (the stand-in deals them out in turn) are there,
    each failed with that shape's reason, in an evaluation that scored 0 and is not void."""
    cand = [
        r for r in malformed["wh"].read_table("requests", malformed["eid"]).to_pylist() if r["engine"] == "candidate"
    ]
    mine = [r for r in cand if r["error"].startswith(MALFORMED_REASONS[shape])]
    assert mine and all(not r["done"] for r in mine)
    assert malformed["scored"]["specscore"] == 0 and not malformed["scored"]["void"], malformed["row"]
