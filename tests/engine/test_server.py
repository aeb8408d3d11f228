"""The stock development engine honours the engine contract (protocol section 3)."""

from __future__ import annotations

import threading
import time

import httpx
import pytest
import torch
from engine_testkit import SERVED_METRICS, SPEC_DECODE_METRICS, chat, metrics, prompt_logprobs, reply, stream_events

Q = [{"role": "user", "content": "What is the capital of France?"}]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "search_repository",
            "description": "Search the repository for a pattern.",
            "parameters": {"type": "object", "properties": {"pattern": {"type": "string"}}, "required": ["pattern"]},
        },
    }
]


def test_health_models_and_metrics_names(stock_engine):
    assert httpx.get(stock_engine.base_url + "/health").status_code == 200
    models = httpx.get(stock_engine.base_url + "/v1/models").json()
    assert models["data"][0]["id"] == "smollm2"
    m = metrics(stock_engine)
    for name in SPEC_DECODE_METRICS + SERVED_METRICS:
        assert name in m, name
    assert m["vllm:spec_decode_num_drafts_total"] == 0  # stock: no speculation


def test_openai_client_streams(stock_engine):
    from openai import OpenAI

    client = OpenAI(base_url=stock_engine.base_url + "/v1", api_key="unused")
    stream = client.chat.completions.create(
        model="smollm2",
        messages=Q,
        max_tokens=24,
        temperature=0.7,
        top_p=0.8,
        seed=1,
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"top_k": 20},
    )
    pieces, finish, usage = [], None, None
    for ch in stream:
        if ch.choices:
            pieces.append(ch.choices[0].delta.content or "")
            finish = ch.choices[0].finish_reason or finish
        if ch.usage:
            usage = ch.usage
    text = "".join(pieces)
    assert text.strip() and len([p for p in pieces if p]) >= 2
    assert finish in ("stop", "length")
    assert usage.completion_tokens <= 24 and usage.prompt_tokens > 10
    assert usage.prompt_tokens_details.cached_tokens >= 0
    # the same request without streaming gives the same text (same seed)
    same = client.chat.completions.create(
        model="smollm2", messages=Q, max_tokens=24, temperature=0.7, top_p=0.8, seed=1, extra_body={"top_k": 20}
    )
    assert same.choices[0].message.content == text


def test_stream_ends_with_done_and_usage(stock_engine):
    events = stream_events(stock_engine, {"messages": Q, "max_tokens": 8, "temperature": 0})
    assert events[-1] == "[DONE]"
    assert events[0]["choices"][0]["delta"]["role"] == "assistant"
    final = [e for e in events[:-1] if e["choices"] and e["choices"][0]["finish_reason"]]
    assert len(final) == 1 and final[0]["usage"]["completion_tokens"] <= 8


def test_second_turn_reports_first_turn_as_cached(stock_engine, target_model):
    first_q = [{"role": "user", "content": "Give me one fact about the moon, in a sentence. (cache test)"}]
    before = metrics(stock_engine)
    r1 = chat(stock_engine, first_q, max_tokens=32, temperature=0)
    text1 = r1["choices"][0]["message"]["content"]
    conv = first_q + [{"role": "assistant", "content": text1}, {"role": "user", "content": "And one about the sun?"}]
    r2 = chat(stock_engine, conv, max_tokens=8, temperature=0)
    cached, prompt = r2["usage"]["prompt_tokens_details"]["cached_tokens"], r2["usage"]["prompt_tokens"]
    # everything of turn 1 but its end-of-turn token is in the cache
    assert cached >= r1["usage"]["prompt_tokens"] + r1["usage"]["completion_tokens"] - 2
    assert cached < prompt
    after = metrics(stock_engine)
    assert after["vllm:prefix_cache_hits_total"] - before["vllm:prefix_cache_hits_total"] >= cached
    # and the reply built on reused KV equals the target's own greedy reply computed from scratch
    import torch

    model, tok = target_model
    ids = tok.encode(
        tok.apply_chat_template(conv, add_generation_prompt=True, tokenize=False), add_special_tokens=False
    )
    assert len(ids) == prompt
    with torch.inference_mode():
        out = model.generate(torch.tensor([ids]), max_new_tokens=8, do_sample=False)
    assert tok.decode(out[0, len(ids) :], skip_special_tokens=True) == r2["choices"][0]["message"]["content"]


def test_prompt_logprobs_match_a_direct_forward_pass(stock_engine, target_model):
    msgs = Q + [{"role": "assistant", "content": "The capital of France is Paris."}]
    body = prompt_logprobs(stock_engine, msgs, k=2)
    plp = body["prompt_logprobs"]
    model, tok = target_model
    text = tok.apply_chat_template(msgs, continue_final_message=True, tokenize=False)
    assert text.endswith("Paris.")  # the final message is left open
    ids = tok.encode(text, add_special_tokens=False)
    assert len(plp) == len(ids) == body["usage"]["prompt_tokens"] and plp[0] is None
    with torch.inference_mode():
        lp = torch.log_softmax(model(torch.tensor([ids])).logits[0].float(), -1)
    worst = 0.0
    for i in range(1, len(ids)):
        entry = plp[i]
        row = lp[i - 1]
        actual = entry[str(ids[i])]
        worst = max(worst, abs(actual["logprob"] - float(row[ids[i]])))
        assert actual["rank"] == int((row > row[ids[i]]).sum()) + 1
        top = torch.topk(row, 2).indices.tolist()
        assert all(str(t) in entry for t in top)  # top-2 alternatives are there too
        assert actual["decoded_token"] == tok.decode([ids[i]])
    assert worst < 1e-4


