"""The board's intervals and shared ranks (SCORING.md "Ties on the board") and the A/A check.

Hand-made score frames (the scorer's `evaluations` and `passes` columns that the board reads)
with chosen pass ratios: each interval is compared with tests/scoring/independent.py's
bootstrap, one resample at a time from the documented seed rule; ranks and flags with what the
rule says for scores chosen on either side of the noise. The last test goes through a
synthetic warehouse, the scorer and `GET /api/board`'s JSON.
"""

from __future__ import annotations

import math

import independent
import numpy as np
import pandas as pd
import pytest

from speculator_arena.board.ranking import board_noise, board_rows
from speculator_arena.board.text import board_text
from speculator_arena.protocol import load_protocol
from speculator_arena.protocol.version_files import protocol_digest
from speculator_arena.scoring.intervals import specscore_intervals
from speculator_arena.scoring.result import Scores

LATEST = load_protocol().version
# The latest version whose local-smollm2 has no calibrated speed noise (v4; v5 ships its
# calibration): where these tests show what the board does without one.
UNCALIBRATED = max(
    v
    for v in range(1, LATEST + 1)
    if "local-smollm2" in load_protocol(v).tasks
    and load_protocol(v).tasks["local-smollm2"].speed_noise.max_abs_error is None
)
WORKLOADS = independent.WORKLOADS


def noise_of(task: str) -> float | None:
    return load_protocol(LATEST).tasks[task].speed_noise.max_abs_error


def entry(eid, ratios=None, *, score=None, label=None, account=None, reference=False, failed="", created=0.0):
    """One evaluation: `ratios` per workload (its SpecScore is their medians' geometric mean, as
    the scorer computes it), or a fixed `score` without passes (0 by a failed gate, or blank)."""
    if ratios is not None and not isinstance(ratios, dict):
        ratios = {w: list(ratios) for w in WORKLOADS}
    if ratios is not None:  # a failed gate scores 0, as the scorer does
        score = 0.0 if failed else float(np.prod([np.median(ratios[w]) for w in WORKLOADS])) ** (1.0 / 3.0)
    return dict(
        eid=eid,
        ratios=ratios,
        score=score,
        label=label or eid,
        account=account or f"acct-{eid}",
        reference=reference,
        failed=failed,
        created=created,
    )


def scores_of(entries, task="qwen3-8b", split="dev", version=LATEST) -> Scores:
    ev, passes = [], []
    for e in entries:
        scored = e["score"] is not None and not math.isnan(e["score"])
        ev.append(
            dict(
                evaluation_id=e["eid"],
                task_id=task,
                split=split,
                account_id=e["account"],
                label=e["label"],
                is_reference=e["reference"],
                status="measured",
                created_at=e["created"],
                specscore=e["score"] if scored else float("nan"),
                specscore_reason=("gate failed: " + e["failed"]) if e["failed"] else (None if scored else "void: x"),
                gates_pass=(False if e["failed"] else (True if scored else None)),
                failed_gates=e["failed"],
                not_measured_gates="",
                gap_flag=None,
            )
        )
        for w, rs in (e["ratios"] or {}).items():
            passes += [dict(evaluation_id=e["eid"], workload=w, pass_index=i, ratio=float(r)) for i, r in enumerate(rs)]
    ev = pd.DataFrame(ev)
    ev["gates_pass"] = ev["gates_pass"].astype("boolean")
    return Scores(version, protocol_digest(version), ev, pd.DataFrame(passes), pd.DataFrame(), pd.DataFrame())


def ratios_by_workload(e) -> dict[str, list[float]]:
    return {w: list(e["ratios"][w]) for w in WORKLOADS}


