"""One exception for every refusal, carrying the HTTP status the API answers with."""

from __future__ import annotations


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
