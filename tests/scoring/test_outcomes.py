"""SCORING.md's outcomes, counted slack, unanswered probe items, host contention, memory coverage
and ranking, on synthetic evaluations whose rows are edited by hand where a rule needs it.

Each test asks what a candidate gains by failing, skipping or lying at that rule, and checks it
gains nothing: a blank becomes 0 or void (never chosen by the candidate), a skipped item scores
its worst value, a void evaluation never hides an earlier score.
"""

import math

import numpy as np
import pyarrow as pa
import pytest
from synthetic import write_synthetic_evaluation

from speculator_arena.board.ranking import board_rows
from speculator_arena.protocol import load_protocol
from speculator_arena.rules.counted import counted
from speculator_arena.scoring import score_warehouse


def one(scores, eid):
    return scores.evaluations.set_index("evaluation_id").loc[eid]


def gate(scores, eid, name):
    g = scores.gates
    return g[(g.evaluation_id == eid) & (g.gate == name)].iloc[0]


def _edit(wh, table, eid, fn):
    """Rewrite one evaluation's rows of `table` through `fn(pandas frame) -> frame`."""
    t = wh.read_table(table, eid).to_pandas()
    t = fn(t)
    for f in wh.partition_dir(table, eid).glob("*.parquet"):
        f.unlink()
    wh.write_rows(table, eid, pa.Table.from_pandas(t, preserve_index=False))


# the versions before the interleaved pairing judge contention pass by pass
PER_PASS = 7


def test_counted_slack_is_the_versions_and_the_view_agrees_with_the_function(wh):
    """A reply 1-4 tokens over its budget (re-tokenization) counts from v2 on; 5 over never does."""
    write_synthetic_evaluation(wh, "s", protocol_version=1)

    def over(t):
        cand = t.index[t.engine == "candidate"]
        t.loc[cand[:6], "output_tokens"] = t.loc[cand[:6], "max_tokens"] + np.array([1, 2, 3, 4, 5, 9])
        return t

    _edit(wh, "requests", "s", over)
    v1, v2 = score_warehouse(wh, 1), score_warehouse(wh, 2)
    f1 = v1.passes[v1.passes.evaluation_id == "s"].candidate_failures.sum()
    f2 = v2.passes[v2.passes.evaluation_id == "s"].candidate_failures.sum()
    assert f1 - f2 == 4  # the four within the slack count under v2 only
    # the view that analysts read states the same rule as rules/counted.py, row for row
    con = wh.connect(read_only=True)
    try:
        rows = con.execute(
            "SELECT done, output_tokens, max_tokens, sent_at, pass_ends_at, ended_at, "
            "pass_grace_ends_at, counted FROM staged_requests"
        ).df()
    finally:
        con.close()
    mine = counted(
        rows["done"].to_numpy(dtype=bool),
        rows["output_tokens"],
        rows["max_tokens"],
        4,
        rows["sent_at"],
        rows["pass_ends_at"],
        rows["ended_at"],
        rows["pass_grace_ends_at"],
    )
    assert (mine == rows["counted"].to_numpy(dtype=bool)).all() and (~mine).sum() >= 2


def test_under_the_interleaved_pairing_contention_is_judged_over_the_workload(wh):
    """v8's local-smollm2 (interleaved, `contention_per_workload`): one pass of eight with foreign
    CPU over the limit does not void; the same over every pass of a workload does."""
    assert load_protocol(8).task("local-smollm2").interleaving.contention_per_workload

    def foreign(passes):
        def edit(t):
            hit = t.pass_id.isin(passes)
            t.loc[hit, "foreign_cpu_seconds"] = 0.8 * (t.loc[hit, "ended_at"] - t.loc[hit, "started_at"])
            return t

        return edit

    write_synthetic_evaluation(wh, "one", protocol_version=8)
    write_synthetic_evaluation(wh, "all", protocol_version=8)
    _edit(wh, "contention", "one", foreign(["team-0"]))
    _edit(wh, "contention", "all", foreign([f"team-{i}" for i in range(8)]))
    s = score_warehouse(wh, 8)
    assert not one(s, "one").void and one(s, "one").specscore > 1
    assert bool(one(s, "all").void)
    assert one(s, "all").specscore_reason.startswith("void: host contended (both team: foreign CPU 0.80 of a core")


