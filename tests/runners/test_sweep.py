"""`arena sweep` (dagster_project/sweep.py, runners/sweep_plan.py, board/sweep.py, the Sweep page).

The substitution of the swept setting into a copy of launch.sh is checked on text (no
evaluation). The sweep itself is run as an operator runs it, a real `arena sweep` process over
DEV_ENGINE_SPEC_K of engines/dev-ngram (VALUES) under a tiny staged protocol (one short pass per
workload, a handful of probes): stopped with SIGTERM once the first half of the values is stored
and the next is running, then run again with the same sweep id. The finished points are kept, the
stopped one stays stored void and a fresh attempt replaces it, and the export and the pages show
every value measured, read back from the warehouse. One sweep (a module fixture) serves the checks.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ci_profile import full_profile  # tests/runners is on sys.path (conftest)

from speculator_arena.runners.sweep_plan import SweepError, evaluation_id, substitute

REPO = Path(__file__).resolve().parents[2]
DEV_NGRAM = REPO / "engines" / "dev-ngram"
TASK = "local-smollm2"
SETTING = "DEV_ENGINE_SPEC_K"
# CI sweeps two values (three evaluations: one kept, one stopped, one made again); a full run
# (ARENA_TEST_PROFILE=full) the four of docs/participants/sweeps.md's example (five evaluations)
VALUES = ["1", "2", "4", "8"] if full_profile() else ["1", "4"]
SHELL = "#!/usr/bin/env bash\nexport DEV_ENGINE_SPEC=ngram DEV_ENGINE_SPEC_K=4 DEV_ENGINE_NGRAM_MAX=4\nexec x\n"
JSON = """exec vllm --speculative-config '{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4}'\n"""


def test_the_shell_form_replaces_the_one_assignment_and_nothing_like_it():
    out = substitute(SHELL, SETTING, "8")
    assert "DEV_ENGINE_SPEC_K=8 " in out and "DEV_ENGINE_SPEC=ngram" in out
    assert substitute(SHELL, "DEV_ENGINE_SPEC", "suffix").count("DEV_ENGINE_SPEC_K=4") == 1


def test_the_json_form_keeps_numbers_bare_and_strings_quoted():
    assert '"num_speculative_tokens": 2,' in substitute(JSON, "num_speculative_tokens", "2")
    assert '"method": "suffix",' in substitute(JSON, "method", "suffix")


@pytest.mark.parametrize(
    "text, name, value, words",
    [
        (SHELL, "DEV_ENGINE_MISSING", "1", "does not occur"),
        (SHELL + "DEV_ENGINE_SPEC_K=2\n", SETTING, "1", "occurs 2 times"),
        (SHELL + JSON.replace("num_speculative_tokens", SETTING), SETTING, "1", "occurs 2 times"),
        (SHELL, SETTING, "4; rm -rf /", "plain numbers or identifiers"),
        (SHELL, "not a name", "1", "not a variable"),
    ],
)
def test_a_setting_absent_twice_or_a_value_not_plain_is_refused(text, name, value, words):
    with pytest.raises(SweepError, match=words):
        substitute(text, name, value)


def test_a_refused_sweep_stores_nothing(tmp_path):
    """Refusals come before anything is written: a test split, a setting launch.sh lacks."""
    from speculator_arena.dagster_project.sweep import run_sweep

    for kw, words in (
        (dict(split="test", setting=SETTING), "dev split only"),
        (dict(setting="DEV_ENGINE_NOWHERE"), "does not occur"),
    ):
        with pytest.raises(SweepError, match=words):
            run_sweep(task_id=TASK, engine=str(DEV_NGRAM), values=VALUES, home=tmp_path, sweep_id="s", **kw)
    assert list(tmp_path.iterdir()) == []


def _statuses(home: Path, ids: list[str]) -> dict[str, str | None]:
    from speculator_arena.warehouse import Warehouse
    from speculator_arena.warehouse.evaluations import current_row

    wh = Warehouse(home)
    return {i: (current_row(wh, i) or {}).get("status") for i in ids}


@pytest.fixture(scope="module")
def stopped_and_finished(built_home, tmp_path_factory):
    """The sweep, stopped with SIGTERM once the first half of its values is stored and the next one
    runs, then the same command again; returns what both runs left (the warehouse is the record)."""
    from ci_profile import ENGINE_THREADS, stage_tiny_protocol

    root = tmp_path_factory.mktemp("sweep")
    home = root / "arena_home"
    shutil.copytree(built_home["home"] / "pools", home / "pools", symlinks=True)  # the served pool links its build
    # one short pass per workload (two seconds: with one, a workload's pass may propose no draft,
    # which blanks acceptance by position), no warm-up, the fewest probes that leave every gate
    # measured: what is under test is the sweep (ids, resumption, the read model), not the gates
    stage_tiny_protocol(root / "protocol", seconds=(2, 2, 2))
    env = dict(os.environ, ARENA_HOME=str(home), ARENA_PROTOCOL_DIR=str(root / "protocol"))
    env["OMP_NUM_THREADS"] = ENGINE_THREADS
    cmd = [sys.executable, "-m", "speculator_arena.cli", "sweep", "--task", TASK, "--engine", str(DEV_NGRAM)]
    cmd += ["--setting", SETTING, "--values", ",".join(VALUES), "--sweep-id", "k", "--label", "ngram"]
    cmd += ["--target", str(built_home["target"])]
    first = [evaluation_id("k", SETTING, v) for v in VALUES]
    kept = len(VALUES) // 2  # measured before the stop; the next value is the one stopped

    t0 = time.time()
    err = root / "first.err"
    with err.open("w") as log:
        run = subprocess.Popen(cmd, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=log, text=True)
        deadline = time.time() + 600
        while True:  # SIGTERM, as an operator's Ctrl-C, once `kept` points are stored and the next runs
            s = _statuses(home, first[: kept + 1])
            if all(s[i] == "measured" for i in first[:kept]) and s[first[kept]] == "running":
                break
            assert run.poll() is None and time.time() < deadline, (s, err.read_text()[-3000:])
            time.sleep(0.5)
        run.send_signal(signal.SIGTERM)
        stopped_rc = run.wait(timeout=180)
    stopped = _statuses(home, first)
    again = subprocess.run(cmd, env=env, cwd=REPO, capture_output=True, text=True, timeout=900)
    return {
        "home": home,
        "env": env,
        "cmd": cmd,
        "first": first,
        "kept": kept,
        "stopped_rc": stopped_rc,
        "first_err": err.read_text(),
        "stopped": stopped,
        "again": again,
        "seconds": time.time() - t0,
    }


@pytest.fixture(scope="module")
def sweep_doc(stopped_and_finished) -> dict:
    again = stopped_and_finished["again"]
    assert again.returncode == 0, again.stderr[-3000:]
    return json.loads(again.stdout)


@pytest.fixture(scope="module")
def points(sweep_doc) -> dict[str, dict]:
    """The sweep's points by value."""
    return {p["value"]: p for p in sweep_doc["points"]}


