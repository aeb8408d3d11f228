"""One door for every evaluation (issue 19; dagster_project/launch.evaluate): a calibration's run is an
`evaluation` partition of the Dagster instance like any other, and `arena demo` re-runs an
evaluation the host's other work voided, then says what was busy and exits non-zero (issue 21).

The engines are the stdlib stand-in (tests/runners/sse_engine.py) under the stand-in's short
profile, staged as the local task's references, so each evaluation takes seconds; the pools are
the session's real build (`built_home`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import dagster as dg
import pytest
import yaml
from ci_profile import stage_ci_protocol
from stand_in import FAST, make_engine

from speculator_arena.assets.calibration import CALIBRATION_TAG
from speculator_arena.protocol import load_protocol
from speculator_arena.rules.accounts import CALIBRATION_ACCOUNT
from speculator_arena.warehouse import Warehouse
from speculator_arena.warehouse.evaluations import current_row, statuses

TASK = "local-smollm2"


def _stage(root, engines) -> int:
    """The stand-in's short profile with the local task's references served by stand-in engine
    directories, and the shipped foreign-CPU limit whatever a developer's machine allows."""
    refs = [
        {"name": "dev-stock", "kind": "none", "engine": str(engines / "stock")},
        {"name": "dev-ngram-4", "kind": "ngram", "engine": str(engines / "ngram")},
    ]
    version = stage_ci_protocol(root, **FAST, references=refs)
    path = root / f"v{version}.yaml"
    doc = yaml.safe_load(path.read_text())
    doc["contention"]["max_foreign_cpu_share"] = 0.25
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return version


@pytest.fixture(scope="module")
def staged(built_home, tmp_path_factory):
    root = tmp_path_factory.mktemp("door")
    for name in ("stock", "ngram"):
        make_engine(root / "engines", name)
    _stage(root / "protocol", root / "engines")
    return {"root": root, "protocol": root / "protocol"}


def _home(built_home, dest):
    """A fresh ARENA_HOME with the session's pools (the served pool is a link into its builds)."""
    dest.mkdir(parents=True)
    shutil.copytree(built_home["home"] / "pools", dest / "pools", symlinks=True)
    return dest


def _calibration_home(built_home, staged, tmp_path, monkeypatch, stored: slice):
    """A fresh home under the staged profile, the calibration plan of its version (4 A/A runs,
    no controls) and the planned runs `stored` already as synthetic evaluations, adopted:
    (home, warehouse, plan, base version, adopt)."""
    from synthetic import write_synthetic_evaluation

    from speculator_arena.calibration.plan import plan

    home = _home(built_home, tmp_path / "arena_home")
    monkeypatch.setenv("ARENA_PROTOCOL_DIR", str(staged["protocol"]))
    monkeypatch.setenv("ARENA_HOME", str(home))
    base = load_protocol().version
    p = plan(TASK, base, None, 4, False, ())
    wh = Warehouse(home)
    adopt = {}
    for r in p.runs[stored]:
        adopt[r.name] = f"stored-{r.name}"
        write_synthetic_evaluation(wh, adopt[r.name], task_id=TASK, account_id=CALIBRATION_ACCOUNT, label=r.name)
    return home, wh, p, base, adopt


def _calibration_asset(asset, instance, home, config):
    """Materialize one calibration asset of the task with the calibration's config (as `arena
    calibrate` does after its evaluations)."""
    from speculator_arena.dagster_project import launch

    name = asset.key.path[-1]
    return launch.materialize(
        [asset],
        partition_key=TASK,
        instance=instance,
        run_config={"ops": {name: {"config": config}}, **launch.quiet()},
        resources=launch.default_resources(home),
    )


