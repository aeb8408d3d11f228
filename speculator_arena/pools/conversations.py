"""Readers of conversation sets, one per declared `format` (see source_sets.py).

Every reader yields `(where, record)` pairs: `where` names the line and byte offset (or the
file) of the record, and `record` is `{"id", "messages": [{"role", "content"}], ...}` with
roles already mapped to user / assistant / system. `read_set` then keeps or drops each record
for a reason it counts, so the build's metadata and the data card say what was left out.

Formats:
- `mini-swe-agent-jsonl`: the repacked trajectories, one per line (`instance_id`, `messages`).
- `mini-swe-agent-traj`: mini-swe-agent's own `*.traj.json` files (a file or a folder of them).
- `messages-jsonl`: OpenAI-style `{"id", "messages": [{"role", "content"}]}` per line (ShareGPT's
  `conversations: [{"from", "value"}]` lines are read too).
- `sharegpt-json`: the ShareGPT JSON list (readers.read_sharegpt_json: a cut end is kept).
- `questions-jsonl`: question sets without replies (MT-bench, Spec-Bench: `turns: [str]`); each
  question stays its own user turn and the replies come from the engines (closed loop).

Tool messages (`role: tool`, ShareGPT `observation` / `function_response`) become user messages,
since the protocol sends tool outputs as user messages (docs/contracts.md); their number is
reported per set.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from speculator_arena.pools import readers
from speculator_arena.pools.model import SourceConversation
from speculator_arena.pools.readers import SourceFormatError, iter_jsonl, text_content

FORMATS = ("mini-swe-agent-jsonl", "mini-swe-agent-traj", "messages-jsonl", "sharegpt-json", "questions-jsonl")

_ROLE = {
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


@dataclass
class SetRead:
    """What one declared set gave: its conversations, the raw trajectories (agent sets, for the
    structure fit), and every record it read, kept or dropped with the reason."""

    conversations: list[SourceConversation]
    trajectories: list[dict]
    records: int
    dropped: Counter = field(default_factory=Counter)
    tool_messages: int = 0
    truncation: str | None = None
    notes: list[str] = field(default_factory=list)


def _rid(obj: dict, fallback: str) -> str:
    for k in ("id", "instance_id", "question_id", "conversation_id"):
        if obj.get(k) not in (None, ""):
            return str(obj[k])
    return fallback


def _chat_messages(turns: list) -> tuple[list[dict], int]:
    """Chat turns to messages (roles mapped, tool outputs as user messages); a turn without a
    role or a text is a format error, not a silent drop."""
    if not isinstance(turns, list):
        raise ValueError("`messages` must be a list")
    out, tools = [], 0
    for i, t in enumerate(turns):
        if not isinstance(t, dict):
            raise ValueError(f"message {i} is not an object")
        role_raw = t.get("role", t.get("from"))
        if role_raw is None:
            raise ValueError(f"message {i} has no `role` (or ShareGPT `from`)")
        role = _ROLE.get(str(role_raw).lower())
        if role is None:
            raise ValueError(f"message {i} has the unknown role {role_raw!r}")
        raw = t.get("content", t.get("value"))
        content = text_content(raw)
        if content is None and role == "assistant" and t.get("tool_calls"):
            content = json.dumps(t["tool_calls"], ensure_ascii=False)
        if content is None:
            raise ValueError(f"message {i} ({role_raw}) has no text content")
        if role == "tool":
            tools += 1
            role = "user"
        out.append({"role": role, "content": content})
    return out, tools


def _iter_messages_jsonl(path: Path):
    for lineno, start, obj in iter_jsonl(path):
        where = f"line {lineno} (byte {start})"
        if not isinstance(obj, dict):
            raise SourceFormatError(path, where, "a line must be a JSON object")
        rid = _rid(obj, f"line{lineno}")
        turns = obj.get("messages", obj.get("conversations"))
        if turns is None:
            raise SourceFormatError(path, f"{where}, record {rid}", "no `messages` (or ShareGPT `conversations`)")
        try:
            msgs, tools = _chat_messages(turns)
        except ValueError as exc:
            raise SourceFormatError(path, f"{where}, record {rid}", str(exc)) from None
        system = next((m["content"] for m in msgs if m["role"] == "system"), "")
        yield where, {"id": rid, "messages": msgs, "system": system, "tool_messages": tools}


def _iter_questions(path: Path):
    for lineno, start, obj in iter_jsonl(path):
        where = f"line {lineno} (byte {start})"
        rid = _rid(obj, f"line{lineno}") if isinstance(obj, dict) else "?"
        turns = obj.get("turns") if isinstance(obj, dict) else None
        if not isinstance(turns, list) or not all(isinstance(t, str) for t in turns):
            raise SourceFormatError(path, f"{where}, record {rid}", "`turns` must be a list of texts")
        msgs = [{"role": "user", "content": text_content(t)} for t in turns if t.strip()]
        yield where, {"id": rid, "messages": msgs, "system": "", "tool_messages": 0, "no_replies": True}


def _iter_swe_jsonl(path: Path):
    for lineno, start, obj in iter_jsonl(path):
        where = f"line {lineno} (byte {start})"
        try:
            t = readers.trajectory(obj)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            rid = _rid(obj, "?") if isinstance(obj, dict) else "?"
            raise SourceFormatError(path, f"{where}, record {rid}", f"bad trajectory: {exc!r}") from None
        yield where, t


def traj_files(path: Path) -> list[Path]:
    return sorted(path.rglob("*.traj.json")) if path.is_dir() else [path]


def _iter_swe_traj(path: Path):
    """mini-swe-agent's own trajectory files: one JSON object each (`messages`, `info`,
    `instance_id` or the file's name), read whole within the per-record bound."""
    limit = readers.max_record_bytes()
    files = traj_files(path)
    if not files:
        raise SourceFormatError(path, "folder", "no *.traj.json files")
    for f in files:
        size = f.stat().st_size
        if size > limit:
            with open(f, "rb") as fh:
                head = fh.read(65536)
            raise SourceFormatError(
                f,
                f"whole file ({size} bytes), record {readers.record_id(head)}",
                f"record larger than {limit} bytes (ARENA_MAX_RECORD_BYTES); not read",
            )
        raw = f.read_bytes()
        rid = readers.record_id(raw)
        rid = f.name.removesuffix(".traj.json") if rid == "?" else rid
        obj = readers.parse_record(f, raw, lambda off: f"byte {off}", rid)
        if isinstance(obj, dict) and not obj.get("instance_id") and not (obj.get("info") or {}).get("instance_id"):
            obj = dict(obj, instance_id=f.name.removesuffix(".traj.json"))
        try:
            t = readers.trajectory(obj)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise SourceFormatError(f, f"whole file, record {rid}", f"bad trajectory: {exc!r}") from None
        yield f.name, t


