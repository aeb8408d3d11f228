"""The submission queue as a Dagster sensor: accepted submissions become evaluation runs.

`submission_queue` looks at the front door's accepted submissions (speculator_arena/frontdoor)
and starts the oldest one whose evaluation has no run yet, as a run of the `evaluation` asset's
partition, with the configured backend (the `evaluation` asset's). One at a time per device: no
run starts while a run tagged with the same device (`ARENA_DEVICE`) is still in flight. Under
`dagster dev` (or the daemon) it ticks by itself; `arena queue work` ticks it in-process on a
machine without the daemon.
"""

from __future__ import annotations

import dagster as dg

from speculator_arena.assets.evaluations import evaluation, evaluation_partitions, run_config
from speculator_arena.assets.resources import WarehouseResource

IN_FLIGHT = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
]

submission_evaluation_job = dg.define_asset_job(
    "submission_evaluation",
    selection=[evaluation],
    description="One accepted submission's evaluation (started by the submission_queue sensor).",
)


@dg.sensor(
    job=submission_evaluation_job,
    minimum_interval_seconds=15,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Starts the oldest accepted submission's evaluation, one at a time per device.",
)
def submission_queue(context: dg.SensorEvaluationContext, warehouse: WarehouseResource):
    from speculator_arena.frontdoor.queue import DEVICE_TAG, SUBMISSION_TAG, device_name, evaluation_spec, waiting
    from speculator_arena.frontdoor.state import connect, sql

    device = device_name()
    busy = context.instance.get_runs(filters=dg.RunsFilter(tags={DEVICE_TAG: device}, statuses=IN_FLIGHT), limit=1)
    if busy:
        return dg.SkipReason(f"device {device} is busy with run {busy[0].run_id}")
    wh = warehouse.get()
    con = connect(wh.home)
    try:
        for sub in waiting(con, wh):
            sid = sub["submission_id"]
            if context.instance.get_runs(filters=dg.RunsFilter(tags={SUBMISSION_TAG: sid}), limit=1):
                continue  # started before; its run owns the status from here
            name = con.execute(sql("account_name"), (sub["account_id"],)).fetchone()
            eid = sub["evaluation_id"]
            request = dg.RunRequest(
                run_key=eid,
                partition_key=eid,
                tags={DEVICE_TAG: device, SUBMISSION_TAG: sid},
                run_config=run_config(evaluation_spec(sub, name["name"])),
            )
            return dg.SensorResult(
                run_requests=[request], dynamic_partitions_requests=[evaluation_partitions.build_add_request([eid])]
            )
    finally:
        con.close()
    return dg.SkipReason("no accepted submission is waiting")