def test_a_calibration_run_is_an_evaluation_partition(built_home, staged, tmp_path, monkeypatch):
    """A calibration launches each planned run through the one door: the run lands as a
    materialized `evaluation` partition (with its checks), under the calibration's account, tagged
    with the device; the `calibration_runs` asset then records it without running anything."""

    from speculator_arena.dagster_project import launch

    home, wh, p, base, adopt = _calibration_home(built_home, staged, tmp_path, monkeypatch, stored=slice(1, None))
    run = p.runs[0]  # every other run stored already (synthetic): only the first is launched
    config = {
        "candidate_version": p.candidate_version,
        "base_version": base,
        "aa_runs": 4,
        "controls": "no",
        "fit": False,
        "target": str(built_home["target"]),
        "adopt": adopt,
    }
    from speculator_arena.assets.calibration import calibration_runs
    from speculator_arena.frontdoor.queue import device_name
    from speculator_arena.rules.devices import DEVICE_TAG

    ids = launch.calibration_evaluations(TASK, config, home)
    planned = run.evaluation_id(TASK, p.candidate_version)
    instance = launch.dagster_instance(home)
    assert planned in instance.get_dynamic_partitions("evaluations")
    event = instance.get_latest_materialization_event(dg.AssetKey("evaluation"))
    eid = event.dagster_event.partition  # the planned id, or its re-run (-r1, -r2) when a contended machine voided it
    assert eid in (planned, f"{planned}-r1", f"{planned}-r2")
    # the run carries the device tag the queue's one-run-per-device check reads, and the task calibrated
    tags = instance.get_run_by_id(event.run_id).tags
    assert tags[DEVICE_TAG] == device_name() and tags[CALIBRATION_TAG] == TASK
    # the asset records what is stored; it launches nothing (no new evaluation run)
    runs_before = len(instance.get_runs())
    result = _calibration_asset(calibration_runs, instance, home, config)
    assert len(instance.get_runs()) == runs_before + 1
    (recorded,) = result.asset_materializations_for_node("calibration_runs")
    assert f"| {run.name} | {ids[run.name] or '(none measured)'} |" in recorded.metadata["runs"].value
    # and the run was measured (a contended host voids every attempt: then the lines above still hold)
    assert ids[run.name] == eid and recorded.metadata["measured"].value == len(p.runs)
    meta = event.asset_materialization.metadata
    assert meta["status"].value == "measured" and meta["summary"].value["evaluation_id"] == eid
    row = current_row(wh, eid)
    assert row["account_id"] == CALIBRATION_ACCOUNT and row["status"] == "measured"
    for check in ("raw_rows_complete", "gate_inputs_present"):  # the partition's checks ran, and passed
        (record,) = instance.event_log_storage.get_asset_check_execution_history(
            dg.AssetCheckKey(dg.AssetKey("evaluation"), check), limit=1
        )
        assert record.run_id == event.run_id and record.status.value == "SUCCEEDED", (check, record)
    # the analysts' database is downstream of the evaluation: materialized after it
    analysts = instance.get_latest_materialization_event(dg.AssetKey("analysts_db"))
    assert analysts is not None and analysts.timestamp >= event.timestamp


def test_the_demo_reruns_a_contended_evaluation_then_says_what_was_busy(built_home, staged, tmp_path):
    home = _home(built_home, tmp_path / "arena_home")
    env = {k: v for k, v in os.environ.items() if k not in ("ARENA_TEST_MAX_FOREIGN_CPU_SHARE", "DAGSTER_HOME")}
    env.update(ARENA_HOME=str(home), ARENA_PROTOCOL_DIR=str(staged["protocol"]))
    cmd = [sys.executable, "-m", "speculator_arena.cli", "demo", "--home", str(home), "--only", "dev-ngram-4"]
    # on a quiet machine it is measured, and the demo exits 0
    quiet = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert quiet.returncode == 0, quiet.stderr[-3000:]
    assert "dev-ngram-4: SpecScore" in quiet.stderr and "NOT MEASURED" not in quiet.stderr
    before = set(statuses(Warehouse(home)))
    # beside a process that keeps a core busy, every attempt is void: three in all, then one line
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.5)
        busy = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    finally:
        hog.kill()
        hog.wait()
    assert busy.returncode == 1, busy.stderr[-3000:]
    made = {e: s for e, s in statuses(Warehouse(home)).items() if e not in before}
    assert len(made) == 3 and set(made.values()) == {"void"}, made
    lines = [ln for ln in busy.stderr.splitlines() if ln.startswith("[demo] dev-ngram-4: NOT MEASURED")]
    assert len(lines) == 1, busy.stderr[-3000:]
    line = lines[0]
    assert "host contended" in line and "attempt 3 of 3" in line
    assert f"(pid {hog.pid})" in line, line  # what was busy: the hog, named
    assert "stop it" in busy.stderr and "run `arena demo` again" in busy.stderr
    # the void attempts are stored as such (refunded), each with its reason
    for e in made:
        assert current_row(Warehouse(home), e)["void_reason"].startswith("host contended")
    # every run the demo made is tagged with the device, as the queue's own runs are (issue 34):
    # the queue's one-run-per-device check sees an `arena demo` or `arena evaluate` in flight
    from speculator_arena.dagster_project.launch import dagster_instance
    from speculator_arena.rules.devices import DEVICE_TAG

    stored = set(statuses(Warehouse(home)))
    runs = [r for r in dagster_instance(home).get_runs() if r.tags.get("dagster/partition") in stored]
    assert len(runs) == len(stored) == 4 and {r.tags.get(DEVICE_TAG) for r in runs} == {"local"}, [r.tags for r in runs]
    # and the demo's output is the arena's own progress only: no Dagster event lines
    noise = [ln for ln in busy.stderr.splitlines() if " - dagster - " in ln or "DEBUG" in ln]
    assert noise == [], noise[:5]


