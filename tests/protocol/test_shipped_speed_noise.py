"""The speed-noise calibrations shipped with the code (issue 31): a version that re-derives a task's
speed noise and dev/test gap under a new pairing ships `vN.speed_noise.json` beside it
(benchmarks/aa_noise.py --check --stage-version). The values are re-derived here from that
evidence's SpecScores by SCORING.md's rules, not by the benchmark's code, and every held-out run
(made after the derivation's, not used in it) must lie within the derived max (from v13 at least
the derivation runs' 99% prediction bound: docs/scoring.md "Calibration")."""

from __future__ import annotations

import json
import math
from importlib import resources
from pathlib import Path

import pytest
from scipy.stats import t as student_t

from speculator_arena.protocol import load_protocol

SHIPPED = Path(str(resources.files("speculator_arena.protocol") / "versions"))
EVIDENCE = sorted(SHIPPED.glob("v*.speed_noise.json"), key=lambda p: int(p.name.split(".")[0][1:]))


@pytest.fixture(autouse=True)
def shipped_only(monkeypatch):
    monkeypatch.delenv("ARENA_PROTOCOL_DIR", raising=False)


def speed_noise_evidence(task_id: str) -> list[dict]:
    """The task's shipped speed-noise evidence, oldest version first."""
    return [e for e in (json.loads(p.read_text()) for p in EVIDENCE) if e["task_id"] == task_id]


def latest_speed_noise(task_id: str) -> dict | None:
    found = speed_noise_evidence(task_id)
    return found[-1] if found else None


@pytest.mark.parametrize("evidence_file", EVIDENCE, ids=[p.name for p in EVIDENCE])
def test_speed_noise_is_rederived_from_its_runs_and_holds_on_runs_it_was_not_derived_from(evidence_file):
    ev = json.loads(evidence_file.read_text())
    n = ev["derived_from"]
    derive, held = ev["specscores"][:n], ev["specscores"][n:]
    assert n >= 8 and len(held) >= 4, (n, len(held))
    errs = [abs(1 - s) for s in derive]
    worst = max(errs)
    if "max_rule" in ev:  # v13 on: at least the 99% prediction bound of one further run
        rms = math.sqrt(sum(e * e for e in errs) / n)
        worst = max(worst, round(float(student_t.ppf(0.995, n)) * rms * math.sqrt(1 + 1 / n), 4))
        assert ev["max_abs_error"] == pytest.approx(worst, abs=1e-4)
    noise = load_protocol(ev["version"]).tasks[ev["task_id"]].speed_noise
    assert noise.mean_abs_error == pytest.approx(sum(errs) / len(errs), abs=1e-4)
    assert noise.max_abs_error == pytest.approx(worst, abs=1e-4)
    assert load_protocol(ev["version"]).task(ev["task_id"]).dev_test_gap == pytest.approx(5 * worst, abs=1e-3)
    for s in held:
        assert abs(1 - s) <= worst, (s, worst)
    assert len(ev["evaluations"]) == len(ev["specscores"])
    # runs made after the derivation's (v11: on another day, before the correction scored them)
    fresh = ev.get("fresh_runs", {"evaluations": [], "specscores": []})
    assert len(fresh["evaluations"]) == len(fresh["specscores"])
    for s in fresh["specscores"]:
        assert abs(1 - s) <= worst, (s, worst)


@pytest.mark.parametrize("evidence_file", EVIDENCE, ids=[p.name for p in EVIDENCE])
def test_a_speed_noise_version_changes_only_the_speed_noise_and_gap(evidence_file):
    """...and the task's values its evidence names as changed with them (`scoring_changes`: v11's
    steal correction, under which its noise was derived), each of which must really differ."""
    ev = json.loads(evidence_file.read_text())
    base, new = load_protocol(ev["base_version"]).model_dump(), load_protocol(ev["version"]).model_dump()
    changed = ev.get("scoring_changes", [])
    for k in changed:
        assert base["tasks"][ev["task_id"]][k] != new["tasks"][ev["task_id"]][k], k
    for d in (base, new):
        d.pop("version"), d.pop("published"), d.pop("notes")
        for k in ("speed_noise", "dev_test_gap", *changed):
            d["tasks"][ev["task_id"]].pop(k)
    assert base == new


