"""Conversation sets declared as data: one small fixture per format (tests/pools/fixtures/,
written for these tests), bad files that fail naming the file, line and record, and the
declaration's checks."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from speculator_arena.pools.ingest.conversations import read_set
from speculator_arena.pools.ingest.readers import SourceFormatError
from speculator_arena.pools.ingest.source_sets import TRACE_ROLES, DeclarationError, load_declarations, load_traces

FIX = Path(__file__).resolve().parent / "fixtures"


def test_mini_swe_agent_jsonl_keeps_system_and_usage():
    r = read_set(FIX / "swe_trajectories.jsonl", "mini-swe-agent-jsonl", "agent", "fx", "swe fixture")
    assert r.records == 4 and len(r.conversations) == 4 and not r.dropped
    c = r.conversations[0]
    assert c.source_id == "fx:fixture__rows-0" and c.family == "agent" and c.meta["system"].startswith("You are")
    assert [m["role"] for m in c.messages][:3] == ["user", "assistant", "user"]
    assert len(c.user_turns()) == 4  # the task and three tool outputs
    assert r.trajectories[0]["messages"][2]["usage"]["prompt_tokens"] == 900  # for the structure fit


def test_mini_swe_agent_traj_files_send_tool_messages_as_user_turns():
    r = read_set(FIX / "traj", "mini-swe-agent-traj", "agent", "fx", "traj fixture")
    assert sorted(c.source_id for c in r.conversations) == [f"fx:fixture__cols-{i}" for i in (4, 5, 6)]
    assert r.tool_messages == sum(3 + i % 3 for i in (4, 5, 6))
    assert all(m["role"] in ("user", "assistant") for c in r.conversations for m in c.messages)
    assert "tool messages sent as user turns" in r.notes[0]


def test_messages_jsonl_tool_calls_tool_outputs_and_drops():
    r = read_set(FIX / "messages.jsonl", "messages-jsonl", "chat", "air", "airline fixture")
    assert r.records == 7 and len(r.conversations) == 6
    assert dict(r.dropped) == {"no user turn": 1}
    c = r.conversations[0]
    assert [m["role"] for m in c.messages] == ["user", "assistant", "user", "assistant", "user", "assistant"]
    assert "get_reservation" in c.messages[1]["content"]  # the tool call, as the assistant's text
    assert '"reservation": "ABC023"' in c.messages[2]["content"]  # the tool output, as a user turn
    assert c.messages[3]["content"].startswith("I found reservation")  # a content list's text parts
    assert r.tool_messages == 6 and c.meta["system"] == "You are an airline support agent."


def test_sharegpt_json_merges_segments():
    r = read_set(FIX / "sharegpt.json", "sharegpt-json", "chat", "sg", "sharegpt fixture")
    assert len(r.conversations) == 5
    assert [m["role"] for m in r.conversations[0].messages] == ["user", "assistant", "user", "assistant"]


def test_questions_keep_each_turn_as_a_turn():
    r = read_set(FIX / "questions.jsonl", "questions-jsonl", "chat", "mt", "questions fixture")
    assert len(r.conversations) == 12
    c = r.conversations[0]
    assert len(c.user_turns()) == 2 and not any(m["role"] == "assistant" for m in c.messages)
    assert c.meta["no_replies"] is True
    from speculator_arena.pools.builder.candidates import eligible

    assert eligible(c)  # the engines reply, closed loop


def _bad(tmp_path: Path, kind: str) -> tuple[Path, str, str]:
    """(file, format, what the error must say) for each kind of broken input."""
    src = (FIX / "messages.jsonl").read_bytes().splitlines(keepends=True)
    p = tmp_path / f"{kind}.jsonl"
    if kind == "truncated":
        p.write_bytes(b"".join(src[:2]) + src[2][: len(src[2]) // 2])
        return p, "messages-jsonl", "line 3 (byte "
    if kind == "empty":
        p.write_bytes(b"")
        return p, "messages-jsonl", "no records"
    if kind == "missing-role":
        rec = json.loads(src[1])
        del rec["messages"][1]["role"]
        p.write_bytes(src[0] + json.dumps(rec).encode() + b"\n")
        return p, "messages-jsonl", "line 2 (byte"
    if kind == "invalid-utf8":
        p.write_bytes(src[0] + src[1].replace(b"flight booking", b"flight \xff\xfe booking"))
        return p, "messages-jsonl", "not UTF-8"
    if kind == "huge":
        rec = json.loads(src[0])
        rec["messages"][1]["content"] = "x" * 5000
        p.write_bytes(src[1] + json.dumps(rec).encode() + b"\n")
        return p, "messages-jsonl", "larger than 4096 bytes"
    if kind == "truncated-traj":
        d = tmp_path / "traj"
        d.mkdir()
        text = (FIX / "traj" / "fixture__cols-4.traj.json").read_text()
        (d / "fixture__cols-4.traj.json").write_text(text[: len(text) // 2])
        return d / "fixture__cols-4.traj.json", "mini-swe-agent-traj", "not JSON"
    raise KeyError(kind)


RECORD = {
    "truncated": "air-2",
    "missing-role": "air-1",
    "invalid-utf8": "air-1",
    "huge": "air-0",
    "truncated-traj": "fixture__cols-4",
}


@pytest.mark.parametrize("kind", ["truncated", "empty", "missing-role", "invalid-utf8", "huge", "truncated-traj"])
def test_bad_input_names_file_line_and_record(tmp_path, monkeypatch, kind):
    monkeypatch.setenv("ARENA_MAX_RECORD_BYTES", "4096")
    path, fmt, says = _bad(tmp_path, kind)
    with pytest.raises(SourceFormatError) as exc:
        read_set(
            path.parent if fmt == "mini-swe-agent-traj" else path, fmt, "chat" if "jsonl" in fmt else "agent", "x", kind
        )
    msg = str(exc.value)
    assert str(path) in msg and says in msg, msg
    if kind in RECORD:
        assert f"record {RECORD[kind]}" in msg, msg


def test_cut_by_characters_costs_what_the_cut_costs(shared_data):
    from speculator_arena.pools.builder.tokens import TokenCounter, target_tokenizer

    counter = TokenCounter(target_tokenizer("local-smollm2", shared_data))
    real = (shared_data / "agent" / "trajectories_200.jsonl").read_text(encoding="utf-8")[:300_000]
    cut = counter.cut(real, 700)
    ids = counter.tok(real, add_special_tokens=False)["input_ids"]  # the cut of the whole text, as before
    assert cut == counter.tok.decode(ids[:700], skip_special_tokens=True) and counter.one(cut) <= 700
    huge = real * 180  # ~54 MB, one tool output
    t0 = time.perf_counter()
    assert counter.cut(huge, 700) == cut
    assert time.perf_counter() - t0 < 2.0


def _decl(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "sets.yaml"
    p.write_text(text)
    return p


def test_one_declaration_extends_the_default(tmp_path):
    p = _decl(
        tmp_path,
        f"""extends: default
