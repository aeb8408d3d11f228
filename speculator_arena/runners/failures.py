"""How a step of the evaluation stops it early, and whose side failed.

A module of its own because every step raises them (engines.py, passes.py) and the orchestrating
`Evaluation` (harness.py) turns them into the final status: an engine's failure is the
candidate's `failed` (the stock engine's: `void`), the arena's side failing is `void`.
"""

from __future__ import annotations


class RunnerInterrupted(BaseException):
    """SIGTERM/SIGINT reached the runner: stop the engine, mark the evaluation void."""


class ArenaVoid(Exception):
    """The arena's side failed during the run (host contended): stop and mark the evaluation void."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class EngineFailure(Exception):
    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason
