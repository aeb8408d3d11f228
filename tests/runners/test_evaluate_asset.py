"""`arena evaluate` end to end through the Dagster asset (in-process, persistent instance under
ARENA_HOME/dagster): the session's real evaluation (tests/real_evaluation.py), and bad input."""

from __future__ import annotations

import dagster as dg
from real_evaluation import ACCOUNT, LABEL
from stand_in import FAST

from speculator_arena.cli import main
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
    assert out["rows"]["passes"] == 18
    for table in TABLES:  # every table the evaluation fills has its rows, as the CLI said
        if table not in out["rows"]:  # an ARENA_REAL_HOME reused from before the table existed
            assert wh.read_table(table, eid).num_rows == 0, table
            continue
        assert out["rows"][table] == wh.read_table(table, eid).num_rows, table
        assert table == "memory" or out["rows"][table] > 0, table
    row = current_row(wh, eid)
    assert row["status"] == "measured" and row["label"] == LABEL and row["account_id"] == ACCOUNT
    # The run is on the ARENA_HOME instance, visible to `dagster dev` with DAGSTER_HOME=$ARENA_HOME/dagster.
    instance = dg.DagsterInstance.from_config(str(home / "dagster"))
    assert eid in instance.get_dynamic_partitions("evaluations")
    ev = instance.get_latest_materialization_event(dg.AssetKey("evaluation"))
    meta = ev.asset_materialization.metadata
    assert ev.asset_materialization.partition == eid
    assert meta["status"].value == "measured" and meta["rows_passes"].value == 18
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
