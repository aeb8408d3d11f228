"""The `scores` asset: every stored evaluation scored under one protocol version per partition.

Why an asset: re-scoring under a new version is a materialization of a new partition, with
its run history and metadata in Dagster, and nothing about the runs themselves changes. The
asset's stored output is only the convenience copy under `$ARENA_HOME/scores/v<N>/`; the
scores are recomputed from raw rows every time (ADR-0009).
"""

import dagster as dg

from speculator_arena.assets.resources import WarehouseResource
from speculator_arena.protocol import available_versions

protocol_partitions = dg.StaticPartitionsDefinition([str(v) for v in available_versions()])


@dg.asset(
    partitions_def=protocol_partitions,
    group_name="scores",
    deps=[dg.AssetDep("evaluation", partition_mapping=dg.AllPartitionMapping())],
    description="SpecScore, ratios, gates and figures of every stored evaluation under protocol version <partition>.",
    # The frames go to the caller in memory (launch.score returns them: scored once); what
    # persists is the convenience copy under $ARENA_HOME/scores/ and the metadata below.
    io_manager_key="scores_io_manager",
)
def scores(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.Output:
    from speculator_arena.board import fill
    from speculator_arena.board.ranking import board_rows
    from speculator_arena.board.text import interval_label, rank_label
    from speculator_arena.scoring.registry import score_and_record, scores_dir

    version = int(context.partition_key)
    wh = warehouse.get()
    result = score_and_record(wh, version, keep=fill)  # the board's score store too
    ev = result.evaluations
    previews = []
    for task in sorted(ev["task_id"].dropna().unique()):
        for split in ("test", "dev"):
            rows = board_rows(result, task, split)
            if rows.empty:
                continue
            previews.append(
                f"**{task} / {split}**\n\n| # | label | SpecScore | 95% interval | note |\n|---|---|---|---|---|"
            )
            for r in rows.head(10).itertuples():
                score = "-" if r.specscore != r.specscore else f"{r.specscore:.4f}"
                note = r.specscore_reason if isinstance(r.specscore_reason, str) else ""
                previews.append(
                    f"| {rank_label(r.rank, r.tie)} | {r.label} | {score} | "
                    f"{interval_label(r.interval_low, r.interval_high)} | {note} |"
                )
            previews.append("")
    return dg.Output(
        result,
        metadata={
            "protocol_version": version,
            "protocol_digest": result.protocol_digest,
            "evaluations": dg.MetadataValue.int(len(ev)),
            "with_specscore": dg.MetadataValue.int(int(ev["specscore"].notna().sum())),
            "blank_with_reason": dg.MetadataValue.int(int(ev["specscore"].isna().sum())),
            "passes": dg.MetadataValue.int(len(result.passes)),
            "gate_rows": dg.MetadataValue.int(len(result.gates)),
            "figure_rows": dg.MetadataValue.int(len(result.figures)),
            "convenience_copy": dg.MetadataValue.path(str(scores_dir(wh, version) / "evaluations.parquet"))
            if result.copy_path is not None
            else f"not written: {result.copy_error}",
            "ranking": dg.MetadataValue.md("\n".join(previews) or "(no evaluations stored)"),
        },
    )
