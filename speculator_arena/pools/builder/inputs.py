"""Steps 1 and 2 of a build: the sources manifest (what was read) and the session structure
fitted from the public traces (`structure.json`), which every later step reads."""

from __future__ import annotations

import json
from dataclasses import asdict

from speculator_arena import settings
from speculator_arena.atomic import write_atomic
from speculator_arena.pools.builder import structure
from speculator_arena.pools.builder.context import BuildContext
from speculator_arena.pools.hashing import public_u


def sources_manifest(ctx: BuildContext) -> dict:
    s = ctx.sources
    return {
        "data_dir": str(ctx.data_dir),
        "declaration": s.declaration,
        "chat_conversations": len(s.chats),
        "agent_trajectories": len(s.agents),
        "cc_traces": len(s.cc_traces),
        "apps": [a.name for a in s.apps],
        "probes": len(s.probes),
        "sources": [asdict(i) for i in s.info],
    }


def store_sources_manifest(ctx: BuildContext) -> dict:
    """Step 1: the sources manifest, written to the build's `sources.json`."""
    man = sources_manifest(ctx)
    write_atomic(ctx.root / "sources.json", json.dumps(man, indent=1))
    return man


def fit_and_store_structure(ctx: BuildContext, production_path=None) -> dict:
    s = ctx.sources
    production = structure.load_production(production_path or settings.get("ARENA_PRODUCTION_STATS"))
    ctx.progress("fitting session structure per family")
    order = sorted(s.chats, key=lambda c: public_u(c.source_id))
    doc = structure.fit_structure(
        trajectories=s.trajectories,
        cc_traces=s.cc_traces,
        chat_conversations=[{"messages": c.messages, "set": c.origin} for c in order],
        mooncake=s.mooncake,
        azure_conv=s.azure_conv,
        count_tokens=ctx.counter,
        source_digests={i.name: i.sha256[:16] for i in s.info},
        production=production,
        max_chat=1500,
    )
    doc["task_id"] = ctx.task_id
    doc["tokenizer"] = ctx.task.task.model
    write_atomic(ctx.root / "structure.json", json.dumps(doc, indent=1))
    return doc
