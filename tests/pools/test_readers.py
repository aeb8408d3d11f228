"""Readers: real files read whole, broken files fail clearly and keep what was read."""

from __future__ import annotations

import json

import pytest

from speculator_arena.pools.ingest import app_readers, readers, trace_readers
from speculator_arena.pools.ingest.conversations import read_set
from speculator_arena.pools.ingest.readers import SourceFormatError


def test_sharegpt_package_file_is_truncated_and_every_complete_record_is_kept():
    res = readers.read_sharegpt_json(readers.sharegpt_package_file())
    assert res.truncation and "cut mid-record" in res.truncation
    # The shared data README counts 17,671 complete segments in 9,460 conversations.
    assert "17671 complete segments" in res.notes[0]
    assert len(res.records) == 9460
    assert all(c["messages"][0]["role"] == "user" for c in res.records if c["messages"])


def test_sharegpt_corruption_in_the_middle_raises_with_partial(tmp_path):
    good = {"id": "a_0", "conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello"}]}
    p = tmp_path / "sg.json"
    p.write_text(
        "[" + json.dumps(good) + ', {"id": "b_0", "conversations": [BROKEN]}, ' + json.dumps(good | {"id": "c_0"}) + "]"
    )
    with pytest.raises(SourceFormatError) as exc:
        readers.read_sharegpt_json(p)
    assert len(exc.value.partial) == 1 and exc.value.partial[0]["id"] == "a"
    assert "sg.json" in str(exc.value)


def test_sharegpt_cut_at_end_is_reported_not_raised(tmp_path):
    good = {"id": "a_0", "conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello"}]}
    p = tmp_path / "sg.json"
    p.write_text(
        "["
        + json.dumps(good)
        + ", "
        + json.dumps(good | {"id": "a_1"})
        + ', {"id": "z_0", "conversations": [{"from": "human", "value": "cut he'
    )
    res = readers.read_sharegpt_json(p)
    assert res.truncation and len(res.records) == 1  # two segments of one conversation
    assert [m["content"] for m in res.records[0]["messages"]] == ["hi", "hello", "hi", "hello"]


def test_jsonl_readers_keep_records_before_a_broken_line(tmp_path, shared_data):
    src = (shared_data / "traces" / "mooncake_conversation_trace.jsonl").read_text(encoding="utf-8").splitlines()[:3]
    p = tmp_path / "mooncake.jsonl"
    p.write_text("\n".join(src[:2] + ['{"id": "x", "timestamp": [oops'] + src[2:]) + "\n")
    with pytest.raises(SourceFormatError) as exc:
        trace_readers.read_mooncake(p)
    assert exc.value.where.startswith("line 3 (byte ") and exc.value.where.endswith("record x")
    assert len(exc.value.partial) == 2 and str(p) in str(exc.value)


def test_real_trajectories_traces_apps_probes(shared_data):
    assert len(readers.read_agent_trajectories(shared_data / "agent" / "trajectories_200.jsonl")) == 200
    mc = trace_readers.read_mooncake(shared_data / "traces" / "mooncake_conversation_trace.jsonl")
    assert len(mc) == 12031 and mc.records[0]["hash_ids"]
    az = trace_readers.read_azure_csv(shared_data / "traces" / "AzureLLMInferenceTrace_conv.csv")
    assert len(az) == 19366 and az.records[1]["t"] > az.records[0]["t"]
    apps = {a.name: a for a in app_readers.read_apps(shared_data / "apps").records}
    assert {"mini-swe-agent", "swe-agent", "openhands"} <= set(apps)
    assert apps["swe-agent"].tools and all(t["type"] == "function" for t in apps["swe-agent"].tools)
    assert "{{" not in apps["openhands"].system_prompt
    assert len(readers.read_spec_bench(shared_data / "probes" / "spec_bench_question.jsonl")) == 480


def test_azure_bad_row(tmp_path):
    p = tmp_path / "az.csv"
    p.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,374,44\n2023-11-16 18:15:47.1,abc,4\n"
    )
    with pytest.raises(SourceFormatError) as exc:
        trace_readers.read_azure_csv(p)
    assert exc.value.where == "line 3" and len(exc.value.partial) == 1