def test_the_m_c_fit_runs_through_the_door_and_its_asset_serves_nothing(built_home, staged, tmp_path, monkeypatch):
    """The m/c fit's short stock passes are an evaluation like any other (issue 34): the launcher
    runs them through the one door (an `evaluation` partition, tagged with the device and the
    task calibrated) as a spec with a fit plan, which the runner serves (runners/fit_passes.py);
    the `calibration_fit` asset then chooses m and c from the stored rows and launches nothing. A
    second launch finds every point stored and runs nothing; a larger grid runs only its missing
    points, as a second fit evaluation, and the choice reads both."""

    from speculator_arena.assets.calibration import calibration_fit
    from speculator_arena.calibration.candidate import candidate_dir
    from speculator_arena.dagster_project import launch
    from speculator_arena.frontdoor.queue import device_name
    from speculator_arena.rules.devices import DEVICE_TAG
    from speculator_arena.runners.fit_passes import FIT_VOID_REASON

    # every planned run stored already: only the fit is launched
    home, wh, p, base, adopt = _calibration_home(built_home, staged, tmp_path, monkeypatch, stored=slice(None))
    config = {
        "candidate_version": p.candidate_version,
        "base_version": base,
        "aa_runs": 4,
        "controls": "no",
        "fit": True,
        "fit_grid": "small",
        "fit_pass_seconds": 1.0,
        "target": str(built_home["target"]),
        "adopt": adopt,
    }
    launch.calibration_evaluations(TASK, config, home)
    fit_id = f"cal-{TASK}-v{p.candidate_version}-fit"
    instance = launch.dagster_instance(home)
    event = instance.get_latest_materialization_event(dg.AssetKey("evaluation"))
    assert event.dagster_event.partition == fit_id
    tags = instance.get_run_by_id(event.run_id).tags
    assert tags[DEVICE_TAG] == device_name() and tags[CALIBRATION_TAG] == TASK
    row = current_row(wh, fit_id)
    assert row["status"] == "void" and row["void_reason"] == FIT_VOID_REASON
    assert row["account_id"] == CALIBRATION_ACCOUNT and not row["is_reference"]
    requests = wh.read_table("requests", fit_id).to_pandas()
    assert set(requests["pass_id"]) == {"fit-m1-c0.5", "fit-m1-c2", "fit-m2-c0.5", "fit-m2-c2"}
    assert set(requests["engine"]) == {"stock"} and set(requests["workload"]) == {"busy"}
    assert requests["done"].astype(bool).any()
    assert [s["engine"] for s in wh.read_table("engine_starts", fit_id).to_pylist()] == ["stock"]  # one start
    # the asset reads what is stored: no evaluation runs, the choice is one of the grid's points
    runs_before = len(instance.get_runs())
    result = _calibration_asset(calibration_fit, instance, home, config)
    assert result.success and len(instance.get_runs()) == runs_before + 1
    fit = json.loads((candidate_dir(home, TASK, p.candidate_version) / "fit.json").read_text())
    assert (fit["m"], fit["c"]) in {(1, 0.5), (1, 2.0), (2, 0.5), (2, 2.0)}
    assert fit["evaluation_ids"] == [fit_id] and len(fit["grid"]) == 4
    # every point stored: a second launch runs nothing
    launch.calibration_evaluations(TASK, config, home)
    assert len(instance.get_runs()) == runs_before + 1
    assert current_row(wh, f"{fit_id}-2") is None
    # the full grid over the small one's rows: a second fit evaluation serves only the 16 missing points
    config["fit_grid"] = "full"
    launch.calibration_evaluations(TASK, config, home)
    more = wh.read_table("requests", f"{fit_id}-2").to_pandas()
    assert len(set(more["pass_id"])) == 16 and not set(more["pass_id"]) & set(requests["pass_id"])
    assert current_row(wh, f"{fit_id}-2")["void_reason"] == FIT_VOID_REASON
    _calibration_asset(calibration_fit, instance, home, config)
    fit = json.loads((candidate_dir(home, TASK, p.candidate_version) / "fit.json").read_text())
    assert fit["evaluation_ids"] == [fit_id, f"{fit_id}-2"] and len(fit["grid"]) == 20


