"""score_warehouse on synthetic evaluations whose answers are known by construction."""

import math

import numpy as np
import pytest
from synthetic import write_synthetic_evaluation

from speculator_arena.board.ranking import board_rows
from speculator_arena.board.text import board_text
from speculator_arena.protocol import load_protocol
from speculator_arena.protocol.model import WORKLOADS
from speculator_arena.scoring import score_warehouse


def one(scores, eid):
    return scores.evaluations.set_index("evaluation_id").loc[eid]


def gate(scores, eid, name):
    g = scores.gates
    return g[(g.evaluation_id == eid) & (g.gate == name)].iloc[0]


def test_stock_against_itself_scores_exactly_one(wh):
    write_synthetic_evaluation(wh, "aa", speedups={"solo": 1.0, "team": 1.0, "busy": 1.0})
    s = score_warehouse(wh)
    e = one(s, "aa")
    assert (s.passes["ratio"] == 1.0).all()
    assert e.specscore == 1.0 and e.r_solo == e.r_team == e.r_busy == 1.0
    assert bool(e.gates_pass)


def test_known_speedups_give_their_geometric_mean(wh):
    exp = write_synthetic_evaluation(wh, "e", speedups={"solo": 1.6, "team": 1.4, "busy": 1.2})
    e = one(score_warehouse(wh), "e")
    assert e.r_solo == pytest.approx(1.6, rel=1e-5) and e.r_busy == pytest.approx(1.2, rel=1e-5)
    assert e.specscore == pytest.approx(exp["specscore"], rel=1e-5)
    assert exp["specscore"] == pytest.approx((1.6 * 1.4 * 1.2) ** (1 / 3))


@pytest.mark.parametrize(
    "attack,gate_name",
    [
        ("likelihood", "sampled_likelihood"),
        ("first_choice", "first_choice"),
        ("greedy", "greedy_agreement"),
        ("fidelity", "target_fidelity"),
        ("length", "length"),
        ("candidate_unanswered", "answering"),
    ],
)
def test_each_attack_fails_its_gate_and_only_that_gate(wh, attack, gate_name):
    write_synthetic_evaluation(wh, "clean", seed=1)
    write_synthetic_evaluation(wh, "bad", seed=1, attack=attack)
    s = score_warehouse(wh)
    assert gate(s, "clean", gate_name).verdict == "pass"
    assert gate(s, "bad", gate_name).verdict == "fail"
    bad = one(s, "bad")
    assert bad.specscore == 0.0 and bad.failed_gates == gate_name
    assert one(s, "clean").specscore > 1


def test_memory_gate_both_sides_on_a_gpu_task(wh):
    write_synthetic_evaluation(wh, "ok", task_id="qwen3-8b", seed=2)
    write_synthetic_evaluation(wh, "over", task_id="qwen3-8b", seed=2, attack="memory")
    s = score_warehouse(wh)
    ok, over = gate(s, "ok", "memory"), gate(s, "over", "memory")
    allowed = 0.90 * 183_000_000_000 + 4 * 2**30
    assert ok.limit == pytest.approx(allowed) and ok.statistic <= allowed and ok.verdict == "pass"
    assert over.statistic > allowed and over.verdict == "fail"
    assert one(s, "over").specscore == 0.0


def test_memory_not_measured_blocks_a_gpu_task_but_not_the_local_task(wh):
    write_synthetic_evaluation(wh, "gpu", task_id="qwen3-8b", memory=False)
    write_synthetic_evaluation(wh, "cpu", task_id="local-smollm2")
    s = score_warehouse(wh)
    assert gate(s, "gpu", "memory").verdict == "not measured"
    assert math.isnan(one(s, "gpu").specscore) and "memory" in one(s, "gpu").specscore_reason
    assert gate(s, "cpu", "memory").verdict == "not measured"
    assert one(s, "cpu").specscore > 1 and "memory" in one(s, "cpu").not_measured_gates


