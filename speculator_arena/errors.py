"""The base of every exception the arena raises on purpose: `ArenaError`.

Why one base: a caller (the CLI, the API, a test) can catch what the arena means to raise as one
type, apart from a bug's `KeyError` or a library's error. Each class keeps the builtin it was
(`class PoolExhausted(ValueError, ArenaError)`), so every `except ValueError` written before
still catches it. `tests/test_errors.py` walks the package and fails on an exception class that
does not derive from it. `runners/failures.RunnerInterrupted` stays a `BaseException` (a signal
must pass every `except Exception`), and is not one.
"""

from __future__ import annotations


class ArenaError(Exception):
    """An error the arena raises on purpose (bad input, a refusal, a full disk, a void run...)."""