def test_the_latest_version_carries_the_latest_speed_noise():
    for task_id in load_protocol().tasks:
        ev = latest_speed_noise(task_id)
        if ev is None:
            continue
        latest, calibrated = load_protocol().tasks[task_id], load_protocol(ev["version"]).tasks[task_id]
        assert latest.speed_noise == calibrated.speed_noise
        assert latest.dev_test_gap == calibrated.dev_test_gap


REBOUND = [p for p in EVIDENCE if "bounds" in json.loads(p.read_text())]


@pytest.mark.parametrize("evidence_file", REBOUND, ids=[p.name for p in REBOUND])
def test_rederived_bounds_follow_the_rule_from_the_runs_own_gate_rows(evidence_file):
    """v12 re-derives the likelihood and first-choice bounds from its A/A
    runs: the smallest multiple of 0.005 beyond which no run's interval lies and which no run's
    standard error of D exceeds, plus 0.005 (docs/scoring.md), counted up here from the evidence."""
    ev = json.loads(evidence_file.read_text())
    limits = load_protocol(ev["version"]).tasks[ev["task_id"]].limits
    assert "limits" in ev["scoring_changes"]
    for key, b in ev["bounds"].items():
        n = len(b["se"])
        assert n == ev["derived_from"] and len(b["ci_low"]) == len(b["ci_high"]) == n
        k = 0
        while any(
            lo > k * 0.005 or hi < -k * 0.005 or se > k * 0.005
            for lo, hi, se in zip(b["ci_low"], b["ci_high"], b["se"])
        ):
            k += 1
        assert getattr(limits, key) == b["bound"] == pytest.approx((k + 1) * 0.005), key
        assert getattr(limits, key) > max(b["se"]) > 0  # wider than one standard error of D


@pytest.mark.parametrize("evidence_file", REBOUND, ids=[p.name for p in REBOUND])
def test_rederived_bounds_still_catch_every_control_and_pass_every_honest_run_of_the_calibration(evidence_file):
    """The calibration in force (its evidence ships with the version that made it) ran the planted
    controls: under the new bounds each control still fails a gate, judged from its stored
    intervals by the rule of SCORING.md (entirely beyond +-b), and each honest run still passes."""
    from speculator_arena.calibration.publish import task_calibrations

    ev = json.loads(evidence_file.read_text())
    limits = load_protocol(ev["version"]).tasks[ev["task_id"]].limits
    found = [
        c
        for v, c, _ in task_calibrations(ev["version"], Path("/nonexistent-arena-home"))
        if c["task_id"] == ev["task_id"]
    ]
    assert found, f"no calibration of {ev['task_id']} ships its evidence"
    cal = found[0]
    gates = {"sampled_likelihood": limits.likelihood_bound, "first_choice": limits.first_choice_bound}
    # the other gates' verdicts as the calibration judged them (under its own limits, which the
    # new version keeps); the bound gates' re-judged from the stored intervals
    failed = {
        r["name"]: {g for g, v in r["verdicts"].items() if v == "fail" and g not in gates} for r in cal["verdicts"]
    }
    for r in cal["gate_rows"]:
        if r["gate"] in gates and r["ci_low"] is not None:
            b = gates[r["gate"]]
            if r["ci_low"] > b or r["ci_high"] < -b:
                failed[r["name"]].add(r["gate"])
    roles = {r["name"]: r["role"] for r in cal["verdicts"]}
    controls = [n for n, role in roles.items() if role == "control"]
    assert controls
    for name, role in roles.items():
        if role == "control":
            assert failed.get(name), f"{name} is no longer caught under {gates}"
        else:
            assert not failed.get(name), (name, failed.get(name))


@pytest.mark.parametrize("evidence_file", REBOUND, ids=[p.name for p in REBOUND])
def test_rederived_bounds_hold_on_the_fresh_runs(evidence_file):
    """Runs not used to derive the bounds (made after them) have standard errors of D within them,
    so an honest run of the same probes fails either check by chance at most 2 x Phi(-2.96)."""
    ev = json.loads(evidence_file.read_text())
    for key, b in ev["bounds"].items():
        fresh = b.get("fresh_runs_se", [])
        assert len(fresh) == len(ev.get("fresh_runs", {}).get("specscores", [])), key
        assert all(0 < se <= b["bound"] for se in fresh), (key, fresh, b["bound"])
