"""Helpers for the engine tests: requests to a running engine and /metrics parsing.

(A module of its own with a unique name, imported through pytest's rootdir path insertion,
so test modules and conftest share it without a `tests` package.)"""

from __future__ import annotations

import json

import httpx

from speculator_arena.engine.local import LocalEngine

# The /metrics names the arena reads (engine_metrics rows, the board's acceptance columns): served
# by every engine, and the spec-decode counters, which vLLM serves only with a speculative config.
SERVED_METRICS = (
    "vllm:prompt_tokens_total",
    "vllm:generation_tokens_total",
    "vllm:prefix_cache_queries_total",
    "vllm:prefix_cache_hits_total",
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
)
SPEC_DECODE_METRICS = (
    "vllm:spec_decode_num_drafts_total",
    "vllm:spec_decode_num_draft_tokens_total",
    "vllm:spec_decode_num_accepted_tokens_total",
)


def chat(engine: LocalEngine, messages, **fields) -> dict:
    body = {"model": engine.served_name, "messages": messages, **fields}
    r = httpx.post(engine.base_url + "/v1/chat/completions", json=body, timeout=300)
    assert r.status_code == 200, r.text
    return r.json()


def reply(engine: LocalEngine, messages, **fields) -> str:
    return chat(engine, messages, **fields)["choices"][0]["message"]["content"]


def metrics(engine: LocalEngine) -> dict[str, float]:
    """Samples of /metrics, parsed with prometheus_client, summed over labels but `position`."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, float] = {}
    text = httpx.get(engine.base_url + "/metrics", timeout=30).text
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            key = s.name + (f"[{s.labels['position']}]" if "position" in s.labels else "")
            out[key] = out.get(key, 0.0) + s.value
    return out


def prompt_logprobs(engine: LocalEngine, messages, k: int = 0) -> dict:
    return chat(
        engine,
        messages,
        max_tokens=1,
        temperature=0,
        prompt_logprobs=k,
        add_generation_prompt=False,
        continue_final_message=True,
    )


def stream_events(engine: LocalEngine, body: dict) -> list:
    events = []
    with httpx.stream(
        "POST",
        engine.base_url + "/v1/chat/completions",
        json={"model": engine.served_name, "stream": True, **body},
        timeout=300,
    ) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.startswith("data: "):
                data = line[6:]
                events.append(data if data == "[DONE]" else json.loads(data))
    return events
