"""The local backend: the harness in this process, on this machine's device (the default)."""

from __future__ import annotations

from speculator_arena.runners.harness import Evaluation
from speculator_arena.runners.spec import EvaluationSpec


def run_local(spec: EvaluationSpec, home, progress=None) -> str:
    """Run the evaluation here; returns its final status (measured, failed or void)."""
    return Evaluation(spec, home=home, progress=progress).run()
