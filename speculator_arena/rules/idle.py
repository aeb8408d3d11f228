"""The interleaved pairing's rule for the idle engine (docs/scoring.md "Pairing"), its one home.

While one engine serves a pass the other is frozen (runners/freezer.py) and must not work: CPU
time its control group used during the other's pass beyond the version's
`interleaving.max_idle_cpu_seconds` is the idle engine's doing (a frozen group uses none; a
candidate that found a way to run then could slow the stock engine or prepare its own pass). The
runner stops the evaluation on it at once; the scorer judges every stored pass by it again.
"""

from __future__ import annotations


def idle_cpu_fault(cpu_seconds: float | None, limit: float) -> str | None:
    """Why the idle engine's CPU during the other's pass breaks the rule, or None (no reading
    under the pairings that run one engine at a time judges nothing)."""
    if cpu_seconds is None or cpu_seconds != cpu_seconds or cpu_seconds <= limit:
        return None
    return f"used {cpu_seconds:.3f} CPU seconds while frozen (limit {limit:g})"