def test_interval_is_the_seeded_bootstrap_of_the_pass_ratios():
    rng = np.random.default_rng(20261201)
    entries = [entry(f"ev-{i}", {w: rng.uniform(0.9, 1.9, 3).round(4).tolist() for w in WORKLOADS}) for i in range(4)]
    entries.append(entry("ev-four", {w: rng.uniform(1.0, 1.6, 4).tolist() for w in WORKLOADS}))  # even counts
    entries.append(
        entry("ev-uneven", {"solo": [1.3, 1.5], "team": [1.2, 1.25, 1.4], "busy": [1.1, 1.6, 1.3, 1.2, 1.25]})
    )
    entries.append(entry("ev-zeroed", {"solo": [1.5, 1.6, 1.4], "team": [0.0, 1.3, 1.35], "busy": [1.2, 1.1, 1.25]}))
    scores = scores_of(entries)
    for task in ("qwen3-8b", "local-smollm2"):  # calibrated (0.020) and not (null)
        e = noise_of(task)
        got = specscore_intervals(scores.evaluations, scores.passes, e).set_index(scores.evaluations["evaluation_id"])
        for x in entries:
            low, high = independent.board_interval(ratios_by_workload(x), x["eid"], e)
            assert math.isclose(got.at[x["eid"], "interval_low"], low, rel_tol=1e-12), (task, x["eid"])
            assert math.isclose(got.at[x["eid"], "interval_high"], high, rel_tol=1e-12), (task, x["eid"])
            assert low < x["score"] < high  # every entry's passes vary: a proper interval around it
    # the zeroed pass is resampled as a 0: some resamples' team median is 0, so the low end is below
    # the low end of the same evaluation with that pass at the others' level
    lifted = entry("ev-zeroed", {"solo": [1.5, 1.6, 1.4], "team": [1.3, 1.3, 1.35], "busy": [1.2, 1.1, 1.25]})
    s2 = scores_of([lifted])
    z = specscore_intervals(scores.evaluations, scores.passes, None).iloc[-1]
    assert z["interval_low"] < specscore_intervals(s2.evaluations, s2.passes, None).iloc[0]["interval_low"]


def test_interval_properties():
    center = [1.30, 1.40, 1.50]
    wide = entry("ev-x", {w: [1.05, 1.40, 1.75] for w in WORKLOADS})
    narrow = entry("ev-x", {w: [1.38, 1.40, 1.42] for w in WORKLOADS})
    same = entry("ev-x", {w: [1.40, 1.40, 1.40] for w in WORKLOADS})
    width = {}
    for name, x in (("wide", wide), ("narrow", narrow), ("same", same)):
        s = scores_of([x])
        iv = specscore_intervals(s.evaluations, s.passes, None).iloc[0]
        assert iv["interval_low"] <= x["score"] <= iv["interval_high"]
        width[name] = iv["interval_high"] - iv["interval_low"]
    assert width["wide"] > width["narrow"] > 0 and width["same"] == 0
    # widening by e: exactly low × (1 − e), high × (1 + e) of the same bootstrap
    s = scores_of([entry("ev-y", {w: center for w in WORKLOADS})])
    raw = specscore_intervals(s.evaluations, s.passes, None).iloc[0]
    for e in (0.02, 0.1):
        iv = specscore_intervals(s.evaluations, s.passes, e).iloc[0]
        assert (iv["boot_low"], iv["boot_high"]) == (raw["interval_low"], raw["interval_high"])
        assert iv["interval_low"] == raw["interval_low"] * (1 - e) and iv["interval_high"] == raw["interval_high"] * (
            1 + e
        )
    # reproducible, and the same whatever else is on the board and in what order
    rng = np.random.default_rng(7)
    others = [entry(f"ev-{i}", {w: rng.uniform(1, 2, 9).tolist() for w in WORKLOADS}) for i in range(5)]
    alone = scores_of([others[2]])
    crowd = scores_of(others[::-1])
    a = specscore_intervals(alone.evaluations, alone.passes, 0.02).iloc[0]
    c = (
        specscore_intervals(crowd.evaluations, crowd.passes, 0.02)
        .set_index(crowd.evaluations["evaluation_id"])
        .loc["ev-2"]
    )
    assert (a["interval_low"], a["interval_high"]) == (c["interval_low"], c["interval_high"])
    # another evaluation id draws other resamples (the seed is the id's; nine passes a workload, so
    # that the quantiles do not fall on the same few values whatever the draws)
    renamed = scores_of([dict(others[2], eid="ev-2-renamed")])
    r = specscore_intervals(renamed.evaluations, renamed.passes, 0.02).iloc[0]
    assert (r["interval_low"], r["interval_high"]) != (a["interval_low"], a["interval_high"])


