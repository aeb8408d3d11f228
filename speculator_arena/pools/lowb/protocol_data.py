"""LowBArena's protocol data as the item builder reads it: plain dicts of the typed protocol in
force (protocol/lowb.py: shipped, published and staged versions alike), one function per question.

Why dicts: the builder writes what it read into its data card as JSON; reading the typed model
here keeps the versions' order and validation in one place (a staged version builds its items).
"""

from __future__ import annotations

from speculator_arena.protocol.lowb import load_lowb_protocol


def lowb_task(task_id: str) -> dict:
    """The task's protocol entry (workloads, items, kl_probe, ...); KeyError for an unknown task."""
    return load_lowb_protocol().task(task_id).model_dump(mode="json")


def lowb_domains() -> dict[str, dict]:
    """domain -> {benchmarks: [...], gated: bool}."""
    return {d: v.model_dump(mode="json") for d, v in load_lowb_protocol().domains.items()}


def protocol_version() -> int:
    return load_lowb_protocol().version
