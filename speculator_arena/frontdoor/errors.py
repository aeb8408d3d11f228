"""The front door's kinds of refusal (sealed/refusal.py's `Refused`, with the HTTP status the
API answers with), and the helper that keeps a refusal's text free of the server's own paths."""

from __future__ import annotations

from speculator_arena.sealed.refusal import Refused

REASON_CHARS = 600  # the longest reason the API answers with


class Unauthorized(Refused):
    status = 401


class QuotaExhausted(Refused):
    status = 429


class NotFound(Refused):
    status = 404


class TooManyFailures(Refused):
    """Too many failed authentications from the client's address (`authlimit.py`): `Retry-After`."""

    status = 429

    def __init__(self, retry_after_s: int):
        super().__init__(f"too many failed authentications from your address: retry after {retry_after_s} s")
        self.headers = {"Retry-After": str(retry_after_s)}


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
