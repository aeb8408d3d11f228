"""The pool assets' per-run state is the `pool_builds` resource, not a module global: one
BuildContext per run and inputs, shared by the run's assets, released when the run's resources
are torn down, after a failure as after a success (Dagster's real resource initialization)."""

from __future__ import annotations

import dagster as dg
import pytest

from speculator_arena.assets.resources import PoolBuildsResource, default_resources
from speculator_arena.pools.layout import builds_dir

TASK = "local-smollm2"


def _open(builds: PoolBuildsResource, run_id: str, home, log: list[str], sources: str = ""):
    return builds.build_context(run_id, TASK, str(home), sources=sources, progress=log.append)


def test_one_context_per_run_and_inputs_released_when_the_run_fails(tmp_path):
    log: list[str] = []
    with pytest.raises(RuntimeError, match="a step failed"):
        with dg.build_resources({"pool_builds": PoolBuildsResource()}) as resources:
            builds = resources.pool_builds
            first = _open(builds, "run-a", tmp_path, log)
            again = _open(builds, "run-a", tmp_path, log)
            other = _open(builds, "run-a", tmp_path, log, sources=str(tmp_path / "my_sets.yaml"))
            assert again is first and other is not first  # the sources and tokenizer load once per build
            assert first.root == builds_dir(TASK, tmp_path) / "run-run-a" and first.root.is_dir()
            assert again.progress == log.append  # the asset asking now gets the progress lines
            assert builds.open_builds == 2
            raise RuntimeError("a step failed")
    assert builds.open_builds == 0  # torn down with the failed run: nothing outlives it


def test_every_resource_set_provides_the_pool_builds(tmp_path):
    from speculator_arena.assets.pools import POOL_ASSETS

    needed = set().union(*(a.required_resource_keys for a in POOL_ASSETS))
    assert "pool_builds" in needed
    assert needed - {"io_manager"} <= set(default_resources(tmp_path))  # Dagster supplies the io_manager
