"""The calibrations of the embedded tasks shipped with the code: the version whose `local-smollm2`
carries calibrated speed noise (v5, issue 21) and the one whose `local-smollm2-vllm` does (v7,
issue 22), each with its evidence beside it in the shipped versions, the values re-derived here
from the evidence's own run list by SCORING.md's rules (not by the calibration's code), and the
evidence on the board's Protocol page of a fresh ARENA_HOME."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_shipped_speed_noise import latest_speed_noise, speed_noise_evidence

from speculator_arena.calibration.plan import CONTROLS
from speculator_arena.calibration.publish import publication, task_calibrations
from speculator_arena.protocol import load_protocol

# task -> (references run, planted controls run): the development engine's task runs the attacks
# as controls; the vLLM task cannot (they are development-engine attacks: calibration/plan.py)
CALIBRATED = {"local-smollm2": (2, len(CONTROLS)), "local-smollm2-vllm": (1, 0)}
NOWHERE = Path("/nonexistent-arena-home")  # nothing published here: the package's own copies


@pytest.fixture(autouse=True)
def shipped_only(monkeypatch):
    """What ships, nothing a test or an operator staged beside it."""
    monkeypatch.delenv("ARENA_PROTOCOL_DIR", raising=False)


@pytest.fixture(params=sorted(CALIBRATED))
def shipped(shipped_only, request):
    """(task, the version that calibrated it last, its evidence, its plots: the package's own copy)."""
    task = request.param
    found = {ev["task_id"]: (v, ev, plots) for v, ev, plots in task_calibrations(load_protocol().version, NOWHERE)}
    assert task in found, f"no shipped version carries the evidence of a calibration of {task}"
    return (task, *found[task])


def test_the_calibration_in_force_ships_its_evidence(shipped):
    """The latest version carries the calibrated version's values of the task (a later version
    that adds a task changes nothing of this one), and the evidence is that version's."""
    task, v, evidence, plots = shipped
    latest = load_protocol()
    # a later speed-noise calibration (test_shipped_speed_noise.py) carries the speed values on,
    # and the bounds from the last one that re-derived them from its runs (v12: `limits` among its
    # changes; v13 re-derived the speed noise only)
    speed = latest_speed_noise(task)
    speed_from = speed["version"] if speed is not None and speed["version"] > v else v
    rebound = [e["version"] for e in speed_noise_evidence(task) if "limits" in e.get("scoring_changes", [])]
    limits_from = max([x for x in rebound if x > v], default=v)
    for k, at in (("limits", limits_from), ("speed_noise", speed_from), ("dev_test_gap", speed_from)):
        assert getattr(latest.tasks[task], k) == getattr(load_protocol(at).tasks[task], k), k
    assert evidence["task_id"] == task and evidence["candidate_version"] == v
    assert publication(v, home=NOWHERE)["published_by"]
    assert evidence["separates"] and not evidence["problems"]
    assert sorted(p.name for p in plots.iterdir() if p.suffix == ".png")  # the A/A and gate plots


def test_the_runs_are_four_aa_or_more_every_reference_and_every_control_caught(shipped):
    task, _, evidence, _ = shipped
    references, controls = CALIBRATED[task]
    roles = [r["role"] for r in evidence["runs"] if r["evaluation_id"]]
    assert roles.count("aa") >= 4 and roles.count("reference") == references and roles.count("control") == controls
    for r in evidence["verdicts"]:
        if r["role"] == "control":
            assert r["caught"], r["name"]
        else:
            assert r["passes_every_gate"] and r["status"] == "measured", r["name"]


def test_speed_noise_and_gap_follow_scoring_md_from_the_aa_scores(shipped):
    """Speed noise: mean and max |SpecScore - 1| over the A/A runs; the gap 5 x the max (SCORING.md)."""
    task, v, evidence, _ = shipped
    aa = [r["specscore"] for r in evidence["verdicts"] if r["role"] == "aa"]
    assert len(aa) >= 4 and sorted(aa) == pytest.approx(sorted(evidence["aa_specscores"]), abs=1e-9)
    errs = [abs(s - 1) for s in aa]
    noise = load_protocol(v).tasks[task].speed_noise
    assert noise.mean_abs_error == pytest.approx(sum(errs) / len(errs), abs=1e-4)
    assert noise.max_abs_error == pytest.approx(max(errs), abs=1e-4)
    assert load_protocol(v).task(task).dev_test_gap == pytest.approx(5 * max(errs), rel=0.05)


def test_the_calibrated_version_changes_only_the_calibrated_values(shipped):
    """Limits, speed noise and the dev/test gap; the workload is the base's (the A/A runs measured
    the noise under it, so the m/c fit was not adopted: docs/benchmarks/aa_noise.md)."""
    task, v, evidence, _ = shipped
    base, cal = load_protocol(evidence["base_version"]).model_dump(), load_protocol(v).model_dump()
    for d in (base, cal):
        for k in ("version", "published", "notes"):
            d.pop(k)
        for k in ("limits", "speed_noise", "dev_test_gap"):
            d["tasks"][task].pop(k)
    assert base == cal


def test_the_protocol_page_shows_the_shipped_evidence(tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest

    from speculator_arena import dashboards

    monkeypatch.setenv("ARENA_HOME", str(tmp_path / "home"))  # nothing published here: the package's copy
    at = AppTest.from_file(str(Path(dashboards.__file__).parent / "app.py"), default_timeout=180)
    at.run()
    at.switch_page("views/protocol.py").run()
    assert not at.exception, [e.value for e in at.exception]
    subheaders = [m.value for m in at.subheader]
    for task in CALIBRATED:  # the latest version shows each task's calibration in force
        assert f"Calibration of {task} (evidence)" in subheaders
    tables = [t.value for t in at.table]
    runs = [set(t["run"]) for t in tables if "run" in t.columns and "verdict" in t.columns]
    assert any(r >= {"aa-1", "aa-4", "dev-ngram-4", *CONTROLS} for r in runs)
    assert any(r >= {"aa-1", "aa-4", "vllm-ngram-4"} for r in runs)