def _cc_trace(i):
    return {
        "id": f"t{i}",
        "block_size": 64,
        "tool_tokens": 900,
        "system_tokens": 1200,
        "requests": [
            {
                "t": 0.0,
                "type": "main",
                "model": "m",
                "in": 3000,
                "out": 120,
                "hash_ids": [1, 2, 3],
                "input_types": [],
                "output_types": [],
                "stop": "tool_use",
                "api_time": 2.0,
                "think_time": 0.0,
            },
            {
                "requests": [
                    {
                        "t": 1.0,
                        "type": "subagent",
                        "model": "m",
                        "in": 800,
                        "out": 50,
                        "hash_ids": [9],
                        "think_time": 0.5,
                    }
                ]
            },
            {
                "t": 5.0,
                "type": "main",
                "model": "m",
                "in": 3400,
                "out": 80,
                "hash_ids": [1, 2, 3, 4],
                "api_time": 1.5,
                "think_time": 3.0,
            },
        ],
    }


def test_cc_traces_weka_format_list_and_jsonl(tmp_path):
    p = tmp_path / "cc.json"
    p.write_text(json.dumps([_cc_trace(0), _cc_trace(1)]))
    res = trace_readers.read_cc_traces(p)
    assert len(res) == 2
    reqs = res.records[0]["requests"]
    assert [r["depth"] for r in reqs] == [0, 1, 0] and reqs[2]["think_time"] == 3.0
    q = tmp_path / "cc.jsonl"
    bad = _cc_trace(2)
    del bad["requests"][2]["out"]
    q.write_text(json.dumps(_cc_trace(0)) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(SourceFormatError) as exc:
        trace_readers.read_cc_traces(q)
    assert exc.value.where == "line 2 (byte 519), record t2" and len(exc.value.partial) == 1


def test_sharegpt_cut_inside_a_multibyte_character(tmp_path):
    good = {"id": "a_0", "conversations": [{"from": "human", "value": "café"}, {"from": "gpt", "value": "oui"}]}
    p = tmp_path / "sg.json"
    p.write_bytes(
        (
            "["
            + json.dumps(good, ensure_ascii=False)
            + ', {"id": "b_0", "conversations": [{"from": "human", "value": "caf'
        ).encode()
        + "é".encode()[:1]
    )
    res = readers.read_sharegpt_json(p)
    assert res.truncation and len(res.records) == 1 and res.records[0]["messages"][0]["content"] == "café"


# One turn of every role name a chat source uses, in an order that shows each mapping: a tool
# output after an assistant turn opens a user turn, two in a row join, a system turn is dropped.
EVERY_ROLE_NAME = ["human", "gpt", "observation", "function_call", "tool", "ipython", "system", "bing", "user"]
EVERY_ROLE_NAME += ["chatgpt", "function_response", "bard", "assistant"]


def test_one_role_map_for_every_chat_reader(tmp_path):
    """ShareGPT's role names are mapped once (readers.ROLES): the ShareGPT JSON list and a declared
    `messages` set read the same turns as the same messages, tool outputs as user turns (the
    protocol sends them so), function calls as the assistant's."""
    assert readers.ROLES == {
        "human": "user",
        "user": "user",
        "gpt": "assistant",
        "chatgpt": "assistant",
        "bing": "assistant",
        "bard": "assistant",
        "assistant": "assistant",
        "system": "system",
        "tool": "tool",
        "observation": "tool",
        "function_response": "tool",
        "ipython": "tool",
        "function_call": "assistant",
    }
    assert sorted(EVERY_ROLE_NAME) == sorted(readers.ROLES)
    assert readers.chat_role("Human") == "user" and readers.chat_role("narrator") is None
    turns = [{"from": name, "value": name} for name in EVERY_ROLE_NAME]
    want = [
        {"role": "user", "content": "human"},
        {"role": "assistant", "content": "gpt"},
        {"role": "user", "content": "observation"},
        {"role": "assistant", "content": "function_call"},
        {"role": "user", "content": "tool\n\nipython"},
        {"role": "assistant", "content": "bing"},
        {"role": "user", "content": "user"},
        {"role": "assistant", "content": "chatgpt"},
        {"role": "user", "content": "function_response"},
        {"role": "assistant", "content": "bard\n\nassistant"},
    ]
    sharegpt = tmp_path / "sg.json"
    sharegpt.write_text(json.dumps([{"id": "c", "conversations": turns}]))
    assert readers.read_sharegpt_json(sharegpt).records[0]["messages"] == want
    declared = tmp_path / "set.jsonl"
    declared.write_text(json.dumps({"id": "c", "conversations": turns}) + "\n")
    read = read_set(declared, "messages-jsonl", "chat", "x", "every role")
    assert read.conversations[0].messages == want and read.tool_messages == 4
