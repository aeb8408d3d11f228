"""The speed-noise calibrations shipped with the code (issue 31): a version that re-derives a task's
speed noise and dev/test gap under a new pairing ships `vN.speed_noise.json` beside it
(benchmarks/aa_noise.py --check --stage-version). The values are re-derived here from that
evidence's SpecScores by SCORING.md's rules, not by the benchmark's code, and every held-out run
(made after the derivation's, not used in it) must lie within the derived max."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest

from speculator_arena.protocol import load_protocol

SHIPPED = Path(str(resources.files("speculator_arena.protocol") / "versions"))
EVIDENCE = sorted(SHIPPED.glob("v*.speed_noise.json"), key=lambda p: int(p.name.split(".")[0][1:]))


@pytest.fixture(autouse=True)
def shipped_only(monkeypatch):
    monkeypatch.delenv("ARENA_PROTOCOL_DIR", raising=False)


def latest_speed_noise(task_id: str) -> dict | None:
    found = [json.loads(p.read_text()) for p in EVIDENCE]
    found = [e for e in found if e["task_id"] == task_id]
    return found[-1] if found else None


@pytest.mark.parametrize("evidence_file", EVIDENCE, ids=[p.name for p in EVIDENCE])
def test_speed_noise_is_rederived_from_its_runs_and_holds_on_runs_it_was_not_derived_from(evidence_file):
    ev = json.loads(evidence_file.read_text())
    n = ev["derived_from"]
    derive, held = ev["specscores"][:n], ev["specscores"][n:]
    assert n >= 8 and len(held) >= 4, (n, len(held))
    errs = [abs(1 - s) for s in derive]
    noise = load_protocol(ev["version"]).tasks[ev["task_id"]].speed_noise
    assert noise.mean_abs_error == pytest.approx(sum(errs) / len(errs), abs=1e-4)
    assert noise.max_abs_error == pytest.approx(max(errs), abs=1e-4)
    assert load_protocol(ev["version"]).task(ev["task_id"]).dev_test_gap == pytest.approx(5 * max(errs), abs=1e-3)
    for s in held:
        assert abs(1 - s) <= max(errs), (s, max(errs))
    assert len(ev["evaluations"]) == len(ev["specscores"])
    # runs made after the derivation's (v11: on another day, before the correction scored them)
    fresh = ev.get("fresh_runs", {"evaluations": [], "specscores": []})
    assert len(fresh["evaluations"]) == len(fresh["specscores"])
    for s in fresh["specscores"]:
        assert abs(1 - s) <= max(errs), (s, max(errs))


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
