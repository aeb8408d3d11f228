"""SIGTERM or SIGINT to a command that runs evaluations stops the whole command: the evaluation in
progress is recorded void with the signal's name, its engines (and what they detached) are
stopped, and the command exits non-zero (128 + the signal); a second signal during the stop
changes none of that. Real processes: `arena evaluate` through the one door (Dagster, the
harness) with the stdlib stand-in engines, whose candidate plants a detached spinning child.

The runner here runs engines as its own user (ARENA_NO_PRIVILEGE_DROP, what a laptop does), the
path where only the engine's reaper can find what left its group; the evaluation's page says the
engines were not isolated."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from stand_in import FAST

from speculator_arena.runners import reaper
from speculator_arena.runners.lifecycle import user_name
from speculator_arena.runners.status import read_state, runs_dir
from speculator_arena.warehouse import Warehouse
from speculator_arena.warehouse.evaluations import current_row


@pytest.mark.parametrize("signum", [signal.SIGTERM])
def test_a_stop_signal_voids_the_evaluation_stops_its_engines_and_the_command(
    built_home, engine_factory, profile, signum, monkeypatch
):
    profile(**{**FAST, "workloads": {w: {**v, "pass_seconds": 3} for w, v in FAST["workloads"].items()}})
    monkeypatch.setenv("ARENA_NO_PRIVILEGE_DROP", "1")
    cand, stock = engine_factory("spinner", "idle_spin"), engine_factory("stock")
    home, eid = built_home["home"], "fx-stopped"
    wh = Warehouse(home)
    cmd = [sys.executable, "-m", "speculator_arena.cli", "evaluate", "--task", "local-smollm2", "--engine", str(cand)]
    cmd += ["--stock-engine", str(stock), "--evaluation-id", eid, "--target", str(built_home["target"])]
    cmd += ["--home", str(home), "--rerun-contended", "2"]
    proc = subprocess.Popen(cmd, env=dict(os.environ), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 180
        while time.time() < deadline:
            st = read_state(wh, eid) or {}
            if st.get("phase", "").startswith("candidate team") and st.get("engine_pgid"):
                break
            assert proc.poll() is None, proc.stderr.read()[-3000:]
            time.sleep(0.2)
        else:
            pytest.fail("the runner never reached the candidate's team passes")
        log = (runs_dir(wh, eid) / "engine-candidate-timed-1.log").read_text()
        spin = int(re.search(r"SPIN pid=(\d+)", log).group(1))
        assert reaper.alive(spin)
        proc.send_signal(signum)
        time.sleep(0.3)
        proc.send_signal(signum)  # a second one while the engines stop
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signum, err[-3000:]
    name = signal.Signals(signum).name
    assert f"stopped by {name}" in err
    row = current_row(wh, eid)
    assert row["status"] == "void" and row["void_reason"].startswith(f"runner interrupted ({name}) during candidate")
    deadline = time.time() + 5
    while reaper.alive(spin) and time.time() < deadline:
        time.sleep(0.1)
    assert not reaper.alive(spin), "the candidate's detached child outlived the stopped command"
    assert not reaper.is_reaper(read_state(wh, eid).get("engine_pgid") or 0)
    # the command stopped: no second attempt although --rerun-contended allowed two
    from speculator_arena.warehouse.evaluations import statuses

    assert [e for e in statuses(wh) if e.startswith("local-smollm2-")] == []
    starts = wh.read_table("engine_starts", eid).to_pandas()
    assert not starts.empty and not starts["unprivileged"].any()
    # the evaluation's page says its engines were not isolated, naming the user
    from streamlit.testing.v1 import AppTest

    import speculator_arena.dashboards

    monkeypatch.setenv("ARENA_HOME", str(home))
    at = AppTest.from_file(str(Path(speculator_arena.dashboards.__file__).parent / "app.py"), default_timeout=180)
    at.query_params.update({"evaluation": eid})
    at.run()
    at.switch_page("views/evaluation.py").run()
    assert not at.exception, [e.value for e in at.exception]
    warnings, me = [w.value for w in at.warning], user_name(os.geteuid())
    assert any(
        w.startswith(f"Not isolated: engines of this evaluation ran as the runner's own user ({me}") for w in warnings
    ), warnings