def test_zero_and_blank_scores():
    s = scores_of(
        [
            entry("ev-ok", [1.2, 1.3, 1.25]),
            entry("ev-gated", [1.9, 2.0, 2.1], failed="length"),
            entry("ev-void", score=float("nan")),
        ]
    )
    rows = board_rows(s, "qwen3-8b", "dev").set_index("evaluation_id")
    assert (rows.at["ev-gated", "interval_low"], rows.at["ev-gated", "interval_high"]) == (0.0, 0.0)
    assert math.isnan(rows.at["ev-void", "interval_low"]) and math.isnan(rows.at["ev-void", "interval_high"])
    assert (
        rows.at["ev-ok", "rank"] == 1 and pd.isna(rows.at["ev-gated", "rank"]) and pd.isna(rows.at["ev-void", "rank"])
    )
    assert not rows["tie"].any()


def test_entries_within_each_others_noise_share_a_rank():
    # qwen3-8b's max A/A error is 0.020: identical passes give point bootstraps, so the intervals are
    # the scores ± 2%: 1.50 [1.47, 1.53] and 1.48 [1.4504, 1.5096] overlap; 1.30 [1.274, 1.326] is below both
    assert noise_of("qwen3-8b") == 0.02
    s = scores_of(
        [
            entry("ev-b", [1.48] * 3, created=2.0),
            entry("ev-a", [1.50] * 3, created=1.0),
            entry("ev-c", [1.30] * 3),
            entry("ev-gated", [2.0] * 3, failed="greedy_agreement"),
        ]
    )
    rows = board_rows(s, "qwen3-8b", "dev")
    got = rows.set_index("evaluation_id")
    assert list(rows["evaluation_id"]) == ["ev-a", "ev-b", "ev-c", "ev-gated"]
    assert [got.at[e, "rank"] for e in ("ev-a", "ev-b", "ev-c")] == [1, 1, 3]
    assert [bool(got.at[e, "tie"]) for e in ("ev-a", "ev-b", "ev-c", "ev-gated")] == [True, True, False, False]
    assert math.isclose(got.at["ev-a", "interval_low"], 1.47) and math.isclose(got.at["ev-b", "interval_high"], 1.5096)
    text = board_text(s, split="dev")
    line = {x: next(ln for ln in text.splitlines() if f" {x} " in ln) for x in ("ev-a", "ev-b", "ev-c", "ev-gated")}
    assert line["ev-a"].split()[0] == "1=" and "1.5000 [1.470, 1.530]" in line["ev-a"]
    assert line["ev-b"].split()[0] == "1=" and "1.4800 [1.450, 1.510]" in line["ev-b"]
    assert line["ev-c"].split()[0] == "3" and "1.3000 [1.274, 1.326]" in line["ev-c"]
    assert line["ev-gated"].split()[0] == "ev-gated" and "0.0000 [0.000, 0.000]" in line["ev-gated"]
    # without the calibrated noise (local-smollm2: not calibrated) the same scores are ranked apart
    s_local = scores_of(
        [entry("ev-b", [1.48] * 3), entry("ev-a", [1.50] * 3), entry("ev-c", [1.30] * 3)],
        task="local-smollm2",
        version=UNCALIBRATED,
    )
    local = board_rows(s_local, "local-smollm2", "dev")
    assert list(local["rank"]) == [1, 2, 3] and not local["tie"].any()
    assert "not calibrated" in board_text(s_local, split="dev")


def test_a_higher_score_with_a_narrow_interval_can_rank_below_a_wide_one():
    """LMArena's rule counts only intervals entirely above: a wide interval shares the top rank
    with the leader while a narrow one just below the leader's low end does not; rows are listed
    by rank, then SpecScore."""
    s = scores_of(
        [
            entry("ev-lead", [1.80, 1.80, 1.80]),
            entry("ev-narrow", [1.50, 1.50, 1.50]),
            entry("ev-wide", [0.9, 1.4, 2.4]),
        ],
        task="local-smollm2",
        version=UNCALIBRATED,
    )  # not calibrated: the bootstrap alone
    rows = board_rows(s, "local-smollm2", "dev").set_index("evaluation_id")
    assert rows.at["ev-wide", "interval_high"] > 1.80 > rows.at["ev-narrow", "interval_high"]
    assert rows.at["ev-lead", "rank"] == 1 and rows.at["ev-wide", "rank"] == 1 and rows.at["ev-narrow", "rank"] == 2
    assert list(rows.index[:3]) == ["ev-lead", "ev-wide", "ev-narrow"]


