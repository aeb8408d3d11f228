"""The speculation profile (board/profile.py, `GET /api/evaluations/{id}/speculation_profile.json`)
and acceptance as the context grows (board/context.py), on synthetic evaluations: the profile
validates, its numbers are the page's acceptance figures from the same rows (the scorer's mean
acceptance length and draft acceptance rate, acceptance by draft position, the step histogram),
a planted fault fails the validator, a test evaluation's profile is refused (403) and an unknown
one is 404; acceptance against prompt length and turn equals a plain recomputation from the raw
Parquet, families apart, labelled with its source."""

from __future__ import annotations

import copy
import json
import shutil

import independent_shown as ind
import pyarrow as pa
import pytest
from synthetic import POSITION_SHARES, write_synthetic_evaluation

from speculator_arena.board import acceptance, context, profile, shown
from speculator_arena.board.export import ExportRefused
from speculator_arena.protocol import load_protocol
from speculator_arena.scoring import score_warehouse
from speculator_arena.warehouse import Warehouse
from speculator_arena.warehouse.schema import TABLES

SLACK = load_protocol().count_slack_tokens
WORKLOADS = ("solo", "team", "busy")


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    wh = Warehouse(tmp_path_factory.mktemp("profile") / "arena_home")
    write_synthetic_evaluation(wh, "d", account_id="acct-d", label="d", seed=80, per_position=True)
    write_synthetic_evaluation(wh, "t", account_id="acct-d", label="d", split="test", seed=81, per_position=True)
    write_synthetic_evaluation(wh, "plain", account_id="acct-p", label="plain", seed=82)
    write_synthetic_evaluation(wh, "notprefix", account_id="acct-n", label="n", seed=83, per_position=True)
    m = wh.read_table("metrics", "notprefix").to_pandas()
    later = m["name"].str.contains("per_pos") & m["labels"].str.contains('"2"') & (m["phase"] == "after")
    m.loc[later & (m["pass_id"] == "solo-0"), "value"] += 1000.0  # position 2 accepts more than 1
    wh.write_rows(
        "metrics", "notprefix", pa.Table.from_pandas(m, schema=TABLES["metrics"], preserve_index=False), replace=True
    )
    write_synthetic_evaluation(wh, "nodraft", account_id="acct-o", label="o", seed=84, per_position=True)
    m = wh.read_table("metrics", "nodraft").to_pandas()
    m = m[~m["name"].str.contains("num_draft_tokens")]
    wh.write_rows(
        "metrics", "nodraft", pa.Table.from_pandas(m, schema=TABLES["metrics"], preserve_index=False), replace=True
    )
    return wh.home


def test_the_profile_validates_and_is_the_page_s_acceptance_figures(home):
    doc = profile.speculation_profile(home, "d")
    assert profile.validate_profile(doc) == []
    assert doc["schema_version"] == "1.0" and doc["measured"] is True
    json.loads(profile.profile_json(doc))  # strict JSON
    rows = shown.read_shown(home, ["d"])
    pos = acceptance.by_position(rows)
    hist = acceptance.step_histogram(rows)
    proxy = acceptance.speedup_proxy(rows).set_index("workload")
    figures = score_warehouse(Warehouse(home), evaluation_ids=["d"]).figures
    fig = figures[(figures["evaluation_id"] == "d") & (figures["engine"] == "candidate")]
    for workload, s in (("all", doc), *((w, doc["per_category"][w]) for w in WORKLOADS)):
        assert s["measured"] is True and s["num_speculative_tokens"] == len(POSITION_SHARES)
        p = pos[(pos["engine"] == "candidate") & (pos["workload"] == workload)].sort_values("position")
        assert s["marginal_accept_rates"] == pytest.approx(p["rate"].tolist(), rel=1e-12)
        assert s["conditional_accept_rates"] == pytest.approx(p["conditional"].tolist(), rel=1e-12)
        if workload == "all":  # the scorer's figures, shown on the page and the board
            shown_fig = fig[fig["workload"] == "all"].set_index("figure")["value"]
            assert s["mean_accept_length"] == pytest.approx(shown_fig["mean_acceptance_length"], rel=1e-12)
            assert s["draft_acceptance_rate"] == pytest.approx(shown_fig["draft_acceptance_rate"], rel=1e-12)
        else:  # the AL of the page's speedup proxy
            assert s["mean_accept_length"] == pytest.approx(proxy.at[workload, "acceptance_length"], rel=1e-12)
        h = hist[(hist["engine"] == "candidate") & (hist["workload"] == workload)]
        assert set(h["source"]) == {acceptance.STEPS}
        assert [s["acceptance_length_histogram"][str(int(k) + 1)] for k in h["value"]] == pytest.approx(
            h["count"].tolist(), rel=1e-12
        )
        if workload != "all":  # and the plain recomputation from the raw Parquet
            d = ind.counter_deltas(home, "d", "candidate", workload)
            assert s["marginal_accept_rates"] == pytest.approx([d[k] / d["drafts"] for k in range(3)], rel=1e-12)
            assert s["marginal_accept_rates"] == pytest.approx(list(POSITION_SHARES), rel=1e-9)
            assert s["mean_accept_length"] == pytest.approx(1 + d["accepted"] / d["drafts"], rel=1e-12)
    assert doc["mean_accept_length"] == pytest.approx(1 + sum(POSITION_SHARES), rel=1e-9)
    assert doc["measurement_conditions"]["split"] == "dev" and doc["method"] is not None
    assert doc["acceptance_by_context"]["source"] == context.SOURCE and doc["acceptance_by_context"]["bins"]


