"""`arena evaluate` end to end through the Dagster asset (in-process, persistent instance under
ARENA_HOME/dagster): the session's real evaluation (tests/real_evaluation.py), and bad input."""

from __future__ import annotations

import dagster as dg
from real_evaluation import ACCOUNT, LABEL
from stand_in import FAST

from speculator_arena.cli import main
from speculator_arena.protocol import load_protocol
from speculator_arena.warehouse import Warehouse
from speculator_arena.warehouse.evaluations import current_row
from speculator_arena.warehouse.schema import TABLES


def test_arena_evaluate_materializes_the_partition(real_evaluation):
    """`arena evaluate` of the session's real evaluation (tests/real_evaluation.py: the CLI, the
    dev engines serving SmolLM2 on CPU) materialized its partition of the Dagster asset on the
    ARENA_HOME instance, and the asset's metadata, the CLI's summary and the stored rows agree."""
    home, eid, out = real_evaluation.home, real_evaluation.evaluation_id, real_evaluation.cli_output
    wh = Warehouse(home)
    assert out["status"] == "measured", (out["void_reason"], out["failure_reason"])
    task = load_protocol(current_row(wh, eid)["protocol_version"]).task("local-smollm2")
    timed_passes = 2 * 3 * task.passes_per_workload  # engines x workloads x passes
    assert out["rows"]["passes"] == timed_passes
    for table in TABLES:  # every table the evaluation fills has its rows, as the CLI said
        if table not in out["rows"]:  # an ARENA_REAL_HOME reused from before the table existed
            assert wh.read_table(table, eid).num_rows == 0, table
            continue
        assert out["rows"][table] == wh.read_table(table, eid).num_rows, table
        assert table in ("memory", "slices") or out["rows"][table] > 0, table  # no device; slices: a sliced version
    row = current_row(wh, eid)
    assert row["status"] == "measured" and row["label"] == LABEL and row["account_id"] == ACCOUNT
    # The run is on the ARENA_HOME instance, visible to `dagster dev` with DAGSTER_HOME=$ARENA_HOME/dagster.
    instance = dg.DagsterInstance.from_config(str(home / "dagster"))
    assert eid in instance.get_dynamic_partitions("evaluations")
    ev = instance.get_latest_materialization_event(dg.AssetKey("evaluation"))
    meta = ev.asset_materialization.metadata
    assert ev.asset_materialization.partition == eid
    assert meta["status"].value == "measured" and meta["rows_passes"].value == timed_passes
    runs = instance.get_runs(dg.RunsFilter(statuses=[dg.DagsterRunStatus.SUCCESS]))
    assert any(r.tags.get("dagster/partition") == eid for r in runs)


def test_evaluate_rejects_bad_input_without_storing(built_home, profile, capsys):
    profile(**FAST)
    rc = main(
        [
            "evaluate",
            "--task",
            "local-smollm2",
            "--engine",
            "/nonexistent/engine",
            "--home",
            str(built_home["home"]),
            "--evaluation-id",
            "cli-bad",
        ]
    )
    assert rc == 2 and "engine directory not found" in capsys.readouterr().err
    assert current_row(Warehouse(built_home["home"]), "cli-bad") is None
    rc = main(["evaluate", "--resume", "no-such-eval", "--home", str(built_home["home"])])
    assert rc == 2


def test_a_vllm_task_without_vllm_is_refused_before_anything_is_stored(built_home, monkeypatch, capsys, tmp_path):
    """local-smollm2-vllm's stock engine runs vLLM's CPU build: where ARENA_VLLM_VENV holds none,
    `arena evaluate` says so (and how to install it) and stores nothing, instead of starting the
    evaluation and voiding it minutes later."""
    monkeypatch.setenv("ARENA_VLLM_VENV", str(tmp_path / "no-vllm"))
    rc = main(
        [
            "evaluate",
            "--task",
            "local-smollm2-vllm",
            "--engine",
            "engines/vllm-cpu-ngram",
            "--home",
            str(built_home["home"]),
            "--evaluation-id",
            "cli-no-vllm",
        ]
    )
    err = capsys.readouterr().err
    assert rc == 2 and "vllm-cpu-stock needs vLLM's CPU build" in err and "scripts/setup_vllm_cpu.sh" in err
    assert current_row(Warehouse(built_home["home"]), "cli-no-vllm") is None
