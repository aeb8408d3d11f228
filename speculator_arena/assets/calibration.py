"""The calibration of a task (protocol section 10) as assets, one partition per task:
calibration_runs (the A/A runs, the references, the planted controls as stored: ordinary
evaluations under the account `arena-calibration`, each an `evaluation` partition), calibration_fit
(m and c from short stock passes) and protocol_candidate (the derived values, their evidence and
plots, the candidate vN+1 document).

The evaluations themselves (the m/c fit's short stock passes included) are run before these
assets, each through the one door: by the launcher (`dagster_project/launch.calibration_evaluations`,
what `arena calibrate` calls) on the chosen backend, or, for a calibration left to the queue
(`arena calibrate --queue`, calibration/queued.py), by the `calibration_queue` sensor below, one
per free device, which then runs the three assets. An asset never materializes another asset
inside its step, and the assets import nothing of the launchers. `calibration_runs` records which stored evaluation
stands for each planned run (none measured: the evidence says so).

Each step writes its result into the candidate's folder and the next reads it there
(calibration/calibrate.py), so `arena calibrate` (which materializes these) and a resumed run
share everything stored. A candidate is not a version: `arena protocol publish` makes it one.
"""

import dagster as dg

from speculator_arena.assets.evaluations import evaluation, evaluation_partitions, progress_lines, run_config
from speculator_arena.assets.resources import WarehouseResource
from speculator_arena.assets.submissions import IN_FLIGHT, free_devices
from speculator_arena.protocol import load_protocol

calibration_partitions = dg.StaticPartitionsDefinition(sorted(load_protocol().tasks))


class CalibrationConfig(dg.Config):
    """What `arena calibrate` passes (calibration/calibrate.py CalibrationOptions)."""

    candidate_version: int = 0  # 0: the next version number
    base_version: int = 0  # 0: the latest version
    aa_runs: int = 4
    controls: str = "auto"  # auto | yes | no
    not_honest: list[str] = []  # noqa: RUF012 (Dagster config: a pydantic field, copied per run)
    fit: bool = True
    fit_grid: str = "full"  # full | small
    fit_pass_seconds: float = 0.0  # 0: the task's busy pass length
    target: str = ""
    adopt: dict[str, str] = {}  # noqa: RUF012

    def options(self, task_id: str):
        from speculator_arena.calibration.calibrate import (
            CalibrationOptions,
            resolve_versions,
        )

        return resolve_versions(
            CalibrationOptions(
                task_id=task_id,
                candidate_version=self.candidate_version or None,
                base_version=self.base_version or None,
                aa_runs=self.aa_runs,
                controls={"auto": None, "yes": True, "no": False}[self.controls],
                not_honest=tuple(self.not_honest),
                fit=self.fit,
                fit_grid=self.fit_grid,
                fit_pass_seconds=self.fit_pass_seconds or None,
                target=self.target or None,
                adopt=dict(self.adopt),
            )
        )


@dg.asset(
    partitions_def=calibration_partitions,
    group_name="calibration",
    description="The calibration's evaluations of task <partition> as stored: at least 4 A/A runs, every "
    "reference, the planted attacks as negative controls (`arena calibrate` runs those not stored yet first, "
    "each an `evaluation` partition).",
    deps=[
        "pool_data_card",  # the task's served pool (the same task partition)
        dg.AssetDep("evaluation", partition_mapping=dg.AllPartitionMapping()),  # the runs are evaluations
    ],
)
def calibration_runs(
    context: dg.AssetExecutionContext, config: CalibrationConfig, warehouse: WarehouseResource
) -> dg.MaterializeResult:
    from speculator_arena.calibration.calibrate import step_runs

    opts = config.options(context.partition_key)
    ids = step_runs(warehouse.get(), opts)
    table = "| run | evaluation |\n|---|---|\n" + "\n".join(
        f"| {k} | {v or '(none measured)'} |" for k, v in ids.items()
    )
    return dg.MaterializeResult(
        metadata={
            "candidate_version": opts.candidate_version,
            "base_version": opts.base_version,
            "runs": dg.MetadataValue.md(table),
            "measured": dg.MetadataValue.int(sum(v is not None for v in ids.values())),
        }
    )


@dg.asset(
    partitions_def=calibration_partitions,
    group_name="calibration",
    description="m (interleave) and c (think-time scale) of task <partition> from short stock passes over the "
    "grid, against the data card's cache-hit targets.",
)
def calibration_fit(
    context: dg.AssetExecutionContext, config: CalibrationConfig, warehouse: WarehouseResource
) -> dg.MaterializeResult:
    from speculator_arena.calibration.calibrate import step_fit

    opts = config.options(context.partition_key)
    result = step_fit(warehouse.get(), opts, progress_lines(context))
    meta = {"candidate_version": opts.candidate_version}
    if result:
        meta.update(
            {
                "m": result["m"],
                "c": result["c"],
                "loss": result["loss"],
                "achieved": dg.MetadataValue.json(result["achieved"]),
                "targets": dg.MetadataValue.json(result["targets"]),
            }
        )
    return dg.MaterializeResult(metadata=meta)