def test_the_validator_catches_a_broken_rule(home):
    doc = profile.speculation_profile(home, "d")
    for mutate, what in (
        (lambda d: d["marginal_accept_rates"].__setitem__(1, 0.9), "marginal_monotonicity"),
        (lambda d: d.__setitem__("mean_accept_length", d["mean_accept_length"] + 0.1), "mean_consistency"),
        (lambda d: d["conditional_accept_rates"].__setitem__(0, 0.5), "conditional_product"),
        (lambda d: d["acceptance_length_histogram"].__setitem__("1", 1e9), "histogram"),
        (lambda d: d.__setitem__("schema_version", "0.9"), "schema_version"),
    ):
        bad = copy.deepcopy(doc)
        mutate(bad)
        problems = profile.validate_profile(bad)
        assert problems and any(what in p for p in problems), (what, problems)
    # counts that are not a prefix: published as measured, and the validator says what is wrong
    bad = profile.speculation_profile(home, "notprefix")
    problems = profile.validate_profile(bad)
    assert any("per_category.solo: marginal_monotonicity fails" in p for p in problems)
    assert bad["per_category"]["solo"]["acceptance_length_histogram"] is None
    assert "not a prefix acceptance" in bad["per_category"]["solo"]["histogram_reason"]
    assert not any(p.startswith("per_category.team") for p in problems)


def test_an_engine_without_per_position_counters_is_unmeasured_with_the_reason(home):
    doc = profile.speculation_profile(home, "plain")
    assert doc["measured"] is False and "no per-position counters" in doc["reason"]
    assert doc["marginal_accept_rates"] == [] and doc["mean_accept_length"] is None
    assert profile.validate_profile(doc) == []
    doc = profile.speculation_profile(home, "nodraft")
    assert doc["measured"] is False and "no vllm:spec_decode_num_draft_tokens counter" in doc["reason"]
    assert profile.validate_profile(doc) == []


def test_a_test_evaluation_s_profile_is_refused(home):
    with pytest.raises(ExportRefused) as refused:
        profile.speculation_profile(home, "t")
    assert refused.value.status == 403 and "speculation profiles are exported for dev evaluations only" in (
        refused.value.reason
    )
    with pytest.raises(ExportRefused) as unknown:
        profile.speculation_profile(home, "nope")
    assert unknown.value.status == 404


def test_the_api_serves_a_dev_profile_and_refuses_a_test_one(home, tmp_path):
    from fastapi.testclient import TestClient

    from speculator_arena.frontdoor.api import create_app

    api_home = tmp_path / "api_home"
    shutil.copytree(home, api_home)  # the API's start-up writes its state beside the warehouse
    with TestClient(create_app(api_home)) as client:
        ok = client.get("/api/evaluations/d/speculation_profile.json")
        assert ok.status_code == 200 and ok.headers["content-type"].startswith("application/json")
        assert 'filename="d-speculation_profile.json"' in ok.headers["content-disposition"]
        assert profile.validate_profile(ok.json()) == []
        assert ok.json()["mean_accept_length"] == pytest.approx(
            profile.speculation_profile(home, "d")["mean_accept_length"]
        )
        refused = client.get("/api/evaluations/t/speculation_profile.json")
        assert refused.status_code == 403 and "dev evaluations only" in refused.json()["error"]
        assert client.get("/api/evaluations/nope/speculation_profile.json").status_code == 404
        assert client.get("/api/evaluations/d/speculation_profile.json", params={"protocol": 99}).status_code == 404


def test_acceptance_against_prompt_length_and_turn_families_apart(home):
    rows = shown.read_shown(home, ["d"])
    got = context.by_context(rows)
    assert set(got["source"]) == {context.SOURCE} and got["reason"].isna().all()
    for engine in ("candidate", "stock"):
        want = ind.acceptance_by_context(home, "d", engine, SLACK)
        g = got[(got["engine"] == engine) & (got["workload"] == "all")]
        have = {
            (f, a, int(b)): (x, y)
            for f, a, b, x, y in zip(
                g["family"], g["axis"], g["bin_low"], g["acceptance_length"], g["acceptance_length_per_request"]
            )
        }
        assert set(have) == set(want)
        assert {f for f, _, _ in have} == {"agent", "chat"}
        assert {a for _, a, _ in have} == {"prompt_tokens", "turn"}
        for k, (x, y) in want.items():
            assert have[k] == pytest.approx((x, y), rel=1e-12), k
    prompt = got[(got["axis"] == "prompt_tokens") & (got["workload"] == "all")]
    assert ((prompt["bin_high"] == 2 * prompt["bin_low"]) & (prompt["bin_low"] > 0)).all()
    # per workload the bins add up to the pooled ones
    c = got[(got["engine"] == "candidate") & (got["axis"] == "turn")]
    per = c[c["workload"] != "all"].groupby(["family", "bin_low"])["requests"].sum()
    pooled = c[c["workload"] == "all"].set_index(["family", "bin_low"])["requests"]
    assert per.sort_index().tolist() == pooled.sort_index().tolist()
