"""`ARENA_SCORE_TIMING=1`: how long each step of a scoring took, printed to stderr (the
benchmark's breakdown, docs/benchmarks/scoring.md); nothing at all otherwise."""

from __future__ import annotations

import sys
import time

from speculator_arena import settings


def tick(label: str, t0: list) -> None:
    """Print the time since the previous tick under `label` (`t0`: a list that carries it)."""
    if settings.flag("ARENA_SCORE_TIMING"):
        now = time.perf_counter()
        if t0:
            print(f"  score step {label}: {now - t0[0]:.2f} s", file=sys.stderr, flush=True)
        t0[:] = [now]
