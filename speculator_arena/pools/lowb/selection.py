"""Which candidates each split takes, and under which opaque id.

Why the session pools' rule: public and hidden items must split as the sessions do (issue 50), so
a candidate is reserved for the hidden side by the same public hash and share
(`hashing.public_u`, `PoolSettings.reserve_share`, as `builder/candidates.split_candidates`
applies them), the public split takes its candidates in the public order and a hidden split in
the operators' keyed order (`hashing.keyed_u`). RULER's items are generated per split (keyed
seeds), so they need no reserve.
"""

from __future__ import annotations

import hashlib
import hmac
from itertools import zip_longest

from speculator_arena.pools.hashing import PUBLIC_SALT, keyed_u, public_u
from speculator_arena.pools.lowb.model import Candidate, ItemPoolError
from speculator_arena.pools.settings import PoolSettings

RESERVE_SHARE = PoolSettings().reserve_share


def split_order(candidates: list[Candidate], split: str, key: bytes | None) -> list[Candidate]:
    """The split's candidates in the order it takes them."""
    reserved = [c for c in candidates if public_u(c.source_id) < RESERVE_SHARE]
    public = [c for c in candidates if public_u(c.source_id) >= RESERVE_SHARE]
    if split == "dev":
        return sorted(public, key=lambda c: public_u(c.source_id))
    if key is None:
        raise ItemPoolError("a hidden split needs the operators' key: ARENA_POOL_KEY or ARENA_POOL_KEY_FILE")
    return sorted(reserved, key=lambda c: keyed_u(key, c.source_id))


def take(per_benchmark: list[list[Candidate]], count: int | None) -> list[Candidate]:
    """`count` candidates (None: all) drawn round robin over the domain's benchmarks, each in
    its own order, so one large benchmark does not crowd out the others."""
    merged = [c for row in zip_longest(*per_benchmark) for c in row if c is not None]
    return merged if count is None else merged[:count]


def item_id(candidate: Candidate, split: str, key: bytes | None) -> str:
    """Stable and opaque: a digest of the source id, keyed for hidden items so that nobody
    without the key can tell which source record a hidden id is."""
    if split == "dev":
        digest = hashlib.sha256(f"{PUBLIC_SALT}|lowb-item|{candidate.source_id}".encode()).hexdigest()
    else:
        digest = hmac.new(key, f"lowb-item|{candidate.source_id}".encode(), hashlib.sha256).hexdigest()
    return f"{candidate.benchmark}-{digest[:16]}"


def text_id(name: str, split: str, key: bytes | None, kind: str) -> str:
    """An opaque id for a text named `name` (a source id), keyed for hidden splits."""
    if split == "dev":
        digest = hashlib.sha256(f"{PUBLIC_SALT}|{kind}|{name}".encode()).hexdigest()
    else:
        digest = hmac.new(key, f"{kind}|{name}".encode(), hashlib.sha256).hexdigest()
    return f"{kind}-{digest[:16]}"
