"""How a step of the evaluation stops it early, and whose side failed.

A module of its own because every step raises them (engines.py, passes.py) and the orchestrating
`Evaluation` (harness.py) turns them into the final status: an engine's failure is the
candidate's `failed` (the stock engine's: `void`), the arena's side failing is `void`.
"""

from __future__ import annotations

from speculator_arena.errors import ArenaError


class RunnerInterrupted(BaseException):
    """SIGTERM/SIGINT reached the runner: stop the engine, mark the evaluation void."""


class ArenaVoid(ArenaError):
    """The arena's side failed during the run (host contended): stop and mark the evaluation void."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class EngineFailure(ArenaError):
    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class IdleFault(ArenaError):
    """Under the interleaved pairing, the idle engine worked while the other was measured (CPU
    while frozen, or connections to the other's port): the candidate's failure, the stock
    engine's a void (runners/interleaved.py). Not an EngineFailure: it names the engine at
    fault, which is not the one the step was serving."""

    def __init__(self, engine: str, reason: str):
        super().__init__(reason)
        self.engine = engine
        self.reason = reason
