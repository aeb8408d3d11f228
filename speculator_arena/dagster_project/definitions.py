"""Thin root: every asset and check of `speculator_arena.assets` is loaded, none listed by hand."""

from __future__ import annotations

import dagster as dg

from speculator_arena import assets
from speculator_arena.dagster_project.resources import default_resources


def build_definitions() -> dg.Definitions:
    return dg.Definitions(
        assets=dg.load_assets_from_package_module(assets),
        asset_checks=dg.load_asset_checks_from_package_module(assets),
        resources=default_resources(),
    )


defs = build_definitions()