@dg.asset(
    partitions_def=calibration_partitions,
    group_name="calibration",
    # the candidate's values are the calibration runs' scores (scored under the candidate's document)
    deps=[calibration_runs, calibration_fit, dg.AssetDep("scores", partition_mapping=dg.AllPartitionMapping())],
    description="The calibrated values of task <partition> with their evidence and plots, and the protocol "
    "candidate vN+1 holding them (not a version until published).",
)
def protocol_candidate(
    context: dg.AssetExecutionContext, config: CalibrationConfig, warehouse: WarehouseResource
) -> dg.MaterializeResult:
    from speculator_arena.calibration.calibrate import step_candidate
    from speculator_arena.calibration.candidate import candidate_dir
    from speculator_arena.calibration.evidence import evidence_markdown

    opts = config.options(context.partition_key)
    wh = warehouse.get()
    evidence = step_candidate(wh, opts, progress_lines(context))
    d = candidate_dir(wh.home, opts.task_id, opts.candidate_version)
    return dg.MaterializeResult(
        metadata={
            "candidate_version": opts.candidate_version,
            "separates": evidence["separates"],
            "problems": dg.MetadataValue.json(evidence["problems"]),
            "limits": dg.MetadataValue.json(evidence["limits"]),
            "candidate": dg.MetadataValue.path(str(d / "candidate.yaml")),
            "evidence": dg.MetadataValue.md(evidence_markdown(evidence)),
        }
    )


CALIBRATION_TAG = "arena/calibration"  # a calibration's evaluation runs: the task calibrated
CALIBRATION_RUN_TAG = "arena/calibration-run"  # a queued calibration's evaluation run: its evaluation id
CALIBRATION_ASSETS = ("calibration_runs", "calibration_fit", "protocol_candidate")

calibration_evaluation_job = dg.define_asset_job(
    "calibration_evaluation",
    selection=[evaluation],
    description="One evaluation of a queued calibration (started by the calibration_queue sensor).",
)
calibration_job = dg.define_asset_job(
    "calibration",
    selection=[calibration_runs, calibration_fit, protocol_candidate],
    partitions_def=calibration_partitions,
    description="A queued calibration's assets, once its evaluations are stored (calibration_queue).",
)


@dg.sensor(
    jobs=[calibration_evaluation_job, calibration_job],
    minimum_interval_seconds=15,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Runs queued calibrations (`arena calibrate --queue`): their evaluations one per free device, "
    "then their assets.",
)
def calibration_queue(context: dg.SensorEvaluationContext, warehouse: WarehouseResource):
    """For each queued calibration (calibration/queued.py), oldest first: its next evaluations
    (calibration/queued.next_runs) on the free devices, each a run of the `evaluation` asset's
    partition tagged with its device and the task, as `submission_queue` starts a submission's;
    once none is left to run or in flight, one run of its three assets. A run of either kind is
    started once (its run key: the evaluation id, or the candidate)."""
    from speculator_arena.calibration.queued import next_runs, waiting
    from speculator_arena.rules.devices import DEVICE_TAG

    wh = warehouse.get()
    free, devices = free_devices(context.instance)
    requests, added = [], []
    for task_id, config in waiting(wh.home):
        opts = CalibrationConfig(**config).options(task_id)
        specs, pending = next_runs(wh, opts)
        in_flight = context.instance.get_runs(
            filters=dg.RunsFilter(tags={CALIBRATION_TAG: task_id}, statuses=IN_FLIGHT), limit=1
        )
        if not specs and not pending and not in_flight:
            requests.append(
                dg.RunRequest(
                    job_name=calibration_job.name,
                    run_key=f"calibrate-{task_id}-v{opts.candidate_version}",
                    partition_key=task_id,
                    tags={CALIBRATION_TAG: task_id},
                    run_config={"ops": {name: {"config": config} for name in CALIBRATION_ASSETS}},
                )
            )
        for spec in specs:
            if not free:
                break
            if context.instance.get_runs(
                filters=dg.RunsFilter(tags={CALIBRATION_RUN_TAG: spec.evaluation_id}, statuses=IN_FLIGHT), limit=1
            ):
                continue  # requested before, its row not written yet
            requests.append(
                dg.RunRequest(
                    job_name=calibration_evaluation_job.name,
                    run_key=spec.evaluation_id,
                    partition_key=spec.evaluation_id,
                    tags={DEVICE_TAG: free.pop(0), CALIBRATION_TAG: task_id, CALIBRATION_RUN_TAG: spec.evaluation_id},
                    run_config=run_config(spec),
                )
            )
            added.append(spec.evaluation_id)
    if not requests:
        busy = "" if free else f"; every device is busy ({', '.join(devices)})"
        return dg.SkipReason(f"no queued calibration has a run to start{busy}")
    return dg.SensorResult(
        run_requests=requests,
        dynamic_partitions_requests=[evaluation_partitions.build_add_request(added)] if added else [],
    )
