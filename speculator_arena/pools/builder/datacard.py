"""The data card of a task's pools, generated: what it states (computed here), written as JSON,
markdown and a PNG of the distributions (the last two drawn by `datacard_render.py`); and its reader (`load_data_card`, the end of this module), the one place the board's data card
page and the calibration's fit (its cache-hit targets) find a card.

Why generated: the card must say exactly what the pools hold (sources at their commits, counts,
fitted against source distributions, the mix, the cache-hit targets, the diversity figures),
and a hand-written card drifts from the data. The card reads the public pool's texts only for
statistics and the hidden pool's manifest only for counts: no hidden text can reach it.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from speculator_arena.atomic import write_atomic
from speculator_arena.pools.builder import structure
from speculator_arena.pools.builder.context import BuildContext
from speculator_arena.pools.builder.datacard_render import plot, render_markdown
from speculator_arena.pools.builder.inputs import sources_manifest
from speculator_arena.pools.layout import HIDDEN, data_card_dir, pool_root, read_jsonl, split_folder
from speculator_arena.rules.slots import live_slots

QS = (0.1, 0.5, 0.9, 0.99)


def _q(values) -> dict:
    v = np.asarray(list(values), dtype=float)
    if v.size == 0:
        return {"n": 0}
    return {
        "n": int(v.size),
        "mean": round(float(v.mean()), 2),
        **{f"p{int(q * 100)}": round(float(np.quantile(v, q)), 2) for q in QS},
    }


def _qd(d: dict) -> dict:
    return {
        "n": d["n"],
        "mean": round(d["mean"], 2),
        **{f"p{int(q * 100)}": round(structure.quantile(d, q), 2) for q in QS},
    }


def pool_statistics(sessions: list[dict]) -> dict[str, dict]:
    """Realized distributions of a built pool, per family, in the structure's terms."""
    out: dict[str, dict] = {}
    for fam in ("agent", "chat"):
        ss = [s for s in sessions if s["family"] == fam]
        if not ss:
            continue
        out[fam] = {
            "turns": _q(len(s["turns"]) for s in ss),
            "turn_tokens": _q(t["tokens"] for s in ss for t in s["turns"]),
            "max_tokens": _q(t["max_tokens"] for s in ss for t in s["turns"]),
            "think_time_s": _q(t["think_time_s"] for s in ss for t in s["turns"][1:]),
            "footprint_tokens": _q(s["footprint_tokens"] for s in ss),
            "system_tokens": _q(s["system_tokens"] for s in ss),
        }
    return out


def _pool_prefix_hit(sessions: list[dict]) -> float:
    """Token-weighted share of prompt tokens a perfect prefix cache would hold (no eviction):
    each turn's prompt is the previous prompt plus its reply (budget) plus the new turn, and the
    app's system prompt is shared with earlier sessions of the app."""
    seen_apps: set = set()
    cached = total = 0.0
    for s in sessions:
        ctx = 0
        for i, t in enumerate(s["turns"]):
            prompt = s["system_tokens"] + sum(x["tokens"] + x["max_tokens"] for x in s["turns"][:i]) + t["tokens"]
            hit = ctx if i else (s["system_tokens"] if s["app"] in seen_apps else 0)
            cached += hit
            total += prompt
            ctx = prompt + t["max_tokens"]
        seen_apps.add(s["app"])
    return cached / total if total else float("nan")


def cache_targets(ctx: BuildContext, dev_sessions: list[dict]) -> dict:
    s = ctx.sources
    c = p = 0
    for t in s.trajectories:
        for m in t["messages"]:
            u = m.get("usage")
            if u:
                c += u.get("cached_tokens") or 0
                p += u.get("prompt_tokens") or 0
    agent_hit = c / p if p else float("nan")
    seen: set = set()
    rep = tot = 0
    for r in s.mooncake:
        rep += sum(h in seen for h in r["hash_ids"])
        tot += len(r["hash_ids"])
        seen.update(r["hash_ids"])
    chat_hit = rep / tot if tot else float("nan")
    mix = ctx.settings.family_mix
    return {
        "status": "proposed (protocol v1 names targets in the data card but states none)",
        "agent_recorded_cache_hit_token_weighted": round(agent_hit, 4),
        "chat_mooncake_repeated_block_share": round(chat_hit, 4),
        "target_cache_hit_token_weighted": round(mix.get("agent", 0) * agent_hit + mix.get("chat", 0) * chat_hit, 4),
        "returning_session_history_cached_target": ctx.settings.returning_history_cached_target,
        "pool_prefix_hit_upper_bound": round(_pool_prefix_hit(dev_sessions), 4),
    }


