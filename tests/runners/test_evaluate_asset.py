"""`arena evaluate` end to end through the Dagster asset (in-process, persistent instance under
ARENA_HOME/dagster), with real stdlib SSE engines and the real local pools."""

from __future__ import annotations

import json

import dagster as dg

from speculator_arena.cli import main
from speculator_arena.runners.status import current_row
from speculator_arena.warehouse import Warehouse

FAST = {
    "workloads": {w: {"interleave": 1 if w == "solo" else 2, "pass_seconds": 1,
                      "speed": "request_time" if w == "solo" else "busy_window"} for w in ("solo", "team", "busy")},
    "start_stop": {"health_timeout_seconds": 5, "sigterm_grace_seconds": 3},
    "grace_seconds": 5,
}


def test_arena_evaluate_materializes_the_partition(built_home, engine_factory, profile, capsys, monkeypatch):
    profile(**FAST)
    home = built_home["home"]
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    eng = engine_factory("ok")
    rc = main(["evaluate", "--task", "local-smollm2", "--engine", str(eng), "--stock-engine", str(eng),
               "--evaluation-id", "cli-eval-1", "--target", str(built_home["target"]), "--home", str(home),
               "--label", "sse-ok"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["status"] == "measured" and out["rows"]["passes"] == 18 and out["rows"]["probe_scored"] > 0
    row = current_row(Warehouse(home), "cli-eval-1")
    assert row["status"] == "measured" and row["label"] == "sse-ok"
    # The run is on the ARENA_HOME instance, visible to `dagster dev` with DAGSTER_HOME=$ARENA_HOME/dagster.
    instance = dg.DagsterInstance.from_config(str(home / "dagster"))
    assert "cli-eval-1" in instance.get_dynamic_partitions("evaluations")
    ev = instance.get_latest_materialization_event(dg.AssetKey("evaluation"))
    meta = ev.asset_materialization.metadata
    assert ev.asset_materialization.partition == "cli-eval-1"
    assert meta["status"].value == "measured" and meta["rows_passes"].value == 18


def test_evaluate_rejects_bad_input_without_storing(built_home, profile, capsys):
    profile(**FAST)
    rc = main(["evaluate", "--task", "local-smollm2", "--engine", "/nonexistent/engine", "--home",
               str(built_home["home"]), "--evaluation-id", "cli-bad"])
    assert rc == 2 and "engine directory not found" in capsys.readouterr().err
    assert current_row(Warehouse(built_home["home"]), "cli-bad") is None
    rc = main(["evaluate", "--resume", "no-such-eval", "--home", str(built_home["home"])])
    assert rc == 2
