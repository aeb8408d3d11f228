"""The prefix cache: longest-prefix reuse, a token budget, LRU eviction."""

from __future__ import annotations

import pytest
import torch

from speculator_arena.engine.prefix_cache import PrefixCache


def kv_for(tokens, layers=2):
    # KV whose values encode the token ids, so a reused slice can be checked position by position
    t = torch.tensor(tokens, dtype=torch.float32).view(1, 1, -1, 1)
    return [(t.clone() + i, t.clone() - i) for i in range(layers)]


def test_longest_common_prefix_is_reused_exactly():
    pc = PrefixCache(100)
    pc.insert([1, 2, 3, 4, 5], kv_for([1, 2, 3, 4, 5]))
    pc.insert([1, 2, 9, 9], kv_for([1, 2, 9, 9]))
    n, kv = pc.lookup([1, 2, 3, 4, 7, 7], max_reuse=10)
    assert n == 4
    assert kv[0][0].flatten().tolist() == [1, 2, 3, 4]
    assert kv[1][1].flatten().tolist() == [0, 1, 2, 3]
    assert pc.lookup([8, 1, 2], max_reuse=10) == (0, None)
    # never the whole prompt: the last prompt token must be computed to get its logits
    n, _ = pc.lookup([1, 2, 3, 4, 5], max_reuse=4)
    assert n == 4


def test_budget_and_lru_eviction():
    pc = PrefixCache(10)
    pc.insert([1, 2, 3, 4], kv_for([1, 2, 3, 4]))
    pc.insert([5, 6, 7, 8], kv_for([5, 6, 7, 8]))
    assert pc.stored_tokens == 8
    pc.lookup([1, 2, 3, 0], max_reuse=3)  # refresh the first entry
    pc.insert([9, 10, 11], kv_for([9, 10, 11]))  # 11 > 10: evict the least recently used (5 6 7 8)
    assert pc.stored_tokens == 7 and pc.evictions == 1
    assert pc.lookup([5, 6, 0], max_reuse=5) == (0, None)
    assert pc.lookup([1, 2, 0], max_reuse=5)[0] == 2
    assert not pc.insert(list(range(11)), kv_for(list(range(11))))  # larger than the whole budget
    assert pc.stored_tokens <= pc.budget


def test_an_extension_replaces_its_prefix_and_a_prefix_is_not_stored_twice():
    pc = PrefixCache(100)
    pc.insert([1, 2, 3], kv_for([1, 2, 3]))
    pc.insert([1, 2, 3, 4, 5], kv_for([1, 2, 3, 4, 5]))
    assert len(pc) == 1 and pc.stored_tokens == 5
    assert not pc.insert([1, 2], kv_for([1, 2]))
    assert len(pc) == 1 and pc.stored_tokens == 5


def test_stored_entries_do_not_alias_a_longer_tensor():
    pc = PrefixCache(100)
    big = kv_for(list(range(50)))
    pc.insert([0, 1, 2], [(k[..., :3, :], v[..., :3, :]) for k, v in big])
    stored = pc._entries[next(iter(pc._entries))].kv[0][0]
    assert stored.shape[-2] == 3 and stored.untyped_storage().nbytes() == 3 * 4


def test_bad_kv_length_is_refused():
    pc = PrefixCache(100)
    with pytest.raises(ValueError, match="positions"):
        pc.insert([1, 2, 3], kv_for([1, 2]))
    with pytest.raises(ValueError):
        PrefixCache(-1)
