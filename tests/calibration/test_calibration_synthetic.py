"""The calibration pipeline on complete synthetic evaluations (the scoring domain's
`write_synthetic_evaluation`: every raw table, scored by the real scorer): the values derived
against SCORING.md's rules computed here from the stored gate rows, the candidate that is not a
version until published, the red evidence of a control that passes, publishing (refused without
an override, recorded with who and when), the re-scoring, and the Protocol page showing it.

Cheap (no engine): about ten synthetic evaluations scored a few times. The same checks on real
runs of the development engine are tests/runners/test_calibration.py (slow).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import yaml

from speculator_arena.calibration.candidate import build_candidate, candidate_dir
from speculator_arena.calibration.plan import plan
from speculator_arena.calibration.publish import NotSeparatedError, publication, publish
from speculator_arena.calibration.runs import resolve
from speculator_arena.protocol import available_versions, load_protocol
from speculator_arena.scoring import score_warehouse
from speculator_arena.warehouse import Warehouse, generation

TASK = "local-smollm2"
# planted control -> the synthetic evaluation's attack that stands for it
SYNTHETIC_ATTACK = {
    "loose-accept": "likelihood",
    "force-greedy": "first_choice",
    "other-sampling": "first_choice",
    "quantized": "fidelity",
    "cut-half": "length",
    "empty-probe-replies": "greedy",
    "garbage-logprob-ids": "candidate_unanswered",
}
AA_SPEEDS = [(1.01, 0.99, 1.02), (0.98, 1.0, 1.01), (1.03, 0.97, 1.0), (0.99, 1.02, 0.96)]


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    try:
        yield _calibrate(tmp_path_factory.mktemp("calibration") / "arena_home", mp)
    finally:
        mp.undo()


def _calibrate(home, monkeypatch) -> dict:
    from synthetic import write_synthetic_evaluation

    monkeypatch.setenv("ARENA_HOME", str(home))
    monkeypatch.delenv("ARENA_PROTOCOL_DIR", raising=False)
    base = load_protocol().version
    p = plan(TASK, base)
    assert p.candidate_version == base + 1
    wh = Warehouse(home)
    for i, run in enumerate(p.runs):
        eid = run.evaluation_id(TASK, p.candidate_version)
        if run.role == "aa":
            s = AA_SPEEDS[int(run.name[3:]) - 1]
            speed = {"solo": s[0], "team": s[1], "busy": s[2]}
        else:
            speed = {"solo": 1.3, "team": 1.2, "busy": 1.1}
        write_synthetic_evaluation(
            wh,
            eid,
            task_id=TASK,
            account_id="arena-calibration",
            label=run.name,
            seed=10 + i,
            speedups=speed,
            attack=SYNTHETIC_ATTACK.get(run.name),
            created_at=1.8e9 + i,
        )
    write_synthetic_evaluation(
        wh, "ev-participant", task_id=TASK, account_id="acct-a", seed=99, attack="greedy", created_at=1.8e9 + 50
    )
    ids = resolve(wh, p)
    assert all(ids.values()), ids
    before = score_warehouse(wh, base)
    evidence = build_candidate(wh, p, ids)
    return {"home": home, "wh": wh, "plan": p, "ids": ids, "evidence": evidence, "base": base, "before": before}


def test_derived_values_follow_the_rules_of_scoring_md(calibrated):
    """Each value recomputed here from the stored gate rows (the scorer's), not by derive.py."""
    p, ids, base = calibrated["plan"], calibrated["ids"], calibrated["base"]
    doc = yaml.safe_load((candidate_dir(calibrated["home"], TASK, p.candidate_version) / "candidate.yaml").read_text())
    task = doc["tasks"][TASK]
    sc = score_warehouse(calibrated["wh"], base, evaluation_ids=list(ids.values()))
    g = sc.gates.set_index(["evaluation_id", "gate"])
    honest = [ids[r.name] for r in p.runs if r.honest]
    quantized = [ids["quantized"]]
    for gate, key in (("sampled_likelihood", "likelihood_bound"), ("first_choice", "first_choice_bound")):
        # the smallest multiple of 0.005 beyond which no honest CI lies and which no honest
        # standard error of D exceeds (v12), by counting up
        k = 0
        while any(
            g.at[(e, gate), "ci_low"] > k * 0.005
            or g.at[(e, gate), "ci_high"] < -k * 0.005
            or g.at[(e, gate), "se"] > k * 0.005
            for e in honest
        ):
            k += 1
        assert k * 0.005 >= max(g.at[(e, gate), "se"] for e in honest) > 0
        assert task["limits"][key] == pytest.approx((k + 1) * 0.005), key
    h = max(g.at[(e, "target_fidelity"), "statistic"] for e in honest)
    q = min(g.at[(e, "target_fidelity"), "statistic"] for e in quantized)
    assert task["limits"]["fidelity_ceiling"] == max(1e-6, float(f"{math.sqrt(h * q):.2g}"))
    lo_h = min(g.at[(e, "greedy_agreement"), "statistic"] for e in honest)
    hi_q = max(g.at[(e, "greedy_agreement"), "statistic"] for e in quantized)
    expected_floor = round((lo_h + hi_q) / 2, 3) if lo_h - hi_q >= 0.2 else None
    assert task["limits"]["greedy_agreement_floor"] == expected_floor
    ev = sc.evaluations.set_index("evaluation_id")
    aa = [ids[f"aa-{i}"] for i in range(1, 5)]
    errs = [abs((ev.at[e, "r_solo"] * ev.at[e, "r_team"] * ev.at[e, "r_busy"]) ** (1 / 3) - 1) for e in aa]
    assert task["speed_noise"] == {
        "mean_abs_error": round(float(np.mean(errs)), 4),
        "max_abs_error": round(max(errs), 4),
    }
    assert task["dev_test_gap"] == min(0.95, round(5 * round(max(errs), 4), 4))
    # A candidate is not a version until published
    assert p.candidate_version not in available_versions()
    assert doc["published"] == "candidate (not published)"


def test_a_control_that_passes_is_red_and_publishing_needs_an_override(calibrated):
    ev, p = calibrated["evidence"], calibrated["plan"]
    verdicts = {v["name"]: v for v in ev["verdicts"]}
    # honest runs pass every gate under the candidate, by construction of the rules
    assert all(v["passes_every_gate"] for v in verdicts.values() if v["honest"]), verdicts
    # the synthetic quantized control keeps greedy agreement of 1: no floor, so empty greedy replies pass
    assert ev["limits"]["greedy_agreement_floor"] is None
    assert not verdicts["empty-probe-replies"]["caught"]
    assert not ev["separates"] and any("empty-probe-replies" in x for x in ev["problems"])
    md = (candidate_dir(calibrated["home"], TASK, p.candidate_version) / "evidence.md").read_text()
    assert "DOES NOT SEPARATE" in md and "NOT CAUGHT" in md
    for name in ("loose-accept", "quantized", "cut-half"):
        assert verdicts[name]["caught"], verdicts[name]
    with pytest.raises(NotSeparatedError):
        publish(calibrated["home"], TASK, p.candidate_version, rescore=False)
    assert p.candidate_version not in available_versions()  # nothing was published


def test_the_command_line_lists_the_candidate_and_refuses_to_publish_it_without_override(calibrated, capsys):
    """`arena protocol candidates` and `arena protocol publish`, the calibration's actions of the
    protocol's parser (calibration/commands.py), through the real command line; a refusal
    publishes nothing."""
    from speculator_arena.cli import main

    p, ev, v = calibrated["plan"], calibrated["evidence"], calibrated["plan"].candidate_version
    assert "record" not in calibrated, "runs before the module publishes the candidate"
    assert main(["protocol", "candidates"]) == 0
    out = capsys.readouterr().out
    assert f"{TASK} v{v} (runs under v{calibrated['base']}, " in out and f"{len(ev['problems'])} problem(s)" in out
    assert main(["protocol", "candidates", "--task", "qwen3-8b"]) == 0 and TASK not in capsys.readouterr().out
    assert main(["protocol", "publish", "--task", TASK]) == 2
    assert "publish needs --task and --candidate" in capsys.readouterr().err
    assert main(["protocol", "publish", "--task", TASK, "--candidate", str(v), "--by", "operator-ci"]) == 2
    err = capsys.readouterr().err
    assert "does not separate" in err and "--override" in err
    assert v not in available_versions() and publication(v) is None and p.candidate_version == v


def _published(calibrated) -> dict:
    """Publish the candidate once per module (with the override its evidence needs)."""
    if "record" not in calibrated:
        calibrated["marker_before"] = generation.read(calibrated["home"])
        calibrated["record"] = publish(
            calibrated["home"], TASK, calibrated["plan"].candidate_version, override=True, by="operator-ci"
        )
    return calibrated["record"]


def test_publish_records_rescores_and_leaves_the_old_version_readable(calibrated):
    p, base, wh = calibrated["plan"], calibrated["base"], calibrated["wh"]
    v = p.candidate_version
    rec = _published(calibrated)
    assert v in available_versions() and load_protocol(v).version == v
    assert rec["published_by"] == "operator-ci" and rec["override"] and publication(v)["published_at"]
    assert json.loads((wh.home / "scores" / f"v{v}" / "protocol.json").read_text())["version"] == v
    assert rec["rescored_evaluations"] == len(calibrated["before"].evaluations)
    # boards of the latest version look again (the warehouse's change marker moved)
    assert generation.read(wh.home) != calibrated["marker_before"]
    after_base = score_warehouse(wh, base)
    new = score_warehouse(wh, v)
    # the old version's scores, read under it, are unchanged
    cols = ["evaluation_id", "gate", "statistic", "limit", "verdict"]
    a = calibrated["before"].gates[cols].sort_values(["evaluation_id", "gate"]).reset_index(drop=True)
    b = after_base.gates[cols].sort_values(["evaluation_id", "gate"]).reset_index(drop=True)
    assert a.equals(b)
    # a verdict that moved with its limit: greedy floor 0.5 -> none, the greedy control now passes
    old = a.set_index(["evaluation_id", "gate"])
    cur = new.gates.set_index(["evaluation_id", "gate"])
    moved = [k for k in old.index if old.at[k, "verdict"] != cur.at[k, "verdict"]]
    assert ("ev-participant", "greedy_agreement") in moved, moved
    assert old.at[("ev-participant", "greedy_agreement"), "verdict"] == "fail"
    assert cur.at[("ev-participant", "greedy_agreement"), "verdict"] == "pass"
    assert all(
        old.at[k, "limit"] != cur.at[k, "limit"] or (pd_isna(old.at[k, "limit"]) != pd_isna(cur.at[k, "limit"]))
        for k in moved
    ), moved
    # the published version cannot be published again (versions are immutable)
    with pytest.raises(ValueError, match="exists already"):
        publish(calibrated["home"], TASK, v, override=True, rescore=False)


def pd_isna(x) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def test_the_protocol_page_shows_the_published_evidence(calibrated):
    from pathlib import Path

    from streamlit.testing.v1 import AppTest

    from speculator_arena import dashboards

    _published(calibrated)
    at = AppTest.from_file(str(Path(dashboards.__file__).parent / "app.py"), default_timeout=180)
    at.run()
    at.switch_page("views/protocol.py").run()
    assert not at.exception, [e.value for e in at.exception]
    assert f"Calibration of {TASK} (evidence)" in [m.value for m in at.subheader]
    assert any("does not separate" in e.value and "override" in e.value for e in at.error)
    tables = [t.value for t in at.table]
    values = next(t for t in tables if "limit" in t.columns and "honest runs" in t.columns)
    assert set(values["limit"]) >= {
        "likelihood_bound",
        "first_choice_bound",
        "fidelity_ceiling",
        "greedy_agreement_floor",
    }
    runs = next(t for t in tables if "run" in t.columns)
    assert runs.set_index("run").at["empty-probe-replies", "verdict"] == "NOT CAUGHT"
    assert any("operator-ci" in m.value for m in at.markdown)
    types = []

    def walk(node):
        types.append(getattr(node, "type", None))
        for child in getattr(node, "children", {}).values():
            walk(child)

    walk(at._tree)
    assert types.count("imgs") + types.count("image") >= 2, sorted(set(map(str, types)))  # the A/A and gates plots


def test_the_fit_statistics_and_choice_on_hand_made_rows():
    """cache_stats and choose on rows whose answers are worked out by hand."""
    from speculator_arena.calibration.fit import cache_stats, choose, loss

    rows = [  # session a: 100-token prompt, 20-token reply; its next turn finds 90 of its 120 history tokens
        {
            "session_id": "a",
            "turn": 0,
            "prompt_tokens": 100,
            "usage_prompt_tokens": 100,
            "cached_tokens": 0,
            "output_tokens": 20,
            "done": True,
        },
        {
            "session_id": "a",
            "turn": 1,
            "prompt_tokens": 150,
            "usage_prompt_tokens": 150,
            "cached_tokens": 90,
            "output_tokens": 10,
            "done": True,
        },
        {
            "session_id": "b",
            "turn": 0,
            "prompt_tokens": 50,
            "usage_prompt_tokens": 50,
            "cached_tokens": 50,
            "output_tokens": 5,
            "done": True,
        },
        {
            "session_id": "b",
            "turn": 1,
            "prompt_tokens": 70,
            "usage_prompt_tokens": 70,
            "cached_tokens": 0,
            "output_tokens": 5,
            "done": False,
        },  # not [DONE]: left out
    ]
    st = cache_stats(rows)
    assert st["cache_hit_tokens"] == pytest.approx(140 / 300)
    assert st["cache_hit_mean"] == pytest.approx((0 + 0.6 + 1.0) / 3)
    assert st["returning_cached_share"] == pytest.approx(90 / 120)
    targets = {"cache_hit_tokens": 0.5, "cache_hit_mean": 0.5, "returning_cached_share": 0.5}
    points = [
        {"m": 1, "c": 1.0, "achieved": {"cache_hit_tokens": 0.9, "cache_hit_mean": 0.9, "returning_cached_share": 0.9}},
        {
            "m": 2,
            "c": 0.5,
            "achieved": {"cache_hit_tokens": 0.45, "cache_hit_mean": 0.55, "returning_cached_share": 0.5},
        },
        {
            "m": 3,
            "c": 0.5,
            "achieved": {"cache_hit_tokens": 0.5, "cache_hit_mean": 0.5, "returning_cached_share": None},
        },
    ]
    best = choose(points, targets)
    assert (best["m"], best["c"]) == (2, 0.5)
    assert best["loss"] == pytest.approx(loss(points[1]["achieved"], targets)) == pytest.approx(0.02)


def test_the_attempt_walk_the_launcher_and_the_queue_share(tmp_path):
    """calibration/runs.py `next_attempts` (what the queue asks for) on stored rows of every
    status: a measured or failed attempt stands for its run, a void one makes the next attempt
    due, a queued one that never started is due itself (the runner takes its queued row), a
    running one is waited for, and a run whose every attempt ended void asks for nothing."""
    from synthetic import write_synthetic_evaluation

    from speculator_arena.calibration.runs import attempt_ids, next_attempts

    wh = Warehouse(tmp_path)
    p = plan("local-smollm2", None, None, 4, False, ())
    runs = p.runs[:5]
    base = {r.name: r.evaluation_id("local-smollm2", p.candidate_version) for r in runs}

    def stored(eid: str, status: str) -> None:
        write_synthetic_evaluation(wh, eid)
        (first,) = wh.read_table("evaluations", eid).to_pylist()
        wh.write_rows("evaluations", eid, [dict(first, status=status, updated_at=first["updated_at"] + 1)])

    stored(base[runs[0].name], "measured")  # done
    stored(base[runs[1].name], "void")  # its -r1 is next
    stored(base[runs[2].name], "queued")  # never started: due itself
    stored(base[runs[3].name], "running")  # waited for
    for eid in attempt_ids(base[runs[4].name], 2):
        stored(eid, "void")  # exhausted
    specs, pending = next_attempts(wh, p, None, 2, adopt={r.name: "x" for r in p.runs[5:]})
    assert [s.evaluation_id for s in specs] == [f"{base[runs[1].name]}-r1", base[runs[2].name]]
    assert pending
