"""The one door's typed summary (runners/summary.py, issue 34): its wire form round-trips, and the
three questions its callers ask (why, contended, scored) answer as the rules say."""

from __future__ import annotations

import json

from speculator_arena.rules.status import Status
from speculator_arena.runners.summary import Attempt, EvaluationSummary, Outcome


def _summary(**kw) -> EvaluationSummary:
    return EvaluationSummary(
        **{"evaluation_id": "e1", "status": Status.MEASURED, "rows": {"requests": 3}, "home": "/h", **kw}
    )


def test_the_wire_form_round_trips_through_json():
    s = _summary(outcome=Outcome(1.25, "", False)).with_attempts(
        [_summary(status=Status.VOID, void_reason="host contended (busy)"), _summary()]
    )
    d = json.loads(json.dumps(s.to_dict()))  # what the asset's metadata and `arena evaluate` carry
    assert EvaluationSummary.from_dict(d) == s
    assert d["attempts"][0] == {"evaluation_id": "e1", "status": "void", "why": "host contended (busy)"}
    assert d["outcome"] == {"specscore": 1.25, "reason": "", "void": False}
    assert EvaluationSummary.from_dict({**d, "outcome": None}).outcome is None  # the landing did not score it


def test_why_is_the_runners_reason_then_the_scorers():
    assert _summary(void_reason="v", failure_reason="f", outcome=Outcome(None, "o", True)).why == "v"
    assert _summary(failure_reason="f", outcome=Outcome(0.0, "o", False)).why == "f"
    assert _summary(outcome=Outcome(None, "o", True)).why == "o"
    assert _summary().why == ""


def test_contended_is_a_void_for_host_contention_by_the_runner_or_the_scorer():
    assert _summary(status=Status.VOID, void_reason="host contended (solo-0: steal 9%)").contended
    assert _summary(outcome=Outcome(None, "host contended (every pass)", True)).contended
    assert not _summary(status=Status.VOID, void_reason="device held 3 GiB").contended
    # a failure that names contention is the candidate's, never a re-run
    assert not _summary(status=Status.FAILED, failure_reason="host contended").contended


def test_scored_is_ranked_and_not_void_as_it_landed():
    assert _summary(outcome=Outcome(1.1, "", False)).scored
    assert _summary(status=Status.FAILED, outcome=Outcome(0.0, "greedy", False)).scored  # a 0 is a number
    assert not _summary(outcome=Outcome(None, "unanswered", True)).scored
    assert not _summary(status=Status.VOID).scored
    assert _summary().scored  # measured, not scored yet: not void
    assert Attempt("e1", "void", "x").why == "x"
