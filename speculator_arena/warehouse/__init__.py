"""The raw-measurement warehouse: Parquet files partitioned by evaluation, DuckDB views over them."""

from speculator_arena.warehouse.schema import TABLES
from speculator_arena.warehouse.store import Warehouse, arena_home

__all__ = ["TABLES", "Warehouse", "arena_home"]