def test_a_contended_pass_voids_the_evaluation_and_v1_does_not_judge_it(wh):
    write_synthetic_evaluation(wh, "c", attack="contended", protocol_version=PER_PASS)
    write_synthetic_evaluation(wh, "q")
    s = score_warehouse(wh)
    c = one(s, "c")
    assert bool(c.void) and math.isnan(c.specscore)
    assert c.specscore_reason.startswith("void: host contended (candidate team-0: foreign CPU 0.80 of a core")
    assert one(s, "q").specscore > 1 and not one(s, "q").void
    assert one(score_warehouse(wh, 1), "c").specscore > 1  # v1 has no contention rule


def test_steal_above_the_limit_voids_the_evaluation_and_at_the_limit_does_not(wh):
    """The steal rule (the staged test versions allow CI's VM more steal; v2's 5% is judged here)."""

    def steal(share):
        def edit(t):
            hit = (t.engine == "stock") & (t.pass_id == "solo-1")
            t.loc[hit, "steal_seconds"] = share * t.loc[hit, "total_cpu_seconds"]
            return t

        return edit

    write_synthetic_evaluation(wh, "s", protocol_version=PER_PASS)
    write_synthetic_evaluation(wh, "k", protocol_version=PER_PASS)
    _edit(wh, "contention", "s", steal(0.08))
    _edit(wh, "contention", "k", steal(0.05))
    s = score_warehouse(wh)
    assert bool(one(s, "s").void) and one(s, "s").specscore_reason == "void: host contended (stock solo-1: steal 8.0%)"
    assert not one(s, "k").void and one(s, "k").specscore > 1


def test_missing_contention_rows_void_an_evaluation_run_under_a_version_that_records_them(wh):
    write_synthetic_evaluation(wh, "m")
    _edit(wh, "contention", "m", lambda t: t[~((t.engine == "stock") & (t.pass_id == "busy-1"))])
    e = one(score_warehouse(wh), "m")
    assert bool(e.void) and e.specscore_reason == "void: host contention not recorded on stock busy-1"


def test_stock_without_tokens_on_a_pass_is_void_never_blank(wh):
    write_synthetic_evaluation(wh, "n")

    def no_stock_tokens(t):
        hit = (t.engine == "stock") & (t.pass_id == "team-1")
        t.loc[hit, "done"] = False
        t.loc[hit, "error"] = "broken stream"
        return t

    _edit(wh, "requests", "n", no_stock_tokens)
    e = one(score_warehouse(wh), "n")
    assert bool(e.void) and e.specscore_reason == "void: the stock engine counted no tokens in its window on team-1"


def test_unanswered_greedy_prompts_count_zero_from_v2(wh):
    """The candidate leaves 1 of 6 greedy prompts unanswered: v1 dropped it (mean over 5), v2
    counts it a = 0 (mean over 6), so skipping never raises the agreement."""
    write_synthetic_evaluation(wh, "u", attack="candidate_unanswered", protocol_version=1)
    g1, g2 = (
        gate(score_warehouse(wh, 1), "u", "greedy_agreement"),
        gate(score_warehouse(wh, 2), "u", "greedy_agreement"),
    )
    assert g2.statistic == pytest.approx(g1.statistic * 5 / 6)
    assert "1 left unanswered by the candidate, counted as 0" in g2.detail


