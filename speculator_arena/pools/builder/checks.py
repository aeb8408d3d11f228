"""Data-quality checks of built pools (run as Dagster asset checks and in tests)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from speculator_arena.pools.api import Pool, salt_line
from speculator_arena.pools.builder.context import BuildContext
from speculator_arena.pools.layout import read_jsonl, split_folder
from speculator_arena.rules.slots import live_slots


def _split_sources(folder: Path) -> set[str]:
    ids = set(json.loads((folder / "used_sources.json").read_text(encoding="utf-8")))
    if (folder / "warmup.jsonl").is_file():
        ids |= {s["source"] for s in read_jsonl(folder / "warmup.jsonl")}
    return ids


def _text_digests(folder: Path) -> set[str]:
    out = set()
    for name in ("sessions.jsonl", "warmup.jsonl"):
        if (folder / name).is_file():
            for s in read_jsonl(folder / name):
                for t in s["turns"]:
                    if len(t["content"].strip()) >= 40:
                        out.add(hashlib.sha256(t["content"].strip().encode()).hexdigest())
    return out


class PublicTexts:
    """Every message of the sources the public side may use. A text that is one of them, or a
    cut (a prefix) of one, is public whatever else holds it: framework boilerplate such as an
    empty tool output or a too-long-output warning recurs on both sides of the split."""

    def __init__(self, ctx: BuildContext):
        import bisect

        from speculator_arena.pools.builder.candidates import split_candidates

        pub, _ = split_candidates(ctx)
        self._bisect = bisect.bisect_left
        self.sorted = sorted({m["content"].strip() for c in pub for m in c.messages})

    def __contains__(self, text: str) -> bool:
        t = text.strip()
        i = self._bisect(self.sorted, t)
        return i < len(self.sorted) and self.sorted[i].startswith(t)


def _digest(text: str) -> str:
    return hashlib.sha256(text.strip().encode()).hexdigest()


def hidden_only_texts(ctx: BuildContext, min_chars: int = 40) -> list[str]:
    """The hidden pool's turn texts (and paraphrases) that no public source holds: what must
    never reach a public file, view or log."""
    test = split_folder(ctx.root, "test")
    public = PublicTexts(ctx)
    out = []
    for name in ("sessions.jsonl", "warmup.jsonl"):
        if (test / name).is_file():
            for s in read_jsonl(test / name):
                for t in s["turns"]:
                    c = t["content"].strip()
                    if len(c) >= min_chars and c not in public:
                        out.append(c)
    if (test / "fidelity.jsonl").is_file():
        for f in read_jsonl(test / "fidelity.jsonl"):
            for m in f["messages"]:
                c = m["content"].strip()
                if len(c) >= min_chars and c not in public:
                    out.append(c)
    return out


def public_hidden_disjoint(ctx: BuildContext) -> tuple[bool, dict]:
    """No conversation is in both pools, and no hidden-only text is in the public pool."""
    root = ctx.root
    test = split_folder(root, "test")
    if not (test / "manifest.json").is_file():
        return True, {"hidden_pool": "not built (no operator key)"}
    dev = split_folder(root, "dev")
    shared_sources = _split_sources(dev) & _split_sources(test)
    hidden = {_digest(t) for t in hidden_only_texts(ctx)}
    leaked = _text_digests(dev) & hidden
    boiler = len((_text_digests(dev) & _text_digests(test)) - hidden)
    return (not shared_sources and not leaked), {
        "shared_sources": len(shared_sources),
        "hidden_texts_in_public": len(leaked),
        "public_boilerplate_in_both": boiler,
    }


def every_turn_fits(ctx: BuildContext, folder: Path) -> tuple[bool, dict]:
    """Every turn's prompt after the window cut (salted system prompt and tools, first turn,
    this turn), with the template overhead and its `max_tokens`, fits the cut-down window.
    Counts are recomputed with the target's tokenizer, not read from the stored numbers."""
    salt_tok = ctx.counter.one(salt_line("x" * 36, "busy", 2) + "\n")
    bad, turns = 0, 0
    worst = 0.0
    for name in ("sessions.jsonl", "warmup.jsonl"):
        if not (folder / name).is_file():
            continue
        for s in read_jsonl(folder / name):
            sys_tok = ctx.counter.one(s["system_prompt"]) + (
                ctx.counter.one(json.dumps(s["tools"])) if s["tools"] else 0
            )
            first = ctx.counter.one(s["turns"][0]["content"])
            for i, t in enumerate(s["turns"]):
                tok = sys_tok + salt_tok + first + (ctx.counter.one(t["content"]) if i else 0)
                room = ctx.turn_budget(t["max_tokens"]) + ctx.settings.salt_reserve_tokens
                turns += 1
                worst = max(worst, tok / room)
                if tok > room or (ctx.task.max_tokens_cap and t["max_tokens"] > ctx.task.max_tokens_cap):
                    bad += 1
    return bad == 0, {
        "turns": turns,
        "turns_not_fitting": bad,
        "worst_fill_of_budget": round(worst, 3),
        "salt_tokens": salt_tok,
        "salt_reserve": ctx.settings.salt_reserve_tokens,
    }


def no_session_in_two_passes(pool: Pool, evaluation_ids=("check-a", "check-b", "check-c")) -> tuple[bool, dict]:
    """In an evaluation, every pass of every workload at its full block plus every warm-up
    wave draws distinct sessions and distinct source conversations."""
    problems = 0
    per_pass = {}
    for ev in evaluation_ids:
        seen_ids: set = set()
        seen_src: set = set()
        for (w, p), (a, b) in pool.blocks().items():
            per_pass[f"{w}-{p}"] = b - a
            for s in pool.passes(ev, w, p, b - a):
                problems += s.session_id in seen_ids or s.source in seen_src
                seen_ids.add(s.session_id)
                seen_src.add(s.source)
        for w in pool.task.workloads:
            n = live_slots(pool.task)[w]
            for s in pool.warmup(ev, w, n):
                problems += s.session_id in seen_ids or s.source in seen_src
                seen_ids.add(s.session_id)
                seen_src.add(s.source)
    return problems == 0, {
        "evaluations_checked": len(evaluation_ids),
        "repeats": problems,
        "sessions_per_pass": per_pass,
    }
