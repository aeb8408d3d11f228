"""`arena queue work`: the submission_queue sensor ticked in-process, its run executed here.

For a machine without the Dagster daemon (and for tests): the same sensor decides what runs, the
run is the same `evaluation` asset partition, on the ARENA_HOME instance, so `dagster dev` shows
it like any other.
"""

from __future__ import annotations

import dagster as dg


def tick(home=None, say=print) -> str | None:
    """Evaluate the sensor once; run what it requests; return the evaluation id run (or None)."""
    from speculator_arena.assets.evaluations import dagster_instance, evaluation
    from speculator_arena.assets.submissions import submission_queue
    from speculator_arena.dagster_project.resources import default_resources
    from speculator_arena.warehouse import arena_home

    home = arena_home(home)
    instance = dagster_instance(home)
    resources = default_resources(home)
    with dg.build_sensor_context(instance=instance, resources=resources) as context:
        result = submission_queue(context)
    if not isinstance(result, dg.SensorResult) or not result.run_requests:
        say(f"queue: {getattr(result, 'skip_message', result)}")
        return None
    for req in result.dynamic_partitions_requests:
        instance.add_dynamic_partitions(req.partitions_def_name, list(req.partition_keys))
    request = result.run_requests[0]
    say(f"queue: evaluating {request.partition_key} (submission {request.tags['arena/submission']})")
    dg.materialize([evaluation], partition_key=request.partition_key, instance=instance, tags=request.tags,
                   run_config={**request.run_config, "loggers": {"console": {"config": {"log_level": "WARNING"}}}},
                   resources=resources, raise_on_error=False)
    return request.partition_key
