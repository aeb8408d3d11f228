"""Every step of a pool build in order, without Dagster (`build_all`), for the tests that build
pools of their own (test_published_formats.py). The arena builds through its Dagster assets
(speculator_arena/assets/pools.py), which call the same steps, one asset each; this sequence
lives here, beside its only callers, so the product holds one way to build (issue 34)."""

from __future__ import annotations

from speculator_arena.pools.api import Pool, require_sessions
from speculator_arena.pools.builder.context import BuildContext
from speculator_arena.pools.builder.folders import begin_build, discard_build, switch_build
from speculator_arena.pools.builder.inputs import fit_and_store_structure, store_sources_manifest
from speculator_arena.pools.builder.probes import build_probes
from speculator_arena.pools.builder.sessions import load_paraphrases
from speculator_arena.pools.builder.splits import build_split
from speculator_arena.pools.builder.warmup import build_warmup
from speculator_arena.pools.settings import operator_key


def build_all(task_id: str, data=None, home=None, progress=print, sources_file=None) -> dict:
    """Every step in order without Dagster (the assets call the same steps), into a build
    folder of its own that is served only when every step succeeded and the pool is whole."""
    staging = begin_build(task_id, home)
    try:
        ctx = BuildContext(task_id, data, home, progress=progress, root=staging, sources_file=sources_file)
        out = {"sources": store_sources_manifest(ctx)}
        out["structure"] = fit_and_store_structure(ctx)["digest"]
        out["dev"] = build_split(ctx, "dev")
        key = operator_key()
        para = load_paraphrases() if key else {}
        out["test"] = build_split(ctx, "test", key=key, paraphrases=para) if key else None
        out["warmup"] = [build_warmup(ctx, "dev")] + (
            [build_warmup(ctx, "test", key=key, paraphrases=para)] if key else []
        )
        out["probes"] = build_probes(ctx)
        for split in ("dev", "test") if key else ("dev",):
            require_sessions(Pool.at(task_id, split, ctx.root))
        switch_build(task_id, staging, home)
        return out
    except BaseException:
        discard_build(staging)
        raise