def test_failure_rule_zeroes_one_pass_and_the_median_keeps_the_workload(wh):
    # run under v3 (three passes per workload: the median of one zeroed pass and two good ones is a
    # good one) and scored under the version in force, which counts the passes the run made
    write_synthetic_evaluation(
        wh, "f", attack="failures", speedups={"solo": 1.5, "team": 1.3, "busy": 1.1}, protocol_version=3
    )
    s = score_warehouse(wh)
    p = s.passes[s.passes.evaluation_id == "f"].set_index("pass_id")
    assert p.loc["team-0", "ratio"] == 0 and bool(p.loc["team-0", "zeroed_by_failure_rule"])
    assert not p.loc[["team-1", "team-2"], "zeroed_by_failure_rule"].any()
    assert one(s, "f").r_team == pytest.approx(np.median([0, p.loc["team-1", "ratio"], p.loc["team-2", "ratio"]]))
    assert one(s, "f").r_team == pytest.approx(1.3, rel=1e-5)


def test_partial_evaluation_is_blank_with_reasons_not_smaller(wh):
    write_synthetic_evaluation(wh, "p", attack="partial")
    s = score_warehouse(wh)
    e = one(s, "p")
    assert math.isnan(e.specscore) and "running" in e.specscore_reason
    assert math.isnan(e.r_busy) and "stock pass missing" in e.r_busy_reason
    assert e.r_solo == pytest.approx(1.6, rel=1e-5)  # complete workloads keep their ratio
    f = s.figures[(s.figures.evaluation_id == "p")]
    assert f["value"].isna().all() and f["reason"].notna().all()
    assert gate(s, "p", "length").verdict == "not measured"


def test_void_conditions(wh):
    write_synthetic_evaluation(wh, "v", attack="void")
    write_synthetic_evaluation(wh, "su", attack="stock_unanswered")
    write_synthetic_evaluation(wh, "d", attack="died")
    write_synthetic_evaluation(wh, "o", attack="offload")
    s = score_warehouse(wh)
    for eid in ("v", "su"):
        e = one(s, eid)
        assert bool(e.void) and math.isnan(e.specscore) and e.specscore_reason.startswith("void")
    assert "stock engine left" in one(s, "su").specscore_reason
    for eid in ("d", "o"):
        assert one(s, eid).specscore == 0.0 and one(s, eid).specscore_reason.startswith("candidate failed")


def test_answering_limit_both_sides(wh):
    # 6 greedy prompts, limit 10%: the attack leaves 1 (17%) unanswered -> fail; a clean run leaves 0
    write_synthetic_evaluation(wh, "a", attack="candidate_unanswered")
    s = score_warehouse(wh)
    g = gate(s, "a", "answering")
    assert g.statistic == pytest.approx(1 / 6) and g.limit == 0.10 and g.verdict == "fail"


def test_greedy_and_fidelity_hand_rows_both_sides_of_the_limit(wh):
    """Hand rows on either side of v3's hand-set limits (greedy floor 0.5, fidelity ceiling 1e-3),
    scored under v3; the calibrated limits of later versions are met by the real evaluations."""
    write_synthetic_evaluation(wh, "g")
    rows = []
    for pid, cand, stock in (("p1", [1, 2, 3, 4], [1, 2, 9]), ("p2", [5, 6], [5, 6]), ("p3", [], [])):
        rows += [
            dict(engine="candidate", prompt_id=pid, token_ids=cand, answered=True),
            dict(engine="stock", prompt_id=pid, token_ids=stock, answered=True),
        ]
    wh.write_rows("probe_greedy", "g", rows, replace=True)
    # fidelity: |diff| 0.001 over 2 tokens -> 0.0005 <= 1e-3 passes
    wh.write_rows(
        "probe_fidelity",
        "g",
        [
            dict(engine="candidate", text_id="t", token_ids=[1, 2], token_logprobs=[-1.0, -2.0], answered=True),
            dict(engine="stock", text_id="t", token_ids=[1, 2], token_logprobs=[-1.0, -2.001], answered=True),
        ],
        replace=True,
    )
    s = score_warehouse(wh, 3)
    g = gate(s, "g", "greedy_agreement")
    assert g.statistic == pytest.approx((2 / 4 + 1.0) / 2) and g.verdict == "pass"  # empty pair left out
    f = gate(s, "g", "target_fidelity")
    assert f.statistic == pytest.approx(0.0005) and f.verdict == "pass"
    wh.write_rows(
        "probe_greedy",
        "g",
        [
            dict(engine="candidate", prompt_id="p1", token_ids=[1, 2, 3, 4], answered=True),
            dict(engine="stock", prompt_id="p1", token_ids=[1, 7, 3], answered=True),
        ],
        replace=True,
    )
    wh.write_rows(
        "probe_fidelity",
        "g",
        [
            dict(engine="candidate", text_id="t", token_ids=[1, 2], token_logprobs=[-1.0, -2.0], answered=True),
            dict(engine="stock", text_id="t", token_ids=[1, 2], token_logprobs=[-1.0, -2.003], answered=True),
        ],
        replace=True,
    )
    s = score_warehouse(wh, 3)
    assert gate(s, "g", "greedy_agreement").statistic == pytest.approx(0.25)
    assert gate(s, "g", "greedy_agreement").verdict == "fail"
    assert gate(s, "g", "target_fidelity").statistic == pytest.approx(0.0015)
    assert gate(s, "g", "target_fidelity").verdict == "fail"


