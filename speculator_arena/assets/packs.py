"""The `raw_packs` asset: finished evaluations' raw rows packed for fast reads (warehouse/packs.py).

Why an asset: packing is upkeep that follows evaluations landing (the board's first render
reads packs instead of thousands of small parts); as an asset it has a run history and its
figures as metadata, and `pack_schedule` runs it every 10 minutes under `dagster dev` (a run
with nothing new to pack costs a fraction of a second). Packs are never authoritative: a
reader checks every evaluation against its partitions and reads the parts of whatever changed.
"""

import dagster as dg

from speculator_arena.assets.resources import WarehouseResource


@dg.asset(
    group_name="warehouse",
    deps=[dg.AssetDep("evaluation", partition_mapping=dg.AllPartitionMapping())],
    description="Packs of finished evaluations' raw rows (a rebuildable copy; readers fall back to the parts).",
)
def raw_packs(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.MaterializeResult:
    from speculator_arena.warehouse import catalog, packs

    home = warehouse.get().home
    catalog.refresh(home)
    r = packs.pack(home, progress=lambda done, total: context.log.info(f"packed {done}/{total} evaluations"))
    return dg.MaterializeResult(
        metadata={
            "packed": dg.MetadataValue.int(r.packed),
            "pack": r.pack or "",
            "rewritten": r.rewritten,
            "retired": dg.MetadataValue.int(r.retired),
            "removed": dg.MetadataValue.int(r.removed),
            "left_for_next_run": dg.MetadataValue.int(r.skipped_recent),
            "seconds": round(r.seconds, 2),
        }
    )


pack_schedule = dg.ScheduleDefinition(
    name="pack_raw_every_10_minutes",
    job=dg.define_asset_job("pack_raw", selection=[raw_packs]),
    cron_schedule="*/10 * * * *",
    default_status=dg.DefaultScheduleStatus.RUNNING,
)
