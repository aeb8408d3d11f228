"""Readers of conversation sets, one per declared `format` (the declarations: source_sets/).

Every reader yields `(where, record)` pairs: `where` names the line and byte offset (or the
file) of the record, and `record` is `{"id", "messages": [{"role", "content"}], ...}` with
roles already mapped to user / assistant / system. `read_set` then keeps or drops each record
for a reason it counts, so the build's metadata and the data card say what was left out.

Formats are `<schema>-<container>`. The schema says what a record is:
- `mini-swe-agent`: a trajectory (`instance_id`, `messages`), as the repacked `agent/` set holds them.
- `messages`: OpenAI-style `{"id", "messages": [{"role", "content"}]}` (ShareGPT's
  `conversations: [{"from", "value"}]` records are read too).
- `questions`: question sets without replies (MT-bench, Spec-Bench: `turns: [str]`); each
  question stays its own user turn and the replies come from the engines (closed loop).
The container says how the file holds its records (containers.py): `jsonl` (one per line),
`json` (one JSON array) or `parquet`; any of them gzip, bz2, xz or zstd compressed, which is
told from the file's first bytes. Two formats name whole files:
- `mini-swe-agent-traj`: mini-swe-agent's own `*.traj.json` files (a file or a folder of them).
- `sharegpt-json`: the ShareGPT JSON list (readers.read_sharegpt_json: a cut end is kept).
A file that the declared format cannot read is refused before anything is read, saying what
the file is and what to declare (`expect_container`).

Tool messages (`role: tool`, ShareGPT `observation` / `function_response`) become user messages,
since the protocol sends tool outputs as user messages (docs/contributors/contracts.md); their number is
reported per set.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from speculator_arena.pools.ingest import containers, file_kinds, readers, source_errors
from speculator_arena.pools.ingest.containers import CONTAINERS, iter_records
from speculator_arena.pools.ingest.readers import text_content
from speculator_arena.pools.ingest.source_errors import SourceFormatError
from speculator_arena.pools.model import SourceConversation

SCHEMAS = ("mini-swe-agent", "messages", "questions")  # what a record is; `sharegpt-json` and `-traj` are whole files
FORMATS = tuple(f"{s}-{c}" for s in SCHEMAS for c in CONTAINERS) + ("mini-swe-agent-traj", "sharegpt-json")


def split_format(fmt: str) -> tuple[str, str]:
    """(schema, container) of a declared format: `messages-json` -> ("messages", "json")."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; formats: {list(FORMATS)}")
    schema, _, container = fmt.rpartition("-")
    return schema, container


def expect_container(path: Path, schema: str, container: str, fmt: str) -> None:
    """Refuse a file that the declared format cannot read, saying what the file is and what to
    declare instead (or what to do with it: fetch, decompress, unpack); nothing is read."""
    seen = file_kinds.look(path)
    if seen.kind in file_kinds.READS[container] and not (container == "parquet" and seen.codec):
        return
    if seen.kind == "empty":
        raise SourceFormatError(path, "whole file", "no records (an empty file)")
    fits = file_kinds.KIND_CONTAINER.get(seen.kind)
    base = "messages" if schema == "sharegpt" else schema
    if fits == "parquet" and seen.codec:
        hint = (
            f"Parquet compresses inside the file and is read from its footer, so it is not read "
            f"{seen.codec}-compressed: decompress the file and declare `format: {base}-parquet`"
        )
    elif fits == "traj":
        hint = (
            "declare `format: mini-swe-agent-traj` (one trajectory per file)"
            if base == "mini-swe-agent"
            else f"one record per file is read only for mini-swe-agent trajectories: put the records one per "
            f"line (`format: {base}-jsonl`) or in a JSON array (`format: {base}-json`)"
        )
    elif fits:
        hint = f"declare `format: {base}-{fits}`"
    else:
        hint = _NO_CONTAINER.get(seen.kind, "unpack it and declare the file inside")
    why = seen.describe() + (f", not {file_kinds.CONTAINER_TEXT[container]}" if fits else "")
    raise SourceFormatError(path, "whole file", why, hint=hint)