def test_a_skipped_fidelity_text_scores_its_worst_value(wh):
    """One of 6 fidelity texts unanswered by the candidate: under v2 its tokens count at
    max(largest per-token difference seen, 1 nat), so skipping fails a gate the rest passes."""
    write_synthetic_evaluation(wh, "f")
    _edit(
        wh,
        "probe_fidelity",
        "f",
        lambda t: t.assign(
            answered=~((t.engine == "candidate") & (t.text_id == t.text_id.iloc[0])),
            token_logprobs=[
                None if (e == "candidate" and i == t.text_id.iloc[0]) else lp
                for e, i, lp in zip(t.engine, t.text_id, t.token_logprobs)
            ],
        ),
    )
    s = score_warehouse(wh)
    g = gate(s, "f", "target_fidelity")
    rows = wh.read_table("probe_fidelity", "f").to_pandas()
    stock = rows[rows.engine == "stock"]
    skipped = len(stock.iloc[0]["token_ids"])
    assert g.statistic == pytest.approx(skipped * 1.0 / sum(len(x) for x in stock.token_ids))  # identical others: 0
    assert g.verdict == "fail" and gate(s, "f", "answering").verdict == "fail"  # 1 of 6 is over 10% too
    assert one(s, "f").specscore == 0.0 and not one(s, "f").void


def test_a_candidate_without_scorable_replies_fails_instead_of_blanking(wh):
    write_synthetic_evaluation(wh, "e")
    _edit(wh, "probe_scored", "e", lambda t: t[t.reply_engine == "stock"])
    s = score_warehouse(wh)
    assert gate(s, "e", "sampled_likelihood").verdict == "fail" and gate(s, "e", "first_choice").verdict == "fail"
    assert one(s, "e").specscore == 0.0 and not one(s, "e").void


def test_memory_samples_must_cover_the_passes_but_an_over_budget_peak_still_fails(wh):
    write_synthetic_evaluation(wh, "gap", task_id="qwen3-8b", seed=3)
    write_synthetic_evaluation(wh, "hog", task_id="qwen3-8b", seed=3, attack="memory")
    # every other sample of the candidate's solo-0 lost: gaps over the protocol's 2 s
    for eid in ("gap", "hog"):
        _edit(
            wh,
            "memory",
            eid,
            lambda t: t[~((t.engine == "candidate") & (t.pass_id == "solo-0") & (np.arange(len(t)) % 2 == 1))],
        )
    s = score_warehouse(wh)
    g = gate(s, "gap", "memory")
    assert g.verdict == "not measured" and "samples do not cover the timed passes" in g.detail
    assert bool(one(s, "gap").void) and "memory" in one(s, "gap").specscore_reason
    assert gate(s, "hog", "memory").verdict == "fail" and one(s, "hog").specscore == 0.0
    assert gate(score_warehouse(wh, 1), "gap", "memory").verdict == "pass"  # v1 judged the peak alone


def test_the_board_ranks_the_last_scored_evaluation_and_both_boards_agree(tmp_path):
    from speculator_arena.board.memo import BoardMemo
    from speculator_arena.warehouse import Warehouse

    wh = Warehouse(tmp_path / "home")
    write_synthetic_evaluation(
        wh, "a1", split="test", account_id="A", created_at=1.0e9, speedups={"solo": 1.5, "team": 1.5, "busy": 1.5}
    )
    write_synthetic_evaluation(
        wh, "a2", split="test", account_id="A", created_at=1.1e9, attack="contended", protocol_version=PER_PASS
    )
    write_synthetic_evaluation(wh, "a3", split="test", account_id="A", created_at=1.2e9, attack="void")
    write_synthetic_evaluation(
        wh, "b1", split="test", account_id="B", created_at=1.0e9, attack="contended", protocol_version=PER_PASS
    )
    text_rows = board_rows(score_warehouse(wh), "local-smollm2", "test")
    web_rows = BoardMemo(wh.home).board("local-smollm2", None).boards["test"]
    for rows in (text_rows, web_rows):
        by = rows.set_index("account_id")
        assert by.loc["A", "evaluation_id"] == "a1" and by.loc["A", "rank"] == 1  # not hidden by a2, a3
        assert by.loc["B", "evaluation_id"] == "b1" and pd_isna(by.loc["B", "rank"])  # nothing scored: unranked
    assert list(text_rows.evaluation_id) == list(web_rows.evaluation_id)


def pd_isna(x) -> bool:
    import pandas as pd

    return bool(pd.isna(x))