def test_tools_are_rendered_into_the_prompt(stock_engine):
    msgs = Q + [{"role": "assistant", "content": "Sure"}]
    plain = prompt_logprobs(stock_engine, msgs)
    body = {
        "model": stock_engine.served_name,
        "messages": msgs,
        "max_tokens": 1,
        "prompt_logprobs": 0,
        "add_generation_prompt": False,
        "continue_final_message": True,
        "tools": TOOLS,
        "tool_choice": "none",
    }
    with_tools = httpx.post(stock_engine.base_url + "/v1/chat/completions", json=body, timeout=120).json()
    assert with_tools["usage"]["prompt_tokens"] > plain["usage"]["prompt_tokens"] + 30
    rendered = "".join(next(iter(e.values()))["decoded_token"] for e in with_tools["prompt_logprobs"][1:])
    assert "search_repository" in rendered and "<tools>" in rendered
    bad = httpx.post(
        stock_engine.base_url + "/v1/chat/completions", json={**body, "tool_choice": "required"}, timeout=30
    )
    assert bad.status_code == 400 and "tool_choice" in bad.text


def test_sampling_fields_are_honoured(stock_engine):
    prompt = [{"role": "user", "content": "Write a short poem about rivers."}]
    a = reply(stock_engine, prompt, max_tokens=12, temperature=1.0, seed=7)
    b = reply(stock_engine, prompt, max_tokens=12, temperature=1.0, seed=7)
    assert a == b  # a seed fixes the sample
    many = {reply(stock_engine, prompt, max_tokens=12, temperature=1.0, seed=s) for s in range(4)}
    assert len(many) >= 2  # seeds differ, samples differ
    greedy = {reply(stock_engine, prompt, max_tokens=12, temperature=0, seed=s) for s in range(3)}
    assert len(greedy) == 1  # temperature 0 is argmax whatever the seed
    r = chat(stock_engine, prompt, max_tokens=5, temperature=0)
    assert r["usage"]["completion_tokens"] == 5 and r["choices"][0]["finish_reason"] == "length"
    # top_k 1 is greedy too
    assert reply(stock_engine, prompt, max_tokens=12, temperature=1.0, top_k=1, seed=3) == next(iter(greedy))


def test_reply_stops_at_end_of_turn(stock_engine):
    r = chat(stock_engine, [{"role": "user", "content": "Say only the word yes."}], max_tokens=64, temperature=0)
    assert r["choices"][0]["finish_reason"] == "stop"
    assert r["usage"]["completion_tokens"] < 64
    assert "<|im_end|>" not in r["choices"][0]["message"]["content"]


def test_concurrent_streams_progress_together(stock_engine):
    arrivals: dict[int, list[float]] = {0: [], 1: [], 2: []}

    def timed(i):
        with httpx.stream(
            "POST",
            stock_engine.base_url + "/v1/chat/completions",
            timeout=300,
            json={
                "model": "smollm2",
                "stream": True,
                "max_tokens": 24,
                "temperature": 0,
                "messages": [{"role": "user", "content": f"Count from {i} to {i + 20}."}],
            },
        ) as r:
            for line in r.iter_lines():
                if line.startswith("data: "):
                    arrivals[i].append(time.monotonic())
                    if line == "data: [DONE]":
                        break

    threads = [threading.Thread(target=timed, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(len(a) >= 4 for a in arrivals.values())
    # every lane streamed while the others were still streaming
    assert max(a[1] for a in arrivals.values()) < min(a[-1] for a in arrivals.values())


@pytest.mark.parametrize(
    "body,status,fragment",
    [
        ({"messages": []}, 400, "messages"),
        ({"messages": Q, "model": "other-model"}, 404, "does not exist"),
        ({"messages": Q, "max_tokens": 0}, 400, "max_tokens"),
        ({"messages": Q, "temperature": "hot"}, 400, "temperature"),
        ({"messages": Q, "n": 2}, 400, "n must be 1"),
        ({"messages": [{"role": "user", "content": "word " * 2100}]}, 400, "maximum context length"),
        ({"messages": Q, "continue_final_message": True}, 400, "continue_final_message"),
    ],
)
def test_bad_requests_get_clear_errors(stock_engine, body, status, fragment):
    r = httpx.post(stock_engine.base_url + "/v1/chat/completions", json={"model": "smollm2", **body}, timeout=60)
    assert r.status_code == status and fragment in r.json()["error"]["message"]
    assert reply(stock_engine, Q, max_tokens=2, temperature=0)  # the engine still serves


def test_not_json_is_a_400(stock_engine):
    r = httpx.post(stock_engine.base_url + "/v1/chat/completions", content=b"{not json", timeout=30)
    assert r.status_code == 400
