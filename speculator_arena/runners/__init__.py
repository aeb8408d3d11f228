"""The evaluation harness: the spec and its builders (spec.py), the queued row (queued.py), the
orchestrating `Evaluation` (harness.py) and its steps over one `RunContext` (run_context.py:
engines.py, passes.py, interleaved.py, sliced.py, probe_phase.py, fit_passes.py), the
provenance (provenance.py), the workload client (workload.py, stream.py, sse_decode.py), engine lifecycle,
samplers, gate probes.

It writes raw rows only (speculator_arena.warehouse) and knows nothing of Dagster, so that the
same harness runs in-process under `arena evaluate`, in a pod, or as
`python -m speculator_arena.runners.evaluate` on a machine without Dagster or DuckDB.
"""
