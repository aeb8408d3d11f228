"""A real prefix cache: reuse the KV of the longest cached token prefix, bounded, LRU-evicted.

Why our own and not a library's: transformers has no cross-request prefix cache, and vLLM's
paged block cache is what the dev engine stands in for. This one keeps whole token sequences
with their per-layer KV tensors; a lookup takes the longest common token prefix over the
entries (numpy comparison, entries are few), so `cached_tokens` is exactly what was reused.
The budget counts stored tokens; an insert evicts least-recently-used entries until the total
fits, and drops entries that are prefixes of the new one (their KV is contained in it).
Everything lives on the model's device: nothing is offloaded to host memory.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from itertools import count

import numpy as np
import torch


@dataclass
class Entry:
    tokens: np.ndarray
    kv: list = field(repr=False)  # per layer (keys, values), [1, heads, len, head_dim]


def _own(t):
    """`t` itself when it spans its whole storage, else a copy: a stored entry must never keep a
    larger tensor alive than the tokens the budget counts it for."""
    if t.is_contiguous() and t.untyped_storage().nbytes() == t.numel() * t.element_size():
        return t
    return t.clone(memory_format=torch.contiguous_format)


def common_prefix(a: np.ndarray, b: np.ndarray) -> int:
    n = min(len(a), len(b))
    diff = np.flatnonzero(a[:n] != b[:n])
    return int(diff[0]) if diff.size else n


class PrefixCache:
    def __init__(self, budget_tokens: int):
        if budget_tokens < 0:
            raise ValueError("prefix cache budget must be >= 0 tokens")
        self.budget = budget_tokens
        self._entries: OrderedDict[int, Entry] = OrderedDict()
        self._ids = count()
        self.stored_tokens = 0
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._entries)

    def lookup(self, tokens: list[int], max_reuse: int) -> tuple[int, list | None]:
        """(reused length, per-layer KV views of that length) for the longest cached prefix of
        `tokens`, at most `max_reuse` long; (0, None) on a miss. A hit refreshes the entry."""
        if not self._entries or max_reuse <= 0:
            return 0, None
        query = np.asarray(tokens, dtype=np.int64)
        best_id, best = None, 0
        for eid, entry in self._entries.items():
            m = common_prefix(entry.tokens, query)
            if m > best:
                best_id, best = eid, m
        best = min(best, max_reuse)
        if best_id is None or best <= 0:
            return 0, None
        self._entries.move_to_end(best_id)
        entry = self._entries[best_id]
        return best, [(k[..., :best, :], v[..., :best, :]) for k, v in entry.kv]

    def insert(self, tokens: list[int], kv: list) -> bool:
        """Store `tokens` with their KV (which must hold exactly len(tokens) positions)."""
        n = len(tokens)
        if n == 0 or self.budget == 0 or n > self.budget:
            return False
        if kv[0][0].shape[-2] != n:
            raise ValueError(f"KV holds {kv[0][0].shape[-2]} positions for {n} tokens")
        arr = np.asarray(tokens, dtype=np.int64)
        for eid, entry in list(self._entries.items()):
            m = len(entry.tokens)
            if m <= n and common_prefix(entry.tokens, arr) == m:
                self._drop(eid)  # contained in the new entry
            elif m > n and common_prefix(entry.tokens, arr) == n:
                self._entries.move_to_end(eid)  # the new one is contained: refresh, keep one copy
                return False
        while self._entries and self.stored_tokens + n > self.budget:
            self._drop(next(iter(self._entries)))
            self.evictions += 1
        self._entries[next(self._ids)] = Entry(arr, [(_own(k[..., :n, :]), _own(v[..., :n, :])) for k, v in kv])
        self.stored_tokens += n
        return True

    def _drop(self, eid: int) -> None:
        entry = self._entries.pop(eid)
        self.stored_tokens -= len(entry.tokens)
