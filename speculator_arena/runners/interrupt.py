"""A stop asked of the whole command: SIGINT or SIGTERM while an evaluation runs.

Why process-wide: Ctrl-C, `timeout` or a service manager's SIGTERM means "stop", not "void this
evaluation and go on with the next". The harness (harness.py) turns the first signal into
`RunnerInterrupted` inside its run, stops the engines and records the evaluation void with the
signal's name; the signal stays noted here, so whoever started it (the one door,
dagster_project/launch.py `evaluate`, for `arena demo`, `arena evaluate`, `arena calibrate` and
the queue's worker) raises `CommandInterrupted` as soon as the harness has returned, and the
command exits non-zero (128 + the signal's number, as a shell reports it). A second signal while
the engines are being stopped is noted and changes nothing: the stop goes on to its end, so no
engine is left running half-stopped.
"""

from __future__ import annotations

import signal
import threading

_requested: list[int] = []


class CommandInterrupted(KeyboardInterrupt):
    """The command was asked to stop; what it was running is recorded (void, with the signal)."""

    def __init__(self, signum: int, what: str = ""):
        self.signum = signum
        self.name = signal.Signals(signum).name
        super().__init__(f"stopped by {self.name}" + (f": {what}" if what else ""))

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def requested() -> int | None:
    """The first stop signal received, or None."""
    return _requested[0] if _requested else None


def note(signum: int) -> bool:
    """Note a stop signal; True for the first one."""
    _requested.append(signum)
    return len(_requested) == 1


def check(what: str = "") -> None:
    """Raise CommandInterrupted when a stop was asked."""
    if _requested:
        raise CommandInterrupted(_requested[0], what)


def forward_to(children) -> dict | None:
    """While a command waits for processes of its own (the queue's runs), a stop signal is noted and
    sent on to each of them as SIGTERM (each records its evaluation void and exits); returns the
    handlers to restore (`restore`). None off the main thread (signals reach only the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def handler(signum, _frame):
        note(signum)
        for child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)

    return {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGINT)}


def hold() -> None:
    """After the first stop signal: later ones are only noted until the command has recorded what it
    was doing (the scoring of the void evaluation, Dagster's bookkeeping) and stops."""
    if threading.current_thread() is not threading.main_thread():
        return
    for s in (signal.SIGTERM, signal.SIGINT):
        signal.signal(s, lambda signum, _frame: note(signum))


def restore(old: dict | None) -> None:
    for s, h in (old or {}).items():
        signal.signal(s, h)