_NO_CONTAINER = {
    "lfs-pointer": "fetch the data it points to (`git lfs pull`, or download the file itself)",
    "html": "a web page was saved in place of the file: download the raw file",
    "text": "the readers read JSON Lines, a JSON array or Parquet",
    "broken-stream": "download the file again",
    "utf-16": "re-encode the file as UTF-8 (`iconv -f UTF-16 -t UTF-8`)",
    "lz4-compressed data": "decompress it (`lz4 -d`) and declare the result",
    "binary": "the readers read JSON Lines, a JSON array or Parquet, compressed with gzip, bz2, xz or zstd or not",
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
    """Chat turns to messages (roles mapped by readers.chat_role, tool outputs as user messages);
    a turn without a role or a text is a format error, not a silent drop."""
    if not isinstance(turns, list):
        raise ValueError("`messages` must be a list")
    out, tools = [], 0
    for i, t in enumerate(turns):
        if not isinstance(t, dict):
            raise ValueError(f"message {i} is not an object")
        role_raw = t.get("role", t.get("from"))
        if role_raw is None:
            raise ValueError(f"message {i} has no `role` (or ShareGPT `from`)")
        role = readers.chat_role(role_raw)
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


def _keys(obj) -> str:
    return (
        f"this record's keys: {sorted(obj)[:12]}"
        if isinstance(obj, dict)
        else f"this record is a JSON {type(obj).__name__}"
    )


def _message_record(path: Path, where: str, n: int, obj) -> dict:
    if not isinstance(obj, dict):
        raise SourceFormatError(path, where, "a record must be a JSON object", hint=_keys(obj))
    rid = _rid(obj, f"record{n}")
    turns = obj.get("messages", obj.get("conversations"))
    if turns is None:
        raise SourceFormatError(
            path, f"{where}, record {rid}", "no `messages` (or ShareGPT `conversations`)", hint=_keys(obj)
        )
    try:
        msgs, tools = _chat_messages(turns)
    except ValueError as exc:
        raise SourceFormatError(path, f"{where}, record {rid}", str(exc)) from None
    system = next((m["content"] for m in msgs if m["role"] == "system"), "")
    return {"id": rid, "messages": msgs, "system": system, "tool_messages": tools}


def _question_record(path: Path, where: str, n: int, obj) -> dict:
    rid = _rid(obj, f"record{n}") if isinstance(obj, dict) else "?"
    turns = obj.get("turns") if isinstance(obj, dict) else None
    if not isinstance(turns, list) or not all(isinstance(t, str) for t in turns):
        raise SourceFormatError(path, f"{where}, record {rid}", "`turns` must be a list of texts", hint=_keys(obj))
    msgs = [{"role": "user", "content": text_content(t)} for t in turns if t.strip()]
    return {"id": rid, "messages": msgs, "system": "", "tool_messages": 0, "no_replies": True}


def _swe_record(path: Path, where: str, n: int, obj) -> dict:
    try:
        return readers.trajectory(obj)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        rid = _rid(obj, "?") if isinstance(obj, dict) else "?"
        raise SourceFormatError(path, f"{where}, record {rid}", f"bad trajectory: {exc!r}", hint=_keys(obj)) from None


_RECORD = {"mini-swe-agent": _swe_record, "messages": _message_record, "questions": _question_record}


def _iter_file(path: Path, schema: str, container: str):
    """A file's records in one of the containers (containers.py), each read as its schema says.
    A record without an id is named by its place among the file's records (`record<n>`, from
    1), the same in every container."""
    convert = _RECORD[schema]
    for n, (where, obj) in enumerate(iter_records(path, container), 1):
        yield where, convert(path, where, n, obj)


def traj_files(path: Path) -> list[Path]:
    return sorted(path.rglob("*.traj.json")) if path.is_dir() else [path]


def _iter_swe_traj(path: Path, fmt: str):
    """mini-swe-agent's own trajectory files: one JSON object each (`messages`, `info`,
    `instance_id` or the file's name), read whole within the per-record bound."""
    files = traj_files(path)
    if not files:
        raise SourceFormatError(path, "folder", "no *.traj.json files")
    for f in files:
        expect_container(f, "mini-swe-agent", "traj", fmt)
        raw, codec = containers.read_whole(f)
        rid = source_errors.record_id(raw)
        rid = f.name.removesuffix(".traj.json") if rid == "?" else rid
        of = f" of the {codec}-decompressed text" if codec else ""
        obj = source_errors.parse_record(f, raw, lambda off, of=of: f"byte {off}{of}", rid)
        if isinstance(obj, dict) and not obj.get("instance_id") and not (obj.get("info") or {}).get("instance_id"):
            obj = dict(obj, instance_id=f.name.removesuffix(".traj.json"))
        yield f.name, _swe_record(f, "whole file", 1, obj)


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
    try:
        _read_into(out, path, fmt, family, prefix, name)
    except SourceFormatError as exc:
        raise exc.within(name, fmt, out.records, len(out.conversations)) from None
    if out.tool_messages:
        out.notes.append(f"{out.tool_messages} tool messages sent as user turns (the protocol's tool-output rendering)")
    return out


def _read_into(out: SetRead, path: Path, fmt: str, family: str, prefix: str, name: str) -> None:
    schema, container = split_format(fmt)
    if path.is_file():
        expect_container(path, schema, container, fmt)
    if container == "traj":
        it = _iter_swe_traj(path, fmt)
    elif schema == "sharegpt":
        it = _iter_sharegpt_json(path, out)
    else:
        it = _iter_file(path, schema, container)
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
            out.trajectories.append(dict(rec, set=name))  # the structure fit names the set it lacks values from
        out.conversations.append(SourceConversation(sid, family, turns, name, meta))
    if out.records == 0:
        raise SourceFormatError(path, "whole file", "no records (an empty file or folder)")
    if not out.conversations:
        raise SourceFormatError(
            path, "whole file", f"every one of its {out.records} records was dropped: {dict(out.dropped)}"
        )
