"""Structure statistics: fitting from cc-traces, Mooncake chaining, operators' production file."""

from __future__ import annotations

import json

import numpy as np
import pytest

from speculator_arena.pools.builder import structure
from speculator_arena.pools.ingest import trace_readers


def _cc_trace(i):
    """A trace in AgentX's Weka format, with a nested subagent."""
    return {
        "id": f"t{i}",
        "block_size": 64,
        "tool_tokens": 900,
        "system_tokens": 1200,
        "requests": [
            {
                "t": 0.0,
                "type": "main",
                "in": 3000,
                "out": 120,
                "hash_ids": [1, 2, 3],
                "api_time": 2.0,
                "think_time": 0.0,
            },
            {"requests": [{"t": 1.0, "type": "subagent", "in": 800, "out": 50, "hash_ids": [9], "think_time": 0.5}]},
            {
                "t": 5.0,
                "type": "main",
                "in": 3400,
                "out": 80,
                "hash_ids": [1, 2, 3, 4],
                "api_time": 1.5,
                "think_time": 3.0,
            },
        ],
    }


def test_agent_statistics_from_cc_traces(tmp_path):
    p = tmp_path / "cc.json"
    p.write_text(json.dumps([_cc_trace(0), _cc_trace(1)]))
    stats = structure.agent_from_cc_traces(trace_readers.read_cc_traces(p).records)
    assert stats["turns"] == [2, 2]  # the subagent is not a main turn
    assert stats["turn_tokens"][:2] == [3000, 3400 - 3000 - 120]
    assert stats["prefix_reuse"][0] == pytest.approx(3 / 4)
    assert stats["idle_s"][0] == 3.0


def test_mooncake_chains_follow_growing_prefixes():
    recs = [
        {"timestamp_ms": 0, "input_length": 1500, "output_length": 10, "hash_ids": [0, 1, 2]},
        {"timestamp_ms": 1000, "input_length": 900, "output_length": 5, "hash_ids": [0, 7]},
        {"timestamp_ms": 4000, "input_length": 2600, "output_length": 20, "hash_ids": [0, 1, 2, 3, 4, 5]},
    ]
    s = structure.mooncake_sessions(recs)
    assert s["think_s"] == [4.0] and sorted(s["depth"]) == [1, 2]
    assert s["growth_tokens"] == [2600 - 1500 - 10]


def test_sampling_follows_the_quantiles():
    d = structure.dist(np.arange(1, 1001), source="t")
    draws = structure.sample(d, np.random.default_rng(0), 20000)
    assert abs(np.median(draws) - 500) < 15 and draws.min() >= 1 and draws.max() <= 1000


def test_production_statistics_replace_and_are_validated():
    doc = {"families": {"chat": {"think_s": structure.dist([1, 2, 3], source="public")}}}
    q = list(np.linspace(5, 50, len(structure.PROBS)))
    out = structure.apply_production(json.loads(json.dumps(doc)), {"families": {"chat": {"think_s": {"quantiles": q}}}})
    assert out["production"] and out["families"]["chat"]["think_s"]["source"] == "production (operators)"
    with pytest.raises(ValueError, match="unknown statistic"):
        structure.apply_production(json.loads(json.dumps(doc)), {"families": {"chat": {"nope": {"quantiles": q}}}})
    with pytest.raises(ValueError, match="non-decreasing"):
        structure.apply_production(
            json.loads(json.dumps(doc)), {"families": {"chat": {"think_s": {"quantiles": q[::-1]}}}}
        )
