"""Fixtures of the scoring tests."""

from __future__ import annotations

import pytest

from speculator_arena.warehouse import Warehouse


@pytest.fixture
def wh(tmp_path) -> Warehouse:
    return Warehouse(tmp_path / "home")
