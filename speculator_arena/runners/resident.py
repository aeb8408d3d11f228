"""The interleaved pairing's two resident engines taken in turns: one thawed, the other frozen.

Why a module of its own: the interleaved pairing (interleaved.py), its sliced pass (sliced.py)
and the probes on the timed starts (probe_phase.py) all thaw an engine the same way, and the
fairness of the pairing rests on that one way: before an engine is thawed, every connection to
its port that the runner did not open is the other engine's (reach.py), a fault charged to it;
the other is frozen (its control group: freezer.py) before this one runs.
"""

from __future__ import annotations

from speculator_arena.runners import reach
from speculator_arena.runners.failures import IdleFault
from speculator_arena.runners.lifecycle import EngineRun
from speculator_arena.runners.run_context import RunContext

OTHER = {"candidate": "stock", "stock": "candidate"}


def thaw_alone(ctx: RunContext, engine: str) -> EngineRun:
    """Thaw `engine` of `ctx.resident` with the other frozen. Before the thaw, connections to its
    port that the runner did not open are the other engine's fault (reach.py)."""
    er, other = ctx.resident[engine], ctx.resident[OTHER[engine]]
    strangers = reach.foreign_connections(er.port)
    if strangers:
        raise IdleFault(
            OTHER[engine],
            f"{OTHER[engine]} engine connected to the {engine} engine's port while it was frozen "
            f"({'; '.join(strangers[:3])})",
        )
    if other.stopped_at is None:
        other.cgroup.freeze()  # already frozen; made sure of before this one runs
    er.cgroup.thaw()
    return er


def turn(ctx: RunContext, engine: str, step) -> None:
    """Thaw `engine` alone, run `step`, freeze it again."""
    er = thaw_alone(ctx, engine)
    try:
        step()
    finally:
        if er.stopped_at is None:
            er.cgroup.freeze()
