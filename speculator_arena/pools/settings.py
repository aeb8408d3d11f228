"""Pool-building choices the protocol does not (yet) state, in one place.

Protocol v1 says the family mix and the cache-hit targets are "published with the version"
but v1.yaml holds none, so these are the pools' PROPOSALS, shown in the data card as such.
When the protocol gains a `pools` section, `pool_settings()` reads it first.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from speculator_arena import settings
from speculator_arena.protocol import TaskProtocol


@dataclass(frozen=True)
class PoolSettings:
    family_mix: dict = field(default_factory=lambda: {"agent": 0.3, "chat": 0.7})  # share of timed sessions
    reserve_share: float = 0.5  # sources a public hash reserves for the hidden pool
    sessions_per_live_slot: int = 4  # timed sessions per pass per live session (lanes x interleave)
    warmup_factor: float = 1.5  # warm-up sessions per live session of every workload
    diverse_candidates_factor: int = 4
    system_share: float = 0.25  # of the per-turn budget, at most, for system prompt + tools
    first_turn_share: float = 0.35  # of the per-turn budget, at most, for the first user turn
    min_turn_tokens: int = 8
    salt_reserve_tokens: int = 32  # room kept in every turn's budget for the per-pass salt line
    fidelity_factor: int = 2  # fidelity texts stored per text a gate needs
    returning_history_cached_target: float = 0.5  # proposal; no public source states one


def pool_settings(task: TaskProtocol) -> PoolSettings:
    extra = getattr(task.task, "pools", None)
    if isinstance(extra, dict):
        return PoolSettings(**{k: v for k, v in extra.items() if k in PoolSettings.__dataclass_fields__})
    return PoolSettings()


def operator_key() -> bytes | None:
    """The operators' split key: `ARENA_POOL_KEY`, or the file `ARENA_POOL_KEY_FILE` names."""
    key = settings.raw("ARENA_POOL_KEY")
    path = settings.get("ARENA_POOL_KEY_FILE")
    if not key and path:
        with open(path, "rb") as fh:
            key = fh.read().strip().decode("utf-8", "replace")
    if key is not None and not key.strip():
        raise ValueError("the pool key is empty")
    return key.encode() if key else None
