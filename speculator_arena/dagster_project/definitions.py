"""Thin root: every asset, check and schedule of `speculator_arena.assets` is loaded, none listed by hand."""

from __future__ import annotations

import importlib
import pkgutil

import dagster as dg

from speculator_arena import assets
from speculator_arena.assets.resources import default_resources


def build_definitions() -> dg.Definitions:
    return dg.Definitions(
        assets=dg.load_assets_from_package_module(assets),
        asset_checks=dg.load_asset_checks_from_package_module(assets),
        schedules=_schedules(),
        sensors=_of_type(dg.SensorDefinition),
        resources=default_resources(),
    )


def _schedules() -> list[dg.ScheduleDefinition]:
    """Every ScheduleDefinition defined at the top of a module of `speculator_arena.assets`."""
    return _of_type(dg.ScheduleDefinition)


def _of_type(kind: type) -> list:
    """Every definition of `kind` at the top of a module of `speculator_arena.assets`."""
    found = []
    for info in pkgutil.iter_modules(assets.__path__):
        module = importlib.import_module(f"{assets.__name__}.{info.name}")
        found += [v for v in vars(module).values() if isinstance(v, kind)]
    return found


defs = build_definitions()