def test_likelihood_statistic_matches_direct_cluster_computation(wh):
    from speculator_arena.scoring.statistics import cluster_ratio_direct

    write_synthetic_evaluation(wh, "l", attack="likelihood", seed=4)
    s = score_warehouse(wh)
    t = wh.read_table("probe_scored", "l").to_pandas()
    per = {}
    for eng in ("candidate", "stock"):
        sub = t[t.reply_engine == eng]
        per[eng] = cluster_ratio_direct([sum(x) for x in sub.token_logprobs], [len(x) for x in sub.token_logprobs])
    g = gate(s, "l", "sampled_likelihood")
    assert g.statistic == pytest.approx(per["candidate"][0] - per["stock"][0])
    assert g.se == pytest.approx(math.hypot(per["candidate"][1], per["stock"][1]))
    assert g.ci_high < -g.limit and g.verdict == "fail"


def test_figures_percentiles_cache_and_acceptance(wh):
    write_synthetic_evaluation(wh, "x")
    s = score_warehouse(wh)
    f = s.figures.set_index(["evaluation_id", "engine", "workload", "figure"])
    req = wh.read_table("requests", "x").to_pandas()
    st = req[(req.engine == "stock") & req.done]
    ttft = (st.first_token_at - st.sent_at).to_numpy()
    assert f.loc[("x", "stock", "all", "ttft_p90"), "value"] == pytest.approx(np.percentile(ttft, 90))
    assert f.loc[("x", "stock", "all", "cache_hit_tokens"), "value"] == pytest.approx(
        st.cached_tokens.sum() / st.usage_prompt_tokens.sum()
    )
    assert f.loc[("x", "stock", "all", "cache_hit_mean"), "value"] == pytest.approx(
        (st.cached_tokens / st.usage_prompt_tokens).mean()
    )
    lat = (st.ended_at - st.sent_at).to_numpy()
    assert f.loc[("x", "stock", "all", "latency_p95"), "value"] == pytest.approx(np.percentile(lat, 95))
    # synthetic counters: accepted = 1.5 x drafts, draft tokens = 3 x drafts
    assert f.loc[("x", "candidate", "all", "mean_acceptance_length"), "value"] == pytest.approx(2.5)
    assert f.loc[("x", "candidate", "all", "draft_acceptance_rate"), "value"] == pytest.approx(0.5)
    stock_acc = f.loc[("x", "stock", "all", "mean_acceptance_length")]
    assert math.isnan(stock_acc.value) and "counters" in stock_acc.reason
    assert one(s, "x").candidate_mean_acceptance_length == pytest.approx(2.5)


def test_acceptance_reads_the_totals_by_name_beside_per_position_counters(wh):
    """vLLM (and the development engine) export `..._num_accepted_tokens_per_pos` beside the total:
    the acceptance figures are the totals' (a prefix match also summed the per-position counter)."""
    write_synthetic_evaluation(wh, "p", per_position=True)
    f = score_warehouse(wh).figures.set_index(["evaluation_id", "engine", "workload", "figure"])
    m = wh.read_table("metrics", "p").to_pandas()
    m = m[m.pass_id.str.match(r"(solo|team|busy)-") & (m.engine == "candidate")]
    delta = m.pivot_table(index=["pass_id", "name"], columns="phase", values="value", aggfunc="sum")
    total = (delta["after"] - delta["before"]).groupby(level="name").sum()
    drafts, accepted = total["vllm:spec_decode_num_drafts_total"], total["vllm:spec_decode_num_accepted_tokens_total"]
    assert total["vllm:spec_decode_num_accepted_tokens_per_pos_total"] > 0  # the counter that must not be added
    mal = f.loc[("p", "candidate", "all", "mean_acceptance_length"), "value"]
    assert mal == pytest.approx(1 + accepted / drafts) and mal == pytest.approx(2.5)
    rate = f.loc[("p", "candidate", "all", "draft_acceptance_rate"), "value"]
    assert rate == pytest.approx(accepted / total["vllm:spec_decode_num_draft_tokens_total"])


