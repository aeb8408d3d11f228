"""Typed resources. Configuration comes from environment variables here and nowhere else."""

from __future__ import annotations

import dagster as dg

from speculator_arena.backends.resource import EvaluationBackendResource
from speculator_arena.warehouse import Warehouse, arena_home


class WarehouseResource(dg.ConfigurableResource):
    """The warehouse under ARENA_HOME (a path; object storage URLs are read by DuckDB directly)."""

    home: str = ""

    def get(self) -> Warehouse:
        return Warehouse(self.home or None)

    @property
    def path(self) -> str:
        return str(arena_home(self.home or None))


def default_resources(home=None, backend: str = "") -> dict:
    """Every resource the arena's assets and sensors need, for one ARENA_HOME: the definitions,
    `arena evaluate`, the queue worker and the pool commands all build theirs here, so an asset
    that gains a resource cannot run without it in one of them."""
    return {
        "warehouse": WarehouseResource(home=str(arena_home(home))),
        "backend": EvaluationBackendResource(kind=backend),
        "scores_io_manager": dg.mem_io_manager,
    }