@pytest.mark.engines
def test_a_stopped_sweep_keeps_its_points_and_the_stopped_one_is_void(stopped_and_finished):
    r = stopped_and_finished
    first, kept = r["first"], r["kept"]
    assert r["stopped_rc"] == 128 + signal.SIGTERM, r["first_err"][-3000:]
    assert r["stopped"] == dict(
        zip(first, ["measured"] * kept + ["void"] + [None] * (len(first) - kept - 1), strict=True)
    )
    print(f"sweep of {len(VALUES)} values, stopped and finished: {r['seconds']:.0f} s")


@pytest.mark.engines
def test_the_same_command_again_makes_only_what_is_missing(stopped_and_finished, points):
    r = stopped_and_finished
    first, kept = r["first"], r["kept"]
    assert r["again"].stderr.count("already measured") == kept, r["again"].stderr[-3000:]
    replaced = evaluation_id("k", SETTING, VALUES[kept], 2)
    assert [points[v]["evaluation_id"] for v in VALUES] == [*first[:kept], replaced, *first[kept + 1 :]]
    assert points[VALUES[kept]]["attempts"] == [first[kept], replaced]
    stored = _statuses(r["home"], [*first, replaced])
    assert sorted(stored.values()) == ["measured"] * len(VALUES) + ["void"], stored


@pytest.mark.engines
def test_each_point_reads_back_its_score_acceptance_and_memory(points):
    for v in VALUES:
        p = points[v]
        assert p["status"] == "measured" and p["specscore"] is not None, p
        assert p["interval_low"] <= p["specscore"] <= p["interval_high"], p
        assert len(p["acceptance_by_position"]) == int(v), p  # one rate per draft position
        assert p["memory_peak_bytes"] is None and p["memory_peak_reason"], p  # CPU: no NVML, the reason shown
    lengths = [points[v]["mean_acceptance_length"] for v in VALUES]
    assert 1.0 <= lengths[0] <= 2.0 and lengths[-1] > lengths[0], lengths  # one draft token: at most 2


@pytest.mark.engines
def test_the_export_is_the_sweeps_document(stopped_and_finished, sweep_doc, tmp_path):
    r = stopped_and_finished
    out = tmp_path / "export"
    exported = subprocess.run(
        [*r["cmd"][:3], "sweep", "export", "--sweep-id", "k", "--out", str(out)],
        env=r["env"],
        cwd=REPO,
        capture_output=True,
    )
    assert exported.returncode == 0, exported.stderr[-2000:]
    import pyarrow.parquet as pq

    table = pq.read_table(out / "k.parquet").to_pylist()
    assert [r["value"] for r in table] == VALUES
    assert [len(r["acceptance_by_position"]) for r in table] == [int(v) for v in VALUES]
    assert json.loads((out / "k.json").read_text())["points"] == sweep_doc["points"]


@pytest.mark.engines
def test_the_sweep_page_and_each_points_page_show_the_curve(stopped_and_finished, points, monkeypatch):
    r = stopped_and_finished
    for k in ("ARENA_HOME", "ARENA_PROTOCOL_DIR"):
        monkeypatch.setenv(k, r["env"][k])
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(REPO / "speculator_arena" / "dashboards" / "app.py"), default_timeout=180)
    at.query_params.update({"task": TASK, "split": "dev", "sweep": "k"})
    at.run()
    at.switch_page("views/sweep.py").run()
    assert not at.exception, [e.value for e in at.exception]
    shown = at.table[0].value
    assert list(shown[SETTING]) == VALUES and list(shown["evaluation"]) == [points[v]["evaluation_id"] for v in VALUES]
    at.query_params.update({"evaluation": r["first"][0]})  # a point's own page carries the sweep's curve
    at.switch_page("views/evaluation.py").run()
    assert not at.exception, [e.value for e in at.exception]
    assert f"Sweep k: {SETTING}" in [s.value for s in at.subheader]
    assert any(f"`{SETTING}` = {VALUES[0]} of a sweep" in c.value for c in at.caption)
    from browser_pages import page_shows

    from speculator_arena.dashboards import formatting as fmt

    page_shows(  # the same page, served and loaded in headless Chromium
        r["home"],
        f"/sweep?task={TASK}&split=dev&sweep=k",
        ["SpecScore and mean acceptance length", "Acceptance by draft position"]
        + [points[v]["evaluation_id"] for v in VALUES]
        + [fmt.score(points[v]["specscore"]) for v in VALUES],
        "sweep",
    )
