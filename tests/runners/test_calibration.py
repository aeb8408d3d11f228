"""`arena calibrate` and `arena protocol publish` for real on the local task (protocol section 10):
the development engine's A/A runs, references and planted attacks, the m/c fit's short stock
passes, the candidate and its evidence, then publishing and re-scoring.

The attack module's evaluations (session fixture `evaluated`, attack profile) are adopted as the
calibration's first A/A run, its references and its controls (`--adopt`), so this runs the three
A/A evaluations they lack and the fit's reduced grid (m 1,2 x c 0.5,2, 2 s passes), through the
CLI and the Dagster assets. Every derived value is recomputed here from the stored gate rows and
request rows, by this file's own arithmetic. A full run (marker `full`): its evaluations do not fit
in CI's time; the rules themselves are checked in CI on stored synthetic runs
(tests/calibration/test_calibration_synthetic.py).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
import yaml
from ci_profile import ENGINE_THREADS  # tests/runners is on sys.path (conftest)

from speculator_arena.calibration.candidate import candidate_dir, load_evidence
from speculator_arena.cli import main
from speculator_arena.scoring import score_warehouse
from speculator_arena.warehouse import Warehouse

pytestmark = [pytest.mark.slow, pytest.mark.full]

TASK = "local-smollm2"
# the calibration's run -> the attack module's evaluation that stands for it
ADOPT = {
    "aa-1": "atk-dev-stock",
    "dev-ngram-4": "atk-dev-ngram",
    "dev-self-draft": "atk-dev-self-draft",
    "dev-suffix-8": "atk-dev-suffix",
    "loose-accept": "atk-loose-accept",
    "force-greedy": "atk-force-greedy",
    "other-sampling": "atk-other-sampling",
    "quantized": "atk-quantized",
    "cut-half": "atk-cut-half",
    "empty-probe-replies": "atk-empty-probe-replies",
    "garbage-logprob-ids": "atk-garbage-logprob-ids",
}
HONEST = ("aa-1", "aa-2", "aa-3", "aa-4", "dev-ngram-4", "dev-self-draft", "dev-suffix-8")


@pytest.fixture(scope="module")
def calibrated(evaluated, built_home):
    missing = [
        v
        for v in ADOPT.values()
        if v.replace("atk-", "").replace("-", "_") not in evaluated["status"]
        and v.replace("atk-", "") not in evaluated["status"]
    ]
    if missing:
        pytest.skip(f"the attack module's runs {missing} were not selected (ARENA_ATTACK_TEST_ONLY)")
    home = built_home["home"]
    mp = pytest.MonkeyPatch()
    mp.setenv("ARENA_PROTOCOL_DIR", str(evaluated["protocol_dir"]))
    mp.setenv("ARENA_HOME", str(home))
    mp.setenv("OMP_NUM_THREADS", ENGINE_THREADS)
    try:
        base = evaluated["version"]
        wh = Warehouse(home)
        before = score_warehouse(wh, base)
        args = [
            "calibrate",
            "--task",
            TASK,
            "--base",
            str(base),
            "--fit-grid",
            "small",
            "--fit-seconds",
            "2",
            "--target",
            str(built_home["target"]),
        ] + [a for k, v in ADOPT.items() for a in ("--adopt", f"{k}={v}")]
        rc = main(args)
        from speculator_arena.calibration.candidate import candidate_versions

        version = max(v for t, v in candidate_versions(home, TASK))
        evidence = load_evidence(home, TASK, version)
        assert rc == (0 if evidence["separates"] else 1)
        doc = yaml.safe_load((candidate_dir(home, TASK, version) / "candidate.yaml").read_text())
        publish = ["protocol", "publish", "--task", TASK, "--candidate", str(version), "--by", "ci-operator"]
        if not evidence["separates"]:
            assert main(publish) == 2  # refused without the override
        assert main(publish + (["--override"] if not evidence["separates"] else [])) == 0
        yield {
            "home": home,
            "wh": wh,
            "base": base,
            "version": version,
            "evidence": evidence,
            "doc": doc,
            "before": before,
        }
    finally:
        mp.undo()


def _ids(evidence) -> dict:
    return {r["name"]: r["evaluation_id"] for r in evidence["runs"]}


def test_every_value_follows_scoring_md_on_the_stored_runs(calibrated):
    ev, base = calibrated["evidence"], calibrated["base"]
    ids = _ids(ev)
    assert all(ids[n] for n in HONEST), ids
    task = calibrated["doc"]["tasks"][TASK]
    sc = score_warehouse(calibrated["wh"], base, evaluation_ids=[i for i in ids.values() if i])
    g = sc.gates.set_index(["evaluation_id", "gate"])
    honest = [ids[n] for n in HONEST]
    for gate, key in (("sampled_likelihood", "likelihood_bound"), ("first_choice", "first_choice_bound")):
        k = 0
        while any(g.at[(e, gate), "ci_low"] > k * 0.005 or g.at[(e, gate), "ci_high"] < -k * 0.005 for e in honest):
            k += 1
        assert task["limits"][key] == pytest.approx((k + 1) * 0.005), key
    h = max(g.at[(e, "target_fidelity"), "statistic"] for e in honest)
    q = g.at[(ids["quantized"], "target_fidelity"), "statistic"]
    assert task["limits"]["fidelity_ceiling"] == max(1e-6, float(f"{math.sqrt(h * q):.2g}"))
    lo_h = min(g.at[(e, "greedy_agreement"), "statistic"] for e in honest)
    hi_q = g.at[(ids["quantized"], "greedy_agreement"), "statistic"]
    assert task["limits"]["greedy_agreement_floor"] == (round((lo_h + hi_q) / 2, 3) if lo_h - hi_q >= 0.2 else None)
    e = sc.evaluations.set_index("evaluation_id")
    errs = [
        abs((e.at[i, "r_solo"] * e.at[i, "r_team"] * e.at[i, "r_busy"]) ** (1 / 3) - 1)
        for i in (ids[f"aa-{k}"] for k in range(1, 5))
    ]
    assert task["speed_noise"] == {
        "mean_abs_error": round(float(np.mean(errs)), 4),
        "max_abs_error": round(max(errs), 4),
    }
    assert task["dev_test_gap"] == min(0.95, round(5 * round(max(errs), 4), 4))
    # the three A/A runs the attack module lacks were run by this calibration, under its base version
    for k in (2, 3, 4):
        assert ids[f"aa-{k}"].startswith(f"cal-{TASK}-v{calibrated['version']}-aa-{k}")
        assert e.at[ids[f"aa-{k}"], "account_id"] == "arena-calibration"


def test_m_and_c_come_from_the_fit_passes(calibrated):
    """m and c: the grid point whose stored requests' cache statistics come closest to the data card's
    targets, recomputed here from the raw request rows."""
    wh, version = calibrated["wh"], calibrated["version"]
    fit = calibrated["evidence"]["fit"]
    rows = wh.read_table("requests", f"cal-{TASK}-v{version}-fit").to_pandas()
    rows = rows[rows["done"].fillna(False).astype(bool)].copy()
    rows["prompt"] = rows["usage_prompt_tokens"].where(rows["usage_prompt_tokens"].fillna(0) > 0, rows["prompt_tokens"])
    rows["cached"] = rows["cached_tokens"].fillna(0)
    rows["out"] = rows["output_tokens"].fillna(0)
    from speculator_arena.pools.builder.datacard import load_data_card

    card = load_data_card(TASK, wh.home).stats["cache_hit_targets"]  # the served pool's card, else the repository's
    assert fit["targets"]["cache_hit_tokens"] == card["target_cache_hit_token_weighted"]
    t_hit, t_ret = card["target_cache_hit_token_weighted"], card["returning_session_history_cached_target"]
    best = None
    for m, c in [(1, 0.5), (1, 2.0), (2, 0.5), (2, 2.0)]:
        r = rows[rows["pass_id"] == f"fit-m{m}-c{c:g}"]
        assert len(r), (m, c)
        prompt = r["prompt"].astype(float)
        hit_tokens = r["cached"].sum() / prompt.sum()
        hit_mean = (r["cached"] / prompt).mean()
        hist = hit = 0.0
        for _, s in r.sort_values(["session_id", "turn"]).groupby("session_id"):
            s = s.reset_index(drop=True)
            for i in range(1, len(s)):
                if s.at[i, "turn"] == s.at[i - 1, "turn"] + 1:
                    h = s.at[i - 1, "prompt"] + s.at[i - 1, "out"]
                    hist += h
                    hit += min(s.at[i, "cached"], h)
        ret = hit / hist if hist else None
        loss = (
            ((hit_tokens - t_hit) / t_hit) ** 2
            + ((hit_mean - t_hit) / t_hit) ** 2
            + (1.0 if ret is None else ((ret - t_ret) / t_ret) ** 2)
        )
        if best is None or loss < best[0] - 1e-12:
            best = (loss, m, c)
    task = calibrated["doc"]["tasks"][TASK]
    assert (fit["m"], fit["c"]) == (best[1], best[2])
    assert task["workloads"]["busy"]["interleave"] == best[1] and task["workloads"]["team"]["interleave"] == best[1]
    assert task["think_time"]["scale_c"] == best[2]
    d = candidate_dir(wh.home, TASK, version) / "plots"
    assert {p.name for p in d.iterdir()} >= {"aa_specscores.png", "gates.png", "cache_fit.png"}


def test_on_the_published_version_honest_runs_pass_and_controls_fail_or_are_named(calibrated):
    ev, version = calibrated["evidence"], calibrated["version"]
    ids = _ids(ev)
    sc = score_warehouse(calibrated["wh"], version, evaluation_ids=[i for i in ids.values() if i])
    for name, eid in ids.items():
        g = sc.gates[sc.gates["evaluation_id"] == eid]
        failed = set(g.loc[g["verdict"] == "fail", "gate"])
        if name in HONEST:
            assert not failed, (name, g.to_string())
        elif not failed:  # a planted attack not caught: the evidence names it, in red
            assert any(name in p for p in ev["problems"]), (name, ev["problems"])


def test_publishing_rescored_the_warehouse_and_the_base_scores_are_unchanged(calibrated):
    wh, base, version = calibrated["wh"], calibrated["base"], calibrated["version"]
    pin = json.loads((wh.home / "scores" / f"v{version}" / "protocol.json").read_text())
    assert pin["version"] == version
    rescored = pd.read_parquet(wh.home / "scores" / f"v{version}" / "evaluations.parquet")
    assert set(calibrated["before"].evaluations["evaluation_id"]) <= set(rescored["evaluation_id"])
    cols = ["evaluation_id", "gate", "statistic", "limit", "verdict"]
    before = calibrated["before"].gates[cols]
    after = score_warehouse(wh, base, evaluation_ids=list(before["evaluation_id"].unique())).gates[cols]
    key = ["evaluation_id", "gate"]
    pd.testing.assert_frame_equal(
        before.sort_values(key).reset_index(drop=True), after.sort_values(key).reset_index(drop=True)
    )
    new = score_warehouse(wh, version, evaluation_ids=list(before["evaluation_id"].unique())).gates[cols]
    both = before.merge(new, on=key, suffixes=("_old", "_new"))
    moved = both[both["verdict_old"] != both["verdict_new"]]
    assert len(moved), "no verdict moved between the base version and the calibrated one"
    # each moved verdict moved with its limit, the statistic being the same
    assert (moved["statistic_old"].fillna(-9) == moved["statistic_new"].fillna(-9)).all()
    assert (moved["limit_old"].fillna(-1) != moved["limit_new"].fillna(-1)).all(), moved.to_string()
