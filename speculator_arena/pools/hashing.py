"""The pools' hashes: the public order of the sources, the operators' keyed order, the key's id
and the seeds of every seeded draw (the builder's and the runner's per-evaluation order).

Why hashes and not a random generator: a source's place in the public or keyed order, and
every draw, must be the same in every build and every process from the same inputs.
"""

from __future__ import annotations

import hashlib
import hmac

PUBLIC_SALT = "speculator-arena/pools/v1"


def _unit(digest: bytes) -> float:
    return int.from_bytes(digest[:8], "big") / 2**64


def public_u(source_id: str) -> float:
    return _unit(hashlib.sha256(f"{PUBLIC_SALT}|{source_id}".encode()).digest())


def keyed_u(key: bytes, source_id: str) -> float:
    return _unit(hmac.new(key, source_id.encode(), hashlib.sha256).digest())


def key_id(key: bytes) -> str:
    """Names the key a hidden pool was built with, without revealing it."""
    return hmac.new(key, b"speculator-arena key id", hashlib.sha256).hexdigest()[:12]


def seed_of(*parts) -> int:
    return int(hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:16], 16)
