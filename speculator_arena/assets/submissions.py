"""The submission queue as a Dagster sensor: accepted submissions become evaluation runs.

`submission_queue` looks at the front door's accepted submissions (speculator_arena/frontdoor)
and, for each device with no run in flight (`ARENA_DEVICE`: one, or on the kubernetes backend a
comma-separated list of GPU nodes), starts the oldest one whose evaluation has no run yet, as a
run of the `evaluation` asset's partition tagged with that device, with the configured backend
(the `evaluation` asset's, which pins a kubernetes pod to its device's node). One at a time per
device: no run starts on a device while a run tagged with it is still in flight. Under `dagster
dev` (or the daemon) it ticks by itself; `arena queue work` ticks it in-process on a machine
without the daemon.
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


def free_devices(instance) -> tuple[list[str], list[str]]:
    """(the devices with no run in flight, every device `ARENA_DEVICE` names): what both queues
    (submissions here, calibrations in assets/calibration.py) start runs on."""
    from speculator_arena.frontdoor.queue import device_names
    from speculator_arena.rules.devices import DEVICE_TAG

    devices = device_names()
    free = [
        d
        for d in devices
        if not instance.get_runs(filters=dg.RunsFilter(tags={DEVICE_TAG: d}, statuses=IN_FLIGHT), limit=1)
    ]
    return free, devices


submission_evaluation_job = dg.define_asset_job(
    "submission_evaluation",
    selection=[evaluation],
    description="One accepted submission's evaluation (started by the submission_queue sensor).",
)


@dg.sensor(
    job=submission_evaluation_job,
    minimum_interval_seconds=15,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Starts the oldest accepted submissions' evaluations, one at a time on each free device.",
)
def submission_queue(context: dg.SensorEvaluationContext, warehouse: WarehouseResource):
    from speculator_arena.frontdoor.queue import SUBMISSION_TAG, evaluation_spec, waiting
    from speculator_arena.frontdoor.state import connect, sql
    from speculator_arena.rules.devices import DEVICE_TAG

    free, devices = free_devices(context.instance)
    if not free:
        return dg.SkipReason(f"every device is busy ({', '.join(devices)})")
    wh = warehouse.get()
    con = connect(wh.home)
    requests = []
    try:
        for sub in waiting(con, wh):
            if len(requests) == len(free):
                break
            sid = sub["submission_id"]
            if context.instance.get_runs(filters=dg.RunsFilter(tags={SUBMISSION_TAG: sid}), limit=1):
                continue  # started before; its run owns the status from here
            name = con.execute(sql("account_name"), (sub["account_id"],)).fetchone()
            eid = sub["evaluation_id"]
            requests.append(
                dg.RunRequest(
                    run_key=eid,
                    partition_key=eid,
                    tags={DEVICE_TAG: free[len(requests)], SUBMISSION_TAG: sid},
                    run_config=run_config(evaluation_spec(sub, name["name"])),
                )
            )
    finally:
        con.close()
    if not requests:
        return dg.SkipReason("no accepted submission is waiting")
    return dg.SensorResult(
        run_requests=requests,
        dynamic_partitions_requests=[evaluation_partitions.build_add_request([r.partition_key for r in requests])],
    )