def busy_lane_check(ctx: BuildContext, mean_footprint: float) -> dict:
    """Section 4: busy's live sessions (lanes x interleave) fill about 85% of the stock engine's
    KV cache; their count is cache tokens over the mean footprint."""
    t = ctx.task.task
    m = ctx.task.workloads["busy"].interleave
    live = ctx.task.lanes["busy"] * m
    cap = t.kv_cache_tokens / mean_footprint
    return {
        "kv_cache_tokens": t.kv_cache_tokens,
        "mean_footprint_tokens": round(mean_footprint, 1),
        "protocol_mean_footprint_tokens": t.mean_session_footprint_tokens,
        "sessions_cache_holds": round(cap, 2),
        "busy_live_sessions": live,
        "cache_fill_by_busy": round(live * mean_footprint / t.kv_cache_tokens, 3),
        "lanes_for_85pct": round(0.85 * cap / m, 2),
        "busy_lanes": ctx.task.lanes["busy"],
        "ok": bool(live <= cap),
    }


def window_section(ctx: BuildContext) -> dict:
    return {
        "max_model_len": ctx.window,
        "max_tokens_cap": ctx.task.max_tokens_cap,
        "per_turn_prompt_budget_at_cap": ctx.turn_budget(ctx.task.max_tokens_cap or 0),
    }


def stale_fields(card: dict, ctx: BuildContext) -> list[str]:
    """What a card states that the protocol (or a declared set's file) no longer says: the
    task's model and version, the window, the busy-lane constants, each set's digest. Cheap
    (no build), so a test holds the committed data_cards/ to the protocol."""
    out = []
    want = {"protocol_version": ctx.task.protocol_version, "model": ctx.task.task.model, "window": window_section(ctx)}
    for k, v in want.items():
        if card.get(k) != v:
            out.append(f"{k}: card {card.get(k)!r}, protocol {v!r}")
    t = ctx.task
    busy = {
        "kv_cache_tokens": t.task.kv_cache_tokens,
        "protocol_mean_footprint_tokens": t.task.mean_session_footprint_tokens,
        "busy_live_sessions": live_slots(t)["busy"],
        "busy_lanes": t.lanes["busy"],
    }
    for k, v in busy.items():
        if card.get("busy_lanes", {}).get(k) != v:
            out.append(f"busy_lanes.{k}: card {card.get('busy_lanes', {}).get(k)!r}, protocol {v!r}")
    digests = {i.name: i.sha256 for i in ctx.sources.info}
    for src in card.get("sources", []):
        if src["name"] in digests and src.get("sha256") != digests[src["name"]]:
            out.append(
                f"source {src['name']!r}: card digest {str(src.get('sha256'))[:12]}, file {digests[src['name']][:12]}"
            )
    return out