def _iter_sharegpt_json(path: Path, result: SetRead):
    res = readers.read_sharegpt_json(path)
    result.truncation = res.truncation
    result.notes.extend(res.notes)
    for i, rec in enumerate(res.records):
        yield f"conversation {i}", dict(rec, system="", tool_messages=0, normalized=True)


def read_set(path: Path, fmt: str, family: str, prefix: str, name: str) -> SetRead:
    """Read one declared set: every record kept as a `SourceConversation` or dropped with a
    counted reason. A set that yields no conversation at all is an error naming the reasons."""
    out = SetRead([], [], 0)
    if fmt == "mini-swe-agent-jsonl":
        it = _iter_swe_jsonl(path)
    elif fmt == "mini-swe-agent-traj":
        it = _iter_swe_traj(path)
    elif fmt == "messages-jsonl":
        it = _iter_messages_jsonl(path)
    elif fmt == "questions-jsonl":
        it = _iter_questions(path)
    elif fmt == "sharegpt-json":
        it = _iter_sharegpt_json(path, out)
    else:
        raise ValueError(f"unknown format {fmt!r}; formats: {FORMATS}")
    seen: set[str] = set()
    for _where, rec in it:
        out.records += 1
        out.tool_messages += rec.get("tool_messages", 0)
        sid = f"{prefix}:{rec['id']}"
        if family == "agent":
            msgs = rec["messages"]
            system = next((m["content"] for m in msgs if m["role"] == "system"), "")
            turns = [m for m in msgs if m["role"] != "system"]
            meta = {"system": system, "set": name}
        else:
            if rec.get("no_replies") or rec.get("normalized"):
                turns = [m for m in rec["messages"] if m["role"] != "system"]
            else:
                # ShareGPT's normalization: empties and system dropped, same-role runs joined
                turns = readers.normalize_conversation(rec["id"], rec["messages"])["messages"]
            meta = {"set": name, "no_replies": bool(rec.get("no_replies"))}
            if rec.get("system"):
                meta["system"] = rec["system"]
        if not any(m["role"] == "user" for m in turns):
            out.dropped["no user turn"] += 1
            continue
        if sid in seen:
            out.dropped["duplicate id within the set"] += 1
            continue
        seen.add(sid)
        if family == "agent":
            out.trajectories.append(rec)
        out.conversations.append(SourceConversation(sid, family, turns, name, meta))
    if out.records == 0:
        raise SourceFormatError(path, "whole file", "no records (an empty file or folder)")
    if not out.conversations:
        raise SourceFormatError(
            path, "whole file", f"every one of its {out.records} records was dropped: {dict(out.dropped)}"
        )
    if out.tool_messages:
        out.notes.append(f"{out.tool_messages} tool messages sent as user turns (the protocol's tool-output rendering)")
    return out
