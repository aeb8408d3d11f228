"""The `analysts_db` asset: `$ARENA_HOME/arena.duckdb`, the raw tables without hidden text.

Why an asset: the analysts' file is a rebuildable copy that follows evaluations landing (each
evaluation's end refreshes it too); as an asset its rebuilds have a history and their row
counts as metadata. What it holds is warehouse/analysts.py's ALLOWLIST (docs/warehouse.md).
"""

import dagster as dg

from speculator_arena.assets.resources import WarehouseResource


@dg.asset(
    group_name="warehouse",
    deps=[dg.AssetDep("evaluation", partition_mapping=dg.AllPartitionMapping())],
    description="The analysts' DuckDB file: allowlisted raw columns, no text of test-split evaluations.",
)
def analysts_db(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.MaterializeResult:
    from speculator_arena.warehouse import analysts

    r = analysts.refresh(warehouse.get().home)
    context.log.info(f"analysts' database {r.path} rebuilt in {r.seconds:.1f} s")
    return dg.MaterializeResult(
        metadata={
            "path": str(r.path),
            "rows": dg.MetadataValue.json(r.rows),
            "test_evaluations_text_withheld": dg.MetadataValue.int(r.withheld_test_evaluations),
            "seconds": round(r.seconds, 2),
        }
    )