def test_a_queued_calibration_runs_its_evaluations_one_per_tick_then_its_assets(
    built_home, staged, tmp_path, monkeypatch
):
    """`arena calibrate --queue` (issue 34): the calibration's evaluations are started by the
    `calibration_queue` sensor as the submissions' are, one per free device and tick, each an
    `evaluation` run tagged with its device and the task; the planned run first, then the m/c
    fit; once every one is stored, one run of the calibration's assets writes the candidate, and
    the queue is empty again."""
    from speculator_arena.assets.calibration import CALIBRATION_RUN_TAG
    from speculator_arena.calibration.candidate import candidate_dir
    from speculator_arena.calibration.queued import waiting
    from speculator_arena.cli import main
    from speculator_arena.dagster_project import launch
    from speculator_arena.frontdoor.queue import device_name
    from speculator_arena.rules.devices import DEVICE_TAG

    home, wh, p, base, adopt = _calibration_home(built_home, staged, tmp_path, monkeypatch, stored=slice(1, None))
    args = ["calibrate", "--task", TASK, "--base", str(base), "--controls", "no", "--fit-grid", "small"]
    args += ["--fit-seconds", "1", "--target", str(built_home["target"]), "--queue"]
    assert main(args + [a for k, v in adopt.items() for a in ("--adopt", f"{k}={v}")]) == 0
    assert [task for task, _ in waiting(home)] == [TASK]
    assert current_row(wh, p.runs[0].evaluation_id(TASK, p.candidate_version)) is None  # queued, not run
    ticks, lines = [], []
    for _ in range(8):
        ran = launch.work_queue_once(home, say=lines.append)
        ticks.append(ran)
        if not ran:
            break
    planned = p.runs[0].evaluation_id(TASK, p.candidate_version)
    fit_id = f"cal-{TASK}-v{p.candidate_version}-fit"
    flat = [x for t in ticks for x in t]
    assert all(len(t) == 1 for t in ticks[:-1]) and ticks[-1] == [], ticks  # one device: one run per tick
    assert flat[-1] == f"calibrate {TASK}" and flat.count(fit_id) == 1, ticks
    attempts = flat[: flat.index(fit_id)]
    assert attempts and attempts[0] == planned and set(attempts) <= {planned, f"{planned}-r1", f"{planned}-r2"}
    instance = launch.dagster_instance(home)
    for eid in [*attempts, fit_id]:
        (run,) = instance.get_runs(filters=dg.RunsFilter(tags={CALIBRATION_RUN_TAG: eid}))
        assert run.tags[DEVICE_TAG] == device_name() and run.tags[CALIBRATION_TAG] == TASK
        assert run.status == dg.DagsterRunStatus.SUCCESS
    d = candidate_dir(home, TASK, p.candidate_version)
    assert (d / "evidence.json").exists() and (d / "candidate.yaml").exists()
    assert json.loads((d / "fit.json").read_text())["evaluation_ids"] == [fit_id]
    assert waiting(home) == [] and any(f"queue: calibrating {TASK}" in line for line in lines), lines
