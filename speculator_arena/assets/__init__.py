"""Dagster assets by domain (pools, evaluations, scores). Loaded by dagster_project.definitions."""
