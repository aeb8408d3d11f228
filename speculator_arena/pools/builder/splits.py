"""Step 4 of a build, per split: the timed sessions (sizes sampled from the structure, the
public split's by diverse selection), then fidelity texts from the conversations no session
uses, and the split's manifest (counts and digests only: safe to show for the hidden split)."""

from __future__ import annotations

import hashlib
import json
import time

import numpy as np

from speculator_arena.atomic import write_atomic
from speculator_arena.pools.builder import diversity, structure
from speculator_arena.pools.builder.candidates import match_structure, ordered_candidates, require_key, timed_targets
from speculator_arena.pools.builder.context import BuildContext
from speculator_arena.pools.builder.fidelity import fidelity_text
from speculator_arena.pools.builder.sessions import AppPrompts, make_session
from speculator_arena.pools.hashing import key_id, seed_of
from speculator_arena.pools.layout import ensure_hidden, private_files, write_jsonl
from speculator_arena.pools.model import SourceConversation


def _family_interleave(rows: list[dict], mix: dict[str, float]) -> list[dict]:
    """Merge families so that every prefix of the list holds them in the mix (weighted round robin)."""
    by = {f: [r for r in rows if r["family"] == f] for f in mix}
    out: list[dict] = []
    taken = {f: 0 for f in mix}
    while any(taken[f] < len(by[f]) for f in mix):
        f = min((f for f in mix if taken[f] < len(by[f])), key=lambda f: (taken[f] + 1) / max(mix[f], 1e-9))
        out.append(by[f][taken[f]])
        taken[f] += 1
    return out


def build_split(ctx: BuildContext, split: str, *, key: bytes | None = None, paraphrases=None) -> dict:
    """Build one split's timed sessions, warm-up sessions and fidelity texts; return its manifest
    (counts and digests only: safe to show for the hidden split)."""
    t0 = time.time()
    require_key(split, key)
    st = ctx.structure()
    cands, out_dir = ordered_candidates(ctx, split, key)
    if split != "dev":
        ensure_hidden(ctx.root)
    avail = {f: sum(c.family == f for c in cands) for f in ctx.settings.family_mix}
    targets = timed_targets(ctx, avail)
    apps = AppPrompts(ctx)
    para = paraphrases if split != "dev" else None
    diversity_info = None
    chosen: dict[str, list[SourceConversation]] = {}
    sizes: dict[str, int] = {}
    for fam, k in targets.items():
        pool = [c for c in cands if c.family == fam]
        rng = np.random.default_rng(seed_of(ctx.task_id, split, fam, "sizes"))
        stat = st["families"][fam]["turns" if fam == "agent" else "depth"]
        want = sorted((max(1, int(round(x))) for x in structure.sample(stat, rng, k)), reverse=True)
        if split == "dev" and len(pool) > k:
            cand = pool[: ctx.settings.diverse_candidates_factor * k]
            X = diversity.embed([c.user_turns()[0] for c in cand], ctx.embedding_cache, ctx.progress)
            sel = diversity.diverse_select(X, min(2 * k, len(cand)), seed=seed_of(ctx.task_id, fam))
            picked = match_structure([cand[i] for i in sel], want)
            if fam == "chat":
                index = {c.source_id: i for i, c in enumerate(cand)}
                diversity_info = diversity.diversity_report(
                    X, [index[c.source_id] for c, _ in picked], seed=seed_of(ctx.task_id, "rand")
                )
        else:
            picked = match_structure(pool[: 2 * k], want)
        chosen[fam] = [c for c, _ in picked]
        sizes.update({c.source_id: n for c, n in picked})
    used = {c.source_id for v in chosen.values() for c in v}
    ctx.progress(f"{split}: constructing {sum(len(v) for v in chosen.values())} timed sessions")
    sessions = [
        s
        for fam in chosen
        for c in chosen[fam]
        if (s := make_session(ctx, apps, c, split, st, para, n_turns=sizes[c.source_id]))
    ]
    sessions = _family_interleave(sessions, ctx.settings.family_mix)
    rest = [c for c in cands if c.source_id not in used and c.family == "chat"]
    n_fid = ctx.task.gates.target_fidelity.texts * ctx.settings.fidelity_factor
    fidelity, fid_used = [], []
    for c in rest:
        if len(fidelity) >= n_fid:
            break
        f = fidelity_text(ctx, c, split)
        if f:
            fidelity.append(f)
            fid_used.append(c.source_id)
    write_atomic(out_dir / "used_sources.json", json.dumps(sorted(used | set(fid_used))))
    (out_dir / "warmup.jsonl").unlink(missing_ok=True)  # warm-up depends on these sessions: rebuilt after
    write_jsonl(out_dir / "sessions.jsonl", sessions)
    write_jsonl(out_dir / "fidelity.jsonl", fidelity)
    manifest = {
        "task_id": ctx.task_id,
        "split": split,
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "structure_digest": st.get("digest"),
        "sessions": len(sessions),
        "fidelity": len(fidelity),
        "families": {f: sum(s["family"] == f for s in sessions) for f in ctx.settings.family_mix},
        "apps": {a: sum(s["app"] == a for s in sessions) for a in sorted({s["app"] for s in sessions})},
        "turns": sum(len(s["turns"]) for s in sessions),
        "paraphrased_turns": sum(t["paraphrased"] for s in sessions for t in s["turns"]),
        "chat_user_turns": sum(len(s["turns"]) for s in sessions if s["family"] == "chat"),
        "mean_footprint_tokens": float(np.mean([s["footprint_tokens"] for s in sessions]))
        if sessions
        else float("nan"),
        "source_ids_sha256": hashlib.sha256("\n".join(sorted(s["source"] for s in sessions)).encode()).hexdigest(),
        "key_id": key_id(key) if key else None,
        "diversity": diversity_info,
        "seconds": round(time.time() - t0, 1),
    }
    write_atomic(out_dir / "manifest.json", json.dumps(manifest, indent=1))
    if split != "dev":
        private_files(out_dir)
    return manifest
