"""The evaluation harness: workload client, engine lifecycle, memory sampler, gate probes.

It writes raw rows only (speculator_arena.warehouse) and knows nothing of Dagster, so that the
same harness runs in-process under `arena evaluate`, in a pod, or as
`python -m speculator_arena.runners.evaluate` on a machine without Dagster or DuckDB.
"""
