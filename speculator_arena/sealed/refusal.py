"""One exception for every refusal of outside input, carrying the HTTP status the API answers
with, and the helper that keeps a refusal's text short. The front door's own refusals
(frontdoor/errors.py) are kinds of it."""

from __future__ import annotations

from speculator_arena.errors import ArenaError

ECHO_CHARS = 120  # how much of a participant's value an error repeats


class Refused(ArenaError):
    """A request the arena refuses; nothing was stored and no quota used."""

    status = 400

    def __init__(self, reason: str, status: int | None = None):
        super().__init__(reason)
        self.reason = reason
        if status is not None:
            self.status = status


def echo(value, limit: int = ECHO_CHARS) -> str:
    """`repr(value)` cut to `limit` characters: an error names what it refuses without
    repeating a multi-megabyte member name or URL."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 12]}...[{len(text):,} chars]"
