"""Differences between two protocol versions, as rows a viewer can read.

Why flatten: a version is a nested document (tasks, gates, limits); what a participant needs
to know is which leaf values changed ("tasks.qwen3-8b.limits.fidelity_ceiling: 0.001 -> 0.002"),
not a structural diff. Lists are compared whole, since their order carries meaning
(e.g. the references of a task).
"""

from __future__ import annotations

from typing import Any

from speculator_arena.protocol import available_versions, load_protocol

MISSING = "(absent)"


def flatten(doc: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(doc, dict):
        out: dict[str, Any] = {}
        for k, v in doc.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: doc}


def protocol_document(version: int | None = None) -> dict[str, Any]:
    """What `arena protocol --json` prints (and GET /api/protocol serves) for `version`."""
    return load_protocol(version).as_document()


def protocol_diff(old: int, new: int) -> list[dict[str, str]]:
    """Every leaf that differs between versions `old` and `new` (the digest is left out)."""
    a = flatten({k: v for k, v in protocol_document(old).items() if k != "digest"})
    b = flatten({k: v for k, v in protocol_document(new).items() if k != "digest"})
    rows = []
    for key in sorted(set(a) | set(b)):
        va, vb = a.get(key, MISSING), b.get(key, MISSING)
        if va != vb:
            rows.append({"value": key, f"v{old}": _show(va), f"v{new}": _show(vb)})
    return rows


def versions() -> list[int]:
    return available_versions()


def _show(v: Any) -> str:
    if v is None:
        return "none"
    return str(v)
