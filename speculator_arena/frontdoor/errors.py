"""One exception for every refusal, carrying the HTTP status the API answers with, and the
helpers that keep a refusal's text short and free of the server's own paths."""

from __future__ import annotations

ECHO_CHARS = 120  # how much of a participant's value an error repeats
REASON_CHARS = 600  # the longest reason the API answers with


class Refused(Exception):
    """A request the front door refuses; nothing was stored and no quota used."""

    status = 400

    def __init__(self, reason: str, status: int | None = None):
        super().__init__(reason)
        self.reason = reason
        if status is not None:
            self.status = status


class Unauthorized(Refused):
    status = 401


class QuotaExhausted(Refused):
    status = 429


class NotFound(Refused):
    status = 404


def echo(value, limit: int = ECHO_CHARS) -> str:
    """`repr(value)` cut to `limit` characters: an error names what it refuses without
    repeating a multi-megabyte member name or URL."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 12]}...[{len(text):,} chars]"


def server_paths(home) -> list[tuple[str, str]]:
    """The server's own folders an error must not show, with the names shown instead."""
    import sys
    from pathlib import Path

    import speculator_arena

    return [
        (str(home), "$ARENA_HOME"),
        (str(Path(speculator_arena.__file__).resolve().parent.parent), "<arena>"),
        (sys.prefix, "<python>"),
    ]


def scrub(reason: str, paths: list[tuple[str, str]]) -> str:
    """A reason without the server's paths (each replaced by a name) and cut to REASON_CHARS."""
    for path, name in sorted(((p, n) for p, n in paths if p), key=lambda pn: -len(pn[0])):
        reason = reason.replace(path, name)
    return reason if len(reason) <= REASON_CHARS else reason[: REASON_CHARS - 3] + "..."
