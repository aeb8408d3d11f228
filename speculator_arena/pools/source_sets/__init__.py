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

The file used: `arena pools build --sources FILE`, else `ARENA_POOL_SOURCES`, else the default.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import yaml

from speculator_arena import settings
from speculator_arena.errors import ArenaError
from speculator_arena.pools.conversations import FORMATS

DEFAULT = Path(__file__).with_name("default.yaml")
FAMILIES = ("agent", "chat")
_KEYS = {"name", "path", "package", "format", "family", "id_prefix", "origin", "commit_from", "license", "weight"}


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


def declaration_file(given: str | os.PathLike | None = None) -> Path:
    return Path(given or settings.get("ARENA_POOL_SOURCES") or DEFAULT).resolve()


def _parse_set(item, where: str) -> SetDeclaration:
    if not isinstance(item, dict):
        raise DeclarationError(f"{where}: a set must be a mapping")
    unknown = set(item) - _KEYS
    if unknown:
        raise DeclarationError(f"{where}: unknown keys {sorted(unknown)}; keys: {sorted(_KEYS)}")
    missing = [k for k in ("name", "format", "family", "id_prefix", "license") if not item.get(k)]
    if missing:
        raise DeclarationError(f"{where}: missing {missing}")
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


def load_declarations(path: str | os.PathLike | None = None, _seen: tuple = ()) -> list[SetDeclaration]:
    """The sets a declaration file names, after those of the file it extends."""
    p = declaration_file(path)
    if p in _seen:
        raise DeclarationError(f"{p}: `extends` loops back to itself")
    try:
        doc = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise DeclarationError(f"{p}: cannot read the declaration: {exc}") from exc
    if not isinstance(doc, dict) or set(doc) - {"extends", "sets"}:
        raise DeclarationError(f"{p}: a declaration holds `sets:` (and optionally `extends:`)")
    out: list[SetDeclaration] = []
    if doc.get("extends"):
        base = doc["extends"]
        base_path = DEFAULT if base == "default" else (p.parent / base)
        out = load_declarations(base_path, _seen + (p,))
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