sets:
  - name: fixture questions
    path: {FIX / "questions.jsonl"}
    format: questions-jsonl
    family: chat
    id_prefix: mtq
    license: Apache-2.0
    weight: 0.3
""",
    )
    decls = load_declarations(p)
    assert [d.name for d in decls][-1] == "fixture questions" and len(decls) == 4
    assert decls[-1].weight == 0.3 and decls[0].path == "agent/trajectories_200.jsonl"


@pytest.mark.parametrize(
    "body,says",
    [
        ("sets:\n  - {name: a, path: x, format: csv, family: chat, id_prefix: a, license: MIT}\n", "unknown format"),
        ("sets:\n  - {name: a, path: x, format: messages-jsonl, family: chat, id_prefix: a}\n", "missing ['license']"),
        ("sets:\n  - {name: a, format: messages-jsonl, family: chat, id_prefix: a, license: MIT}\n", "exactly one of"),
        (
            "sets:\n  - {name: a, path: x, format: messages-jsonl, family: chat, id_prefix: a, license: MIT, weight: 0.7}\n"
            "  - {name: b, path: y, format: messages-jsonl, family: chat, id_prefix: b, license: MIT, weight: 0.6}\n",
            "add up to 1.3",
        ),
        (
            "sets:\n  - {name: a, path: x, format: messages-jsonl, family: bots, id_prefix: a, license: MIT}\n",
            "family must be",
        ),
        (
            "sets:\n  - {name: a, path: x, format: messages-jsonl, family: chat, id_prefix: a, license: MIT, colour: red}\n",
            "unknown keys",
        ),
    ],
)
def test_bad_declarations_name_the_file_and_set(tmp_path, body, says):
    p = _decl(tmp_path, body)
    with pytest.raises(DeclarationError) as exc:
        load_declarations(p)
    assert str(p) in str(exc.value) and says in str(exc.value), str(exc.value)


def test_weights_give_a_small_set_its_share(tmp_path, shared_data):
    """A set of 12 questions with weight 0.5 takes half the chat candidates' first places,
    where by its size it would be swamped by ShareGPT's 9,439 conversations."""
    from speculator_arena.pools.builder.candidates import ordered_candidates
    from speculator_arena.pools.builder.context import BuildContext

    p = _decl(
        tmp_path,
        f"""extends: default
sets:
  - {{name: fixture questions, path: {FIX / "questions.jsonl"}, format: questions-jsonl, family: chat,
     id_prefix: mtq, license: Apache-2.0, weight: 0.5}}
""",
    )
    ctx = BuildContext("local-smollm2", shared_data, tmp_path / "home", sources_file=p)
    cands, _ = ordered_candidates(ctx, "dev", None)
    chats = [c for c in cands if c.family == "chat"]
    public_questions = sum(c.source_id.startswith("mtq:") for c in chats)
    assert 0 < public_questions < 12
    head = chats[: 2 * public_questions]
    assert sum(c.source_id.startswith("mtq:") for c in head) == public_questions
    info = {i.name: i for i in ctx.sources.info}
    assert info["fixture questions"].used == 12 and info["fixture questions"].weight == 0.5


