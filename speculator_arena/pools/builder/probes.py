"""Step 5 of a build: the greedy-agreement probe prompts, Spec-Bench first-turn questions that
fit the window, chosen by diverse selection."""

from __future__ import annotations

import json

from speculator_arena.atomic import write_atomic
from speculator_arena.pools.builder import diversity
from speculator_arena.pools.builder.context import BuildContext
from speculator_arena.pools.hashing import seed_of
from speculator_arena.pools.layout import write_jsonl
from speculator_arena.rules.window import WindowRule


def build_probes(ctx: BuildContext) -> dict:
    """Spec-Bench first-turn questions that fit the window, chosen by diverse selection."""
    g = ctx.task.gates.greedy_agreement
    rule = WindowRule.of(ctx.task)
    qs = [q for q in ctx.sources.probes]
    toks = ctx.counter([q["turns"][0] for q in qs])
    fit = [q for q, t in zip(qs, toks) if rule.fits(t, g.max_tokens)]
    X = diversity.embed([q["turns"][0] for q in fit], ctx.embedding_cache, ctx.progress)
    sel = diversity.diverse_select(X, g.prompts, seed=seed_of(ctx.task_id, "probes"))
    rep = diversity.diversity_report(X, sel, seed=seed_of(ctx.task_id, "probes-rand"))
    rows = [
        {
            "prompt_id": f"spec-bench-{fit[i]['id']}",
            "category": fit[i]["category"],
            "messages": [{"role": "user", "content": fit[i]["turns"][0]}],
        }
        for i in sel
    ]
    write_jsonl(ctx.root / "probes.jsonl", rows)
    man = {
        "probes": len(rows),
        "candidates_fitting_window": len(fit),
        "diversity": rep,
        "categories": sorted({r["category"] for r in rows}),
    }
    write_atomic(ctx.root / "probes_manifest.json", json.dumps(man, indent=1))
    return man
