"""Typed resources. Configuration comes from environment variables here and nowhere else."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import dagster as dg
from pydantic import PrivateAttr

from speculator_arena.backends.resource import EvaluationBackendResource
from speculator_arena.warehouse import Warehouse, arena_home

if TYPE_CHECKING:
    from speculator_arena.pools.builder.context import BuildContext


class WarehouseResource(dg.ConfigurableResource):
    """The warehouse under ARENA_HOME (a path; object storage URLs are read by DuckDB directly)."""

    home: str = ""

    def get(self) -> Warehouse:
        return Warehouse(self.home or None)

    @property
    def path(self) -> str:
        return str(arena_home(self.home or None))


class PoolBuildsResource(dg.ConfigurableResource):
    """The pool builds of one run: one `BuildContext` per (run, task, data, home, cc-traces,
    declaration), opened by the first pool asset of the run, rooted in the run's own build folder
    and shared by the run's other pool assets, so the sources and the tokenizer are loaded once
    per build rather than once per asset.

    Why a resource: its state lives as long as the run's resources, which Dagster initializes
    for the run (once per process under the multiprocess executor) and tears down when the run
    ends, whether it succeeded or failed; a module global outlived every failed run."""

    _builds: dict = PrivateAttr(default_factory=dict)

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        self._builds.clear()

    @property
    def open_builds(self) -> int:
        return len(self._builds)

    def build_context(
        self,
        run_id: str,
        task_id: str,
        home: str,
        *,
        data_dir: str = "",
        cc_traces: str = "",
        sources: str = "",
        progress: Callable[[str], None],
    ) -> BuildContext:
        """The run's build context for these inputs (opened on first use, its build folder begun
        as `pools/.builds/<task>/run-<run id>`), reporting to `progress` (the calling asset's log)."""
        from speculator_arena.pools.builder.context import BuildContext
        from speculator_arena.pools.builder.folders import begin_build

        key = (run_id, task_id, data_dir, home, cc_traces, sources)
        if key not in self._builds:
            staging = begin_build(task_id, home, build_id=f"run-{run_id}")
            self._builds[key] = BuildContext(
                task_id,
                data_dir or None,
                home,
                cc_traces=cc_traces or None,
                progress=progress,
                root=staging,
                sources_file=sources or None,
            )
        ctx = self._builds[key]
        ctx.progress = progress
        return ctx


def default_resources(home=None, backend: str = "") -> dict:
    """Every resource the arena's assets and sensors need, for one ARENA_HOME: the definitions,
    `arena evaluate`, the queue worker and the pool commands all build theirs here, so an asset
    that gains a resource cannot run without it in one of them."""
    return {
        "warehouse": WarehouseResource(home=str(arena_home(home))),
        "backend": EvaluationBackendResource(kind=backend),
        "pool_builds": PoolBuildsResource(),
        "scores_io_manager": dg.mem_io_manager,
    }