@pytest.mark.parametrize("task", ["local-smollm2", "qwen3-8b"])
def test_committed_data_card_agrees_with_the_protocol(task, shared_data):
    """data_cards/ is regenerated with `arena pools build --task T --write-repo-card`; a card
    whose window, model, busy constants or source digests differ from today's is stale."""
    from speculator_arena.pools.builder.context import BuildContext
    from speculator_arena.pools.builder.datacard import stale_fields

    repo = Path(__file__).resolve().parents[2]
    card = json.loads((repo / "data_cards" / f"{task}.json").read_text(encoding="utf-8"))
    ctx = BuildContext(task, shared_data, repo / "no-home")
    assert stale_fields(card, ctx) == []
    # The check is not vacuous: the old card's cap of 48 is caught.
    old = json.loads(json.dumps(card))
    old["window"]["max_tokens_cap"] = 48
    assert any("max_tokens_cap" in f for f in stale_fields(old, ctx))


def test_the_default_declares_one_trace_per_role():
    traces = load_traces()
    assert [t.role for t in traces] == list(TRACE_ROLES)
    assert all(t.path.startswith("traces/") and t.license for t in traces), traces


def test_a_declared_trace_replaces_the_defaults_for_its_role_and_the_build_reads_it(tmp_path, shared_data):
    """Traces are data as the sets are (issue 34): a declaration names another Azure code trace
    (here the first 500 rows of the shipped one) and the sources read it, with its provenance;
    the roles it does not name keep the default's."""
    from speculator_arena.pools.ingest.sources import load_sources

    rows = (shared_data / "traces" / "AzureLLMInferenceTrace_code.csv").read_text().splitlines()
    mine = tmp_path / "azure_code_500.csv"
    mine.write_text("\n".join(rows[:501]) + "\n")
    p = _decl(
        tmp_path,
        f"""sets:
  - {{name: fixture questions, path: {FIX / "questions.jsonl"}, format: questions-jsonl, family: chat,
     id_prefix: mtq, license: Apache-2.0}}
traces:
  - {{name: "Azure code, first 500", role: azure_code, path: {mine}, format: azure-csv, license: CC-BY-4.0,
     license_note: a test's cut}}
""",
    )
    src = load_sources(shared_data, declaration=p)
    assert len(src.azure_code) == 500
    info = {i.name: i for i in src.info}
    assert info["Azure code, first 500"].path == str(mine) and info["Azure code, first 500"].records == 500
    assert info["Azure code, first 500"].license == "CC-BY-4.0; a test's cut"
    assert "Azure LLM inference 2023, code" not in info  # replaced, not added
    default = {t.role: t.name for t in load_traces()}
    assert info[default["mooncake"]].records == len(src.mooncake) > 0  # kept from the default
    assert info[default["azure_conv"]].license.startswith("CC-BY-4.0 (LICENSE")


@pytest.mark.parametrize(
    "body,says",
    [
        ("traces:\n  - {name: t, role: weka, path: x, format: azure-csv, license: MIT}\n", "unknown role"),
        ("traces:\n  - {name: t, role: azure_code, path: x, format: mooncake-jsonl, license: MIT}\n", "is read as"),
        ("traces:\n  - {name: t, role: azure_code, path: x, format: azure-csv}\n", "missing ['license']"),
        (
            "traces:\n  - {name: t, role: azure_code, path: x, format: azure-csv, license: MIT}\n"
            "  - {name: u, role: azure_code, path: y, format: azure-csv, license: MIT}\n",
            "two traces for the role",
        ),
    ],
)
def test_bad_trace_declarations_name_the_file_and_trace(tmp_path, body, says):
    p = _decl(
        tmp_path,
        "sets:\n  - {name: a, path: x, format: messages-jsonl, family: chat, id_prefix: a, license: MIT}\n" + body,
    )
    with pytest.raises(DeclarationError) as exc:
        load_traces(p)
    assert str(p) in str(exc.value) and says in str(exc.value), str(exc.value)