def test_gap_flag_both_sides(wh):
    """Flagged when the last test SpecScore < (1 - gap) x the last dev one; the gap is the version's
    (v5: 0.398, five times the embedded task's calibrated A/A noise)."""
    gap = load_protocol().task("local-smollm2").dev_test_gap
    below, above = (1 - gap) * 1.5 - 0.05, (1 - gap) * 1.5 + 0.05
    for account, test_speed in (("A", below), ("B", above)):
        write_synthetic_evaluation(
            wh,
            f"d-{account}",
            account_id=account,
            split="dev",
            speedups=dict.fromkeys(WORKLOADS, 1.5),
            created_at=1.8e9,
        )
        write_synthetic_evaluation(
            wh,
            f"t-{account}",
            account_id=account,
            split="test",
            speedups=dict.fromkeys(WORKLOADS, test_speed),
            created_at=1.8e9 + 1,
        )
    s = score_warehouse(wh)
    assert bool(one(s, "t-A").gap_flag) is True
    assert bool(one(s, "t-B").gap_flag) is False


def test_board_ranking_gated_below_and_references_apart(wh):
    kw = dict(split="test")
    write_synthetic_evaluation(
        wh, "old", account_id="A", label="a-old", speedups={"solo": 3, "team": 3, "busy": 3}, created_at=1.0e9, **kw
    )
    write_synthetic_evaluation(
        wh,
        "new",
        account_id="A",
        label="a-new",
        speedups={"solo": 1.2, "team": 1.2, "busy": 1.2},
        created_at=1.1e9,
        **kw,
    )
    write_synthetic_evaluation(
        wh, "b", account_id="B", label="b", speedups={"solo": 1.5, "team": 1.5, "busy": 1.5}, **kw
    )
    write_synthetic_evaluation(
        wh, "c", account_id="C", label="c", speedups={"solo": 2, "team": 2, "busy": 2}, attack="fidelity", **kw
    )
    write_synthetic_evaluation(
        wh,
        "r",
        account_id="ops",
        label="dev-stock",
        is_reference=True,
        speedups={"solo": 1, "team": 1, "busy": 1},
        **kw,
    )
    write_synthetic_evaluation(wh, "devonly", account_id="D", label="d", split="dev")
    s = score_warehouse(wh)
    rows = board_rows(s, "local-smollm2", split="test")
    parts = rows[rows.section == "participants"]
    assert list(parts.evaluation_id) == ["b", "new", "c"]  # last of A only; gated c below
    assert list(parts["rank"].iloc[:2]) == [1, 2] and parts["rank"].isna().iloc[2]
    refs = rows[rows.section == "references"]
    assert list(refs.evaluation_id) == ["r"] and refs.iloc[0].specscore == 1.0
    text = board_text(s, split="test")
    assert text.index("b ") < text.index("a-new") < text.index("gate failed: target_fidelity") < text.index("dev-stock")
    assert "a-old" not in text and "devonly" not in text


def test_scoring_a_subset_and_an_empty_warehouse(wh):
    empty = score_warehouse(wh)
    assert empty.evaluations.empty and empty.passes.empty
    assert "no evaluations stored" in board_text(empty)
    write_synthetic_evaluation(wh, "e1")
    write_synthetic_evaluation(wh, "e2", seed=3)
    s = score_warehouse(wh, evaluation_ids=["e2"])
    assert list(s.evaluations.evaluation_id) == ["e2"]
    assert set(s.passes.evaluation_id) == {"e2"} and set(s.figures.evaluation_id) == {"e2"}


def test_scoring_reads_an_existing_duckdb_file_read_only(wh):
    from speculator_arena.warehouse import analysts

    write_synthetic_evaluation(wh, "e")
    analysts.refresh(wh.home)  # the analysts' arena.duckdb exists beside the Parquet
    before = (wh.home / "arena.duckdb").stat().st_mtime_ns
    assert one(score_warehouse(wh), "e").specscore > 1
    assert (wh.home / "arena.duckdb").stat().st_mtime_ns == before
