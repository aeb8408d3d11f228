"""The Dagster definitions, pinned: every asset (its group, its partitioning, what it depends on),
every asset check, job, sensor, schedule and resource that `dagster_project/definitions.py` loads
from `speculator_arena/assets/`.

Why: the definitions are loaded from the package, none listed by hand, so an asset added, renamed
or rewired, a check dropped or made non-blocking, changes the graph without a line of
`definitions.py` changing. Here it is a visible diff of the expected snapshot, reviewed with the
change (docs/contributors/architecture.md, "Dagster assets"). Cheap: the definitions are built and read,
nothing is materialized.
"""

from __future__ import annotations

import dagster as dg
import pytest

# asset -> (group, partitioning, upstream assets)
ASSETS = {
    "pool_sources": ("pools", "static", []),
    "pool_structure": ("pools", "static", ["pool_sources"]),
    "pool_dev": ("pools", "static", ["pool_structure"]),
    "pool_test": ("pools", "static", ["pool_structure"]),
    "pool_warmup": ("pools", "static", ["pool_dev", "pool_test"]),
    "pool_probes": ("pools", "static", ["pool_sources"]),
    "pool_data_card": ("pools", "static", ["pool_probes", "pool_warmup"]),
    "evaluation": ("evaluations", "dynamic:evaluations", ["pool_data_card"]),
    "scores": ("scores", "static", ["evaluation"]),
    "analysts_db": ("warehouse", None, ["evaluation"]),
    "raw_packs": ("warehouse", None, ["evaluation"]),
    "calibration_runs": ("calibration", "static", ["evaluation", "pool_data_card"]),
    "calibration_fit": ("calibration", "static", []),
    "protocol_candidate": ("calibration", "static", ["calibration_fit", "calibration_runs", "scores"]),
}
# (asset, check) -> blocking
CHECKS = {
    ("evaluation", "gate_inputs_present"): False,
    ("evaluation", "raw_rows_complete"): False,
    ("pool_data_card", "busy_lanes_fit_cache"): False,
    ("pool_dev", "every_turn_fits_window"): False,
    ("pool_test", "every_turn_fits_window"): False,
    ("pool_warmup", "enough_sessions_for_every_pass"): True,
    ("pool_warmup", "no_session_in_two_passes"): False,
    ("pool_warmup", "public_hidden_disjoint"): False,
}
# job -> the assets it selects (Dagster's implicit asset jobs, named `__...`, aside)
JOBS = {
    "calibration": ["calibration_fit", "calibration_runs", "protocol_candidate"],
    "calibration_evaluation": ["evaluation"],
    "pack_raw": ["raw_packs"],
    "submission_evaluation": ["evaluation"],
}
# sensor -> (its jobs, minimum interval in seconds, on by default)
SENSORS = {
    "calibration_queue": (["calibration", "calibration_evaluation"], 15, True),
    "submission_queue": (["submission_evaluation"], 15, True),
}
# schedule -> (job, cron, on by default)
SCHEDULES = {"pack_raw_every_10_minutes": ("pack_raw", "*/10 * * * *", True)}
RESOURCES = ["backend", "pool_builds", "scores_io_manager", "warehouse"]


@pytest.fixture(scope="module")
def defs() -> dg.Definitions:
    from speculator_arena.dagster_project.definitions import build_definitions

    return build_definitions()


def _partitioning(p) -> str | None:
    if p is None:
        return None
    if isinstance(p, dg.DynamicPartitionsDefinition):
        return f"dynamic:{p.name}"
    if isinstance(p, dg.StaticPartitionsDefinition):
        return "static"
    return type(p).__name__


def test_the_assets_their_groups_partitions_and_deps(defs):
    graph = defs.resolve_asset_graph()
    found = {
        node.key.to_user_string(): (
            node.group_name,
            _partitioning(node.partitions_def),
            sorted(k.to_user_string() for k in node.parent_keys),
        )
        for node in graph.asset_nodes
    }
    assert found == ASSETS


def test_the_asset_checks(defs):
    graph = defs.resolve_asset_graph()
    found = {(n.key.asset_key.to_user_string(), n.key.name): n.blocking for n in graph.asset_check_nodes}
    assert found == CHECKS


def test_the_jobs_sensors_schedules_and_resources(defs):
    repo = defs.get_repository_def()
    jobs = {
        j.name: sorted(k.to_user_string() for k in j.asset_layer.selected_asset_keys)
        for j in repo.get_all_jobs()
        if not j.name.startswith("__")
    }
    assert jobs == JOBS
    sensors = {
        s.name: (
            sorted(j.name for j in s.jobs),
            s.minimum_interval_seconds,
            s.default_status == dg.DefaultSensorStatus.RUNNING,
        )
        for s in repo.sensor_defs
    }
    assert sensors == SENSORS
    schedules = {
        s.name: (s.job_name, s.cron_schedule, s.default_status == dg.DefaultScheduleStatus.RUNNING)
        for s in repo.schedule_defs
    }
    assert schedules == SCHEDULES
    assert sorted(repo.get_top_level_resources()) == RESOURCES
