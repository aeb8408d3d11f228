"""The Dagster code location."""
