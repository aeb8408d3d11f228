"""Conversation sets declared as data: which files a task's pools draw their text from.

Why data and not code: adding a set of trajectories or conversations (another agent run, a
question set, a vendor's chats) should take one declaration and `arena pools build --task T`,
and the data card must name each set as declared. The default declaration (`default.yaml`
beside this file) reproduces the pools the project shipped with. A declaration file names its
sets, or extends another (`extends: default`) and adds to it:

    extends: default
    sets:
      - name: MT-bench questions
        path: /data/mt_bench/question.jsonl
        format: questions-jsonl
        family: chat
        id_prefix: mtbench
        license: Apache-2.0
        weight: 0.3

The same file declares the traces the pools' structure is fitted from (`traces:`, one per
`role`: the multi-turn sessions of `mooncake`, the prompt and reply sizes of `azure_conv` and
`azure_code`); a file that extends another replaces a trace by naming its role again:

    extends: default
    traces:
      - name: Azure LLM inference 2024, code
        role: azure_code
        path: /data/azure2024/code.csv
        format: azure-csv
        license: CC-BY-4.0

The file used: `arena pools build --sources FILE`, else `ARENA_POOL_SOURCES`, else the default.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import yaml

from speculator_arena import settings
from speculator_arena.errors import ArenaError
from speculator_arena.pools.ingest.conversations import FORMATS

DEFAULT = Path(__file__).with_name("default.yaml")
FAMILIES = ("agent", "chat")
_KEYS = {"name", "path", "package", "format", "family", "id_prefix", "origin", "commit_from", "license", "weight"}
# a trace's role -> the format its file is read in (pools/ingest/trace_readers.py)
TRACE_ROLES = {"mooncake": "mooncake-jsonl", "azure_conv": "azure-csv", "azure_code": "azure-csv"}
_TRACE_KEYS = {
    "name",
    "role",
    "path",
    "format",
    "origin",
    "commit_from",
    "commit_near",
    "license",
    "license_files",
    "license_note",
}


class DeclarationError(ValueError, ArenaError):
    """A declaration file that does not say what to read (names the file and the set)."""


@dataclass(frozen=True)
class SetDeclaration:
    name: str
    format: str
    family: str
    id_prefix: str
    license: str
    path: str = ""
    package: str = ""
    origin: str = ""
    commit_from: str = ""
    weight: float | None = None


@dataclass(frozen=True)
class TraceDeclaration:
    """A trace file and its provenance; the data card's license line is `license`, then the
    license files `license_files` matches in the trace's folder (in parentheses), then
    `license_note` (after a semicolon)."""

    name: str
    role: str
    path: str
    format: str
    license: str
    origin: str = ""
    commit_from: str = ""
    commit_near: str = ""
    license_files: str = ""
    license_note: str = ""


def declaration_file(given: str | os.PathLike | None = None) -> Path:
    return Path(given or settings.get("ARENA_POOL_SOURCES") or DEFAULT).resolve()


def _check_keys(item, where: str, what: str, keys: set, required: tuple) -> None:
    """An entry is a mapping of known keys with every required one given (sets and traces alike)."""
    if not isinstance(item, dict):
        raise DeclarationError(f"{where}: a {what} must be a mapping")
    unknown = set(item) - keys
    if unknown:
        raise DeclarationError(f"{where}: unknown keys {sorted(unknown)}; keys: {sorted(keys)}")
    missing = [k for k in required if not item.get(k)]
    if missing:
        raise DeclarationError(f"{where}: missing {missing}")


def _parse_set(item, where: str) -> SetDeclaration:
    _check_keys(item, where, "set", _KEYS, ("name", "format", "family", "id_prefix", "license"))
    if bool(item.get("path")) == bool(item.get("package")):
        raise DeclarationError(f"{where}: give exactly one of `path` and `package`")
    if item["format"] not in FORMATS:
        raise DeclarationError(f"{where}: unknown format {item['format']!r}; formats: {list(FORMATS)}")
    if item["family"] not in FAMILIES:
        raise DeclarationError(f"{where}: family must be one of {FAMILIES}, got {item['family']!r}")
    w = item.get("weight")
    if w is not None and (not isinstance(w, (int, float)) or isinstance(w, bool) or w <= 0):
        raise DeclarationError(f"{where}: weight must be a positive number, got {w!r}")
    return SetDeclaration(
        **{k: (str(v) if k not in ("weight",) else (float(v) if v is not None else None)) for k, v in item.items()}
    )


def _parse_trace(item, where: str) -> TraceDeclaration:
    _check_keys(item, where, "trace", _TRACE_KEYS, ("name", "role", "path", "format", "license"))
    if item["role"] not in TRACE_ROLES:
        raise DeclarationError(f"{where}: unknown role {item['role']!r}; roles: {list(TRACE_ROLES)}")
    if item["format"] != TRACE_ROLES[item["role"]]:
        raise DeclarationError(
            f"{where}: a {item['role']} trace is read as {TRACE_ROLES[item['role']]!r}, not {item['format']!r}"
        )
    return TraceDeclaration(**{k: str(v) for k, v in item.items()})


def _read(path: str | os.PathLike | None, _seen: tuple) -> tuple[Path, dict]:
    p = declaration_file(path)
    if p in _seen:
        raise DeclarationError(f"{p}: `extends` loops back to itself")
    try:
        doc = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise DeclarationError(f"{p}: cannot read the declaration: {exc}") from exc
    if not isinstance(doc, dict) or set(doc) - {"extends", "sets", "traces"}:
        raise DeclarationError(f"{p}: a declaration holds `sets:` and `traces:` (and optionally `extends:`)")
    return p, doc


def _base(p: Path, doc: dict) -> Path | None:
    base = doc.get("extends")
    return None if not base else DEFAULT if base == "default" else (p.parent / base)


def load_traces(path: str | os.PathLike | None = None, _seen: tuple = ()) -> list[TraceDeclaration]:
    """The traces a declaration file names, one per role: those of the file it extends (a file
    that extends none: the default's), each replaced by the trace this file names for its role."""
    p, doc = _read(path, _seen)
    base = _base(p, doc) or (DEFAULT if p != DEFAULT.resolve() else None)
    by_role = {t.role: t for t in load_traces(base, _seen + (p,))} if base else {}
    items = doc.get("traces") or []
    if not isinstance(items, list):
        raise DeclarationError(f"{p}: `traces` must be a list")
    mine: set[str] = set()
    for i, item in enumerate(items):
        t = _parse_trace(item, f"{p}: trace {i} ({item.get('name', '?') if isinstance(item, dict) else '?'})")
        if t.role in mine:
            raise DeclarationError(f"{p}: two traces for the role {t.role!r}")
        mine.add(t.role)
        by_role[t.role] = t
    missing = [r for r in TRACE_ROLES if r not in by_role]
    if missing:
        raise DeclarationError(f"{p}: no trace declared for {missing}")
    return [by_role[r] for r in TRACE_ROLES]


def load_declarations(path: str | os.PathLike | None = None, _seen: tuple = ()) -> list[SetDeclaration]:
    """The sets a declaration file names, after those of the file it extends."""
    p, doc = _read(path, _seen)
    out: list[SetDeclaration] = []
    base = _base(p, doc)
    if base:
        out = load_declarations(base, _seen + (p,))
    items = doc.get("sets") or []
    if not isinstance(items, list):
        raise DeclarationError(f"{p}: `sets` must be a list")
    for i, item in enumerate(items):
        out.append(_parse_set(item, f"{p}: set {i} ({item.get('name', '?') if isinstance(item, dict) else '?'})"))
    names = [d.name for d in out]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise DeclarationError(f"{p}: set names must be unique; repeated: {sorted(dup)}")
    for fam in FAMILIES:
        ws = [d.weight for d in out if d.family == fam]
        given = sum(w for w in ws if w is not None)
        if given > 1 + 1e-9 or (given >= 1 - 1e-9 and None in ws and given > 0):
            raise DeclarationError(
                f"{p}: the weights of the {fam} sets add up to {given:g}; they are shares of "
                "the family's sessions (at most 1, below 1 when some sets have none)"
            )
    if not out:
        raise DeclarationError(f"{p}: no sets declared")
    return out