@pytest.mark.parametrize("aa_score, flagged", [(1.03, True), (0.975, True), (1.01, False), (0.99, False)])
def test_aa_reference_outside_the_calibrated_noise_is_flagged(aa_score, flagged):
    # qwen3-8b's A/A reference is `stock` (kind none); its max A/A error is 0.020
    s = scores_of(
        [
            entry("ev-p", [1.4] * 3),
            entry("ev-stock", [aa_score] * 3, label="stock", account="operators", reference=True),
            entry("ev-ngram", [1.2] * 3, label="ngram-4", account="operators", reference=True),
        ]
    )
    rows = board_rows(s, "qwen3-8b", "dev")
    refs = rows[rows["section"] == "references"]
    assert list(refs["aa_flag"]) == [flagged, flagged]
    assert rows.loc[rows["section"] == "participants", "aa_flag"].isna().all()
    noise = board_noise(LATEST, "qwen3-8b", rows)
    assert noise["aa_flag"] is flagged and noise["aa_reference"] == "stock" and noise["calibrated"]
    assert math.isclose(noise["aa_error"], abs(aa_score - 1))
    assert noise["note"].startswith("FLAGGED") == flagged
    assert (f"A/A check: {noise['note']}" in board_text(s, split="dev")) and (("FLAGGED" in noise["note"]) == flagged)


def test_aa_check_not_calibrated_and_not_measured():
    s = scores_of(
        [entry("ev-stock", [1.5] * 3, label="dev-stock", account="operators", reference=True)],
        task="local-smollm2",
        version=UNCALIBRATED,
    )
    noise = board_noise(UNCALIBRATED, "local-smollm2", board_rows(s, "local-smollm2", "dev"))
    assert noise["calibrated"] is False and noise["aa_flag"] is None and noise["aa_specscore"] == pytest.approx(1.5)
    assert noise["note"].startswith("not calibrated")
    assert board_rows(s, "local-smollm2", "dev")["aa_flag"].isna().all()
    s = scores_of([entry("ev-p", [1.4] * 3)])
    noise = board_noise(LATEST, "qwen3-8b", board_rows(s, "qwen3-8b", "dev"))
    assert noise["calibrated"] and noise["aa_flag"] is None and "stock is not measured" in noise["note"]


def test_board_json_carries_intervals_ranks_and_the_aa_flag(tmp_path):
    """Through the real parts: synthetic evaluations written to a warehouse, scored, served as
    `GET /api/board`'s JSON (board/json_rows.py)."""
    from synthetic import write_synthetic_evaluation

    from speculator_arena.board.json_rows import board_json
    from speculator_arena.board.memo import BoardMemo
    from speculator_arena.warehouse import Warehouse

    wh = Warehouse(tmp_path / "home")
    for i, (eid, sp, ref) in enumerate(
        [("ev-a", 1.5, False), ("ev-b", 1.48, False), ("ev-c", 1.2, False), ("ev-stock", 1.03, True)]
    ):
        write_synthetic_evaluation(
            wh,
            eid,
            task_id="qwen3-8b",
            account_id="operators" if ref else f"acct-{eid}",
            label="stock" if ref else eid,
            is_reference=ref,
            seed=i + 1,
            created_at=1.8e9 + i,
            speedups={w: sp for w in WORKLOADS},
        )
    doc = board_json(BoardMemo(wh.home), "qwen3-8b", "dev")
    part = {r["evaluation_id"]: r for r in doc["participants"]}
    assert [part[e]["rank"] for e in ("ev-a", "ev-b", "ev-c")] == [1, 1, 3]
    assert [part[e]["tie"] for e in ("ev-a", "ev-b", "ev-c")] == [True, True, False]
    for e, sp in (("ev-a", 1.5), ("ev-b", 1.48), ("ev-c", 1.2)):
        r = part[e]
        assert r["interval_low"] < r["specscore"] < r["interval_high"]
        assert r["interval_low"] == pytest.approx(sp * 0.98, rel=1e-6) and r["interval_high"] == pytest.approx(
            sp * 1.02, rel=1e-6
        )
    assert doc["noise"]["calibrated"] and doc["noise"]["max_abs_error"] == 0.02
    assert doc["noise"]["aa_flag"] is True and doc["noise"]["aa_reference"] == "stock"
    assert doc["references"][0]["aa_flag"] is True and doc["references"][0]["rank"] == 1
