"""The `evaluation` asset: one dynamic partition per evaluation.

Materializing a partition runs the harness (speculator_arena.runners.harness) for that
evaluation on the `backend` resource's choice: in-process (local, the default) or in a GPU pod
(kubernetes, speculator_arena/backends/kubernetes); its raw rows are the asset's data, in the
warehouse, and the materialization carries the status and row counts as metadata. `arena
evaluate` and `arena demo` add the partition and materialize it through these definitions on a
persistent Dagster instance under `$ARENA_HOME/dagster`, so `DAGSTER_HOME=$ARENA_HOME/dagster
dagster dev` shows every evaluation that ran. The runner package itself never imports Dagster.
"""


import os
from pathlib import Path

import dagster as dg

from speculator_arena.backends.resource import EvaluationBackendResource
from speculator_arena.dagster_project.resources import WarehouseResource, default_resources

evaluation_partitions = dg.DynamicPartitionsDefinition(name="evaluations")


class EvaluationConfig(dg.Config):
    """What `arena evaluate` passes: the harness's EvaluationSpec, field for field."""

    task_id: str
    engine: str
    split: str = "dev"
    stock_engine: str = ""
    label: str = ""
    account_id: str = ""
    submission_id: str = ""
    is_reference: bool = False
    solution_kind: str = "other"
    speculator: str = ""
    target: str = ""


@dg.asset(
    partitions_def=evaluation_partitions,
    group_name="evaluations",
    description="One paired evaluation: candidate passes, stock passes, gate probes, as raw warehouse rows.",
)
def evaluation(context: dg.AssetExecutionContext, config: EvaluationConfig,
               warehouse: WarehouseResource, backend: EvaluationBackendResource) -> dg.MaterializeResult:
    from speculator_arena.runners.evaluate import summary
    from speculator_arena.runners.harness import EvaluationSpec
    from speculator_arena.warehouse import analysts

    spec = EvaluationSpec(
        task_id=config.task_id, engine=config.engine, split=config.split, evaluation_id=context.partition_key,
        stock_engine=config.stock_engine or None, label=config.label or None, account_id=config.account_id or None,
        submission_id=config.submission_id or None, is_reference=config.is_reference,
        solution_kind=config.solution_kind, speculator=config.speculator or None, target=config.target or None)
    wh = warehouse.get()
    backend.run(spec, wh.home, context, progress=_progress(context))
    analysts.refresh_after_evaluation(wh.home, say=context.log.info)
    s = summary(wh.home, spec.evaluation_id)
    meta = {
        "status": s["status"],
        "reason": s["void_reason"] or s["failure_reason"] or "",
        "task_id": spec.task_id, "split": spec.split, "engine": spec.engine, "backend": backend.backend,
    }
    meta.update({f"rows_{t}": dg.MetadataValue.int(int(n)) for t, n in s["rows"].items()})
    return dg.MaterializeResult(metadata=meta)


def _progress(context):
    """Progress lines to the terminal (as the runner prints them) and to the Dagster run log."""
    import sys

    def say(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)
        context.log.info(msg)

    return say


def dagster_instance(home: Path) -> dg.DagsterInstance:
    """The persistent instance of this ARENA_HOME (what `dagster dev` opens with DAGSTER_HOME)."""
    d = Path(home) / "dagster"
    d.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("DAGSTER_HOME", str(d))
    yaml_path = d / "dagster.yaml"
    if not yaml_path.exists():
        yaml_path.write_text("telemetry:\n  enabled: false\n")
    return dg.DagsterInstance.from_config(str(d))


def materialize_evaluation(config: dict, evaluation_id: str, home: Path,
                           backend: str = "") -> dg.ExecuteInProcessResult:
    """Add the evaluation's partition and materialize it in-process on the ARENA_HOME instance."""
    instance = dagster_instance(home)
    instance.add_dynamic_partitions(evaluation_partitions.name, [evaluation_id])
    return dg.materialize(
        [evaluation], partition_key=evaluation_id, instance=instance,
        run_config={"ops": {"evaluation": {"config": config}},
                    # The harness prints its own progress lines; Dagster's console stays at warnings
                    # (the run's event log in the instance keeps everything).
                    "loggers": {"console": {"config": {"log_level": "WARNING"}}}},
        resources=default_resources(home, backend),
        raise_on_error=True)