def build_data_card(ctx: BuildContext, out_dirs: list[Path]) -> dict:
    st = ctx.structure()
    dev_dir = split_folder(ctx.root, "dev")
    dev = read_jsonl(dev_dir / "sessions.jsonl")
    dev_man = json.loads((dev_dir / "manifest.json").read_text(encoding="utf-8"))
    test_man_p = split_folder(ctx.root, "test") / "manifest.json"
    test_man = json.loads(test_man_p.read_text(encoding="utf-8")) if test_man_p.is_file() else None
    if test_man and test_man.get("structure_digest") != st["digest"]:
        test_man = None  # a hidden pool from other statistics is not this build's
    probes = json.loads((ctx.root / "probes_manifest.json").read_text(encoding="utf-8"))
    realized = pool_statistics(dev)
    fitted = {
        fam: {k: _qd(v) | {"source": v["source"]} for k, v in stats.items()} for fam, stats in st["families"].items()
    }
    reference = {
        fam: {k: _qd(v) | {"source": v["source"]} for k, v in stats.items()} for fam, stats in st["reference"].items()
    }
    src = sources_manifest(ctx)["sources"]
    test_counts = None
    if test_man:
        test_counts = {
            k: test_man[k]
            for k in (
                "sessions",
                "warmup",
                "fidelity",
                "families",
                "turns",
                "paraphrased_turns",
                "chat_user_turns",
                "key_id",
            )
        }
        test_counts["paraphrased_share_of_chat_turns"] = round(
            test_man["paraphrased_turns"] / max(test_man["chat_user_turns"], 1), 4
        )
    card = {
        "task_id": ctx.task_id,
        "protocol_version": ctx.task.protocol_version,
        "model": ctx.task.task.model,
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "structure_digest": st["digest"],
        "structure_from_production": st.get("production", False),
        "sources": [
            {
                k: s.get(k)
                for k in (
                    "name",
                    "family",
                    "format",
                    "weight",
                    "origin",
                    "commit",
                    "license",
                    "records",
                    "used",
                    "dropped",
                    "notes",
                    "sha256",
                    "truncation",
                )
            }
            for s in src
        ],
        "counts": {
            "dev": {k: dev_man[k] for k in ("sessions", "warmup", "fidelity", "families", "apps", "turns")},
            "test": test_counts or "not built (no operator key)",
            "greedy_probes": probes["probes"],
        },
        "family_mix": {"proposed": ctx.settings.family_mix, "dev_realized": dev_man["families"]},
        "fitted": fitted,
        "reference_sources": reference,
        "public_pool": realized,
        "cache_hit_targets": cache_targets(ctx, dev),
        "diversity": {"probes": probes["diversity"], "public_pool_chat": dev_man.get("diversity")},
        "busy_lanes": busy_lane_check(ctx, dev_man["mean_footprint_tokens"]),
        "window": window_section(ctx),
    }
    md = render_markdown(card)
    for d in out_dirs:
        d.mkdir(parents=True, exist_ok=True)
        write_atomic(d / f"{ctx.task_id}.json", json.dumps(card, indent=1, default=str))
        write_atomic(d / f"{ctx.task_id}.md", md)
        plot(d / f"{ctx.task_id}.png", st, dev)
    return card


# ---- reading a card -----------------------------------------------------------------------
# Only the card's files are read: the hidden test pool lives under `pools/<task>/hidden/`,
# which nothing below lists or opens, and no pool text is read.

REPO_DATA_CARDS = Path(__file__).resolve().parents[3] / "data_cards"  # the committed cards of the shipped tasks


@dataclass(frozen=True)
class DataCard:
    task_id: str
    markdown: str | None
    stats: dict[str, Any] | None
    plot: Path | None
    source: Path


def card_locations(task_id: str, home: str | os.PathLike | None = None) -> list[Path]:
    """Where a task's card may be, most specific first (the pools build, then the repo's copy)."""
    return [data_card_dir(pool_root(task_id, home)) / task_id, REPO_DATA_CARDS / task_id]


def load_data_card(task_id: str, home: str | os.PathLike | None = None) -> DataCard | None:
    """The first location holding `<stem>.md` or `<stem>.json`; None when the card is not built."""
    if "/" in task_id or "\\" in task_id or task_id in ("", ".", "..") or HIDDEN in task_id:
        raise ValueError(f"not a task id: {task_id!r}")
    for stem in card_locations(task_id, home):
        md, js = stem.with_suffix(".md"), stem.with_suffix(".json")
        if md.is_file() or js.is_file():
            markdown = md.read_text(encoding="utf-8") if md.is_file() else None
            stats = json.loads(js.read_text(encoding="utf-8")) if js.is_file() else None
            png = stem.with_suffix(".png")
            return DataCard(task_id, markdown, stats, png if png.is_file() else None, stem)
    return None
