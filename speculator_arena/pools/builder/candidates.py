"""Step 3 of a build: which conversations each split may take, in the order it takes them.

A public hash reserves a share of every source for the hidden side; the public split draws its
candidates in the public order, a hidden split in the operators' keyed order, and the declared
sets' weights refill each family's places (`weighted_order`). `timed_targets` says how many
timed sessions each family gets, and `match_structure` which conversation carries each
sampled session size.
"""

from __future__ import annotations

from speculator_arena.pools.builder.context import BuildContext, PoolBuildError
from speculator_arena.pools.hashing import keyed_u, public_u
from speculator_arena.pools.layout import split_folder
from speculator_arena.pools.model import SourceConversation

NO_KEY = "no hidden pool without the operators' key: set ARENA_POOL_KEY or ARENA_POOL_KEY_FILE"


def require_key(split: str, key: bytes | None) -> None:
    """A hidden split is built only with the operators' key."""
    if split != "dev" and key is None:
        raise PoolBuildError(NO_KEY)


def eligible(c: SourceConversation) -> bool:
    """Agent: a task and at least one tool output. Chat: a user turn, and a recorded reply
    unless the set has none (question sets: the engines reply, closed loop)."""
    users = c.user_turns()
    if c.family == "agent":
        return len(users) >= 2
    return len(users) >= 1 and (c.meta.get("no_replies", False) or any(m["role"] == "assistant" for m in c.messages))


def weighted_order(ctx: BuildContext, ordered: list[SourceConversation]) -> list[SourceConversation]:
    """Apply the declared sets' weights to a split's ordered candidates. In a family where some
    set has a weight, its positions in the list are refilled by weighted round robin over the
    sets (the unweighted sets together take the rest of the weight, in their common order);
    each set keeps its own order. A family without weights keeps the order as it is."""
    weights = ctx.sources.weights
    out = list(ordered)
    for fam in ctx.settings.family_mix:
        items = [c for c in ordered if c.family == fam]
        named = {c.meta.get("set") for c in items}
        given = {n: weights.get(n) for n in named if weights.get(n) is not None}
        if not given:
            continue
        rest = max(0.0, 1.0 - sum(given.values()))
        groups = {n: [c for c in items if c.meta.get("set") == n] for n in given}
        groups[None] = [c for c in items if c.meta.get("set") not in given]
        share = {**given, None: rest}
        merged, taken = [], dict.fromkeys(groups, 0)
        while len(merged) < len(items):
            live = [g for g in groups if taken[g] < len(groups[g]) and share[g] > 0] or [
                g for g in groups if taken[g] < len(groups[g])
            ]
            g = min(live, key=lambda g: (taken[g] + 1) / max(share[g], 1e-9))
            merged.append(groups[g][taken[g]])
            taken[g] += 1
        slots = [i for i, c in enumerate(ordered) if c.family == fam]
        for i, c in zip(slots, merged):
            out[i] = c
    return out


def split_candidates(ctx: BuildContext) -> tuple[list[SourceConversation], list[SourceConversation]]:
    """(public candidates, hidden reserve): a public hash reserves a share of every source for
    the hidden pool, so the public pool never depends on the operators' key and never holds a
    conversation the hidden pool may use; the key then picks, unpredictably, which reserved
    conversations the hidden pool holds."""
    pub, res = [], []
    share = ctx.settings.reserve_share
    for c in ctx.sources.chats + ctx.sources.agents:
        if not eligible(c):
            continue
        (res if public_u(c.source_id) < share else pub).append(c)
    return pub, res


def timed_targets(ctx: BuildContext, available: dict[str, int]) -> dict[str, int]:
    """Timed sessions per family: enough for every pass of every workload to refill its live
    slots `sessions_per_live_slot` times, in the family mix, limited by the scarcer family."""
    want = ctx.task.passes_per_workload * sum(ctx.live_slots().values()) * ctx.settings.sessions_per_live_slot
    mix = ctx.settings.family_mix
    total = min([want] + [int(available[f] / mix[f]) for f in mix if mix[f] > 0])
    return {f: int(round(total * mix[f])) for f in mix}


def match_structure(convs: list[SourceConversation], sizes_desc: list[int]) -> list[tuple[SourceConversation, int]]:
    """Choose, for each sampled session size (largest first), the conversation that holds it
    most tightly (fewest user turns at least that many), else the longest one left: sessions
    take their depth from the structure and their text from a conversation that can carry it."""
    left = sorted(convs, key=lambda c: len(c.user_turns()))
    out = []
    for n in sizes_desc:
        if not left:
            break
        lens = [len(c.user_turns()) for c in left]
        j = next((i for i, m in enumerate(lens) if m >= n), len(left) - 1)
        c = left.pop(j)
        out.append((c, min(n, lens[j])))
    return out


def ordered_candidates(ctx: BuildContext, split: str, key: bytes | None):
    """The split's candidate sessions in the order its pool draws them, and the split's folder:
    the public split in the public order, a hidden split in the operators' keyed order."""
    pub, res = split_candidates(ctx)
    if split == "dev":
        ordered = sorted(pub, key=lambda c: public_u(c.source_id))
    else:
        require_key(split, key)
        ordered = sorted(res, key=lambda c: keyed_u(key, c.source_id))
    return weighted_order(ctx, ordered), split_folder(ctx.root, split)
