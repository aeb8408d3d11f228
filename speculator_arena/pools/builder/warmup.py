"""Step 4 of a build, last: warm-up sessions, apart from every timed session and fidelity text
of their split, so no pass ever sends a session a warm-up sent."""

from __future__ import annotations

import json

import numpy as np

from speculator_arena.atomic import write_atomic
from speculator_arena.pools.builder.candidates import ordered_candidates
from speculator_arena.pools.builder.context import BuildContext, PoolBuildError
from speculator_arena.pools.builder.sessions import AppPrompts, make_session
from speculator_arena.pools.layout import private_files, write_jsonl


def build_warmup(ctx: BuildContext, split: str, *, key: bytes | None = None, paraphrases=None) -> dict:
    """Warm-up sessions, apart: from the split's candidates that no timed session or fidelity
    text uses, enough for one wave of every workload's live sessions with headroom."""
    st = ctx.structure()
    cands, out_dir = ordered_candidates(ctx, split, key)
    used_p = out_dir / "used_sources.json"
    if not used_p.is_file():
        raise PoolBuildError(f"build the {split} timed sessions before its warm-up sessions ({used_p} missing)")
    used = set(json.loads(used_p.read_text(encoding="utf-8")))
    n_warm = int(np.ceil(ctx.settings.warmup_factor * sum(ctx.live_slots().values())))
    apps = AppPrompts(ctx)
    warmup: list[dict] = []
    for c in cands:
        if len(warmup) >= n_warm:
            break
        if c.source_id in used:
            continue
        s = make_session(ctx, apps, c, split, st, paraphrases if split != "dev" else None)
        if s:
            s["session_id"] = s["session_id"].replace(f"-{split}-", f"-{split}-warmup-", 1)
            warmup.append(s)
    write_jsonl(out_dir / "warmup.jsonl", warmup)
    man_p = out_dir / "manifest.json"
    man = json.loads(man_p.read_text(encoding="utf-8"))
    man["warmup"] = len(warmup)
    man["warmup_families"] = {f: sum(s["family"] == f for s in warmup) for f in ctx.settings.family_mix}
    write_atomic(man_p, json.dumps(man, indent=1))
    if split != "dev":
        private_files(out_dir)
    return {"split": split, "warmup": len(warmup), "families": man["warmup_families"]}
