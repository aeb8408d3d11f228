"""How a data card is drawn: its markdown (`render_markdown`) and the PNG of the fitted
distributions next to the public pool's (`plot`); datacard.py computes what they show."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from speculator_arena.pools.builder import structure


def plot(path: Path, st: dict, dev_sessions: list[dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [
        ("agent", "turns", lambda s: [len(s["turns"])], "turns per session"),
        ("agent", "turn_tokens", lambda s: [t["tokens"] for t in s["turns"]], "tokens per tool turn"),
        ("agent", "reply_tokens", lambda s: [t["max_tokens"] for t in s["turns"]], "reply budget (max_tokens)"),
        ("chat", "depth", lambda s: [len(s["turns"])], "chat depth (user turns)"),
        ("chat", "turn_tokens", lambda s: [t["tokens"] for t in s["turns"]], "tokens per user turn"),
        ("chat", "think_s", lambda s: [t["think_time_s"] for t in s["turns"][1:]], "think time s (before cap, scale)"),
    ]
    fig, axes = plt.subplots(2, 3, figsize=(13, 7))
    for ax, (fam, stat, get, title) in zip(axes.flat, panels):
        d = st["families"][fam][stat]
        ax.plot(d["quantiles"], structure.PROBS, label=f"source: {d['source'][:38]}")
        vals = np.sort([v for s in dev_sessions if s["family"] == fam for v in get(s)])
        if vals.size:
            ax.plot(vals, np.arange(1, vals.size + 1) / vals.size, label="public pool (as built)")
        ax.set_xscale("symlog")
        ax.set_title(f"{fam}: {title}", fontsize=10)
        ax.set_ylabel("CDF")
        ax.legend(fontsize=7)
    fig.tight_layout()
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp, dpi=90)
    plt.close(fig)
    tmp.replace(path)


def _table(rows: list[tuple[str, dict]]) -> str:
    head = "| statistic | n | mean | p10 | p50 | p90 | p99 |\n|---|---|---|---|---|---|---|\n"
    return head + "".join(
        f"| {name} | {d.get('n', 0)} | {d.get('mean', '')} | {d.get('p10', '')} | {d.get('p50', '')} | {d.get('p90', '')} | {d.get('p99', '')} |\n"
        for name, d in rows
    )


def render_markdown(c: dict) -> str:
    L = [
        f"# Data card: `{c['task_id']}` session pools",
        "",
        f"Generated {c['generated_at']} under protocol v{c['protocol_version']} for `{c['model']}`; structure statistics "
        f"`{c['structure_digest']}` ({'operators production statistics' if c['structure_from_production'] else 'fitted from the public traces'}).",
        "",
        "## Sources",
        "",
        "Conversation sets as declared (`speculator_arena/pools/ingest/source_sets/`): records read, conversations used "
        "(after records dropped, each with its reason), then the traces, apps and probes.",
        "",
        "| source | family | origin | commit | license | records | used | dropped | note |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for s in c["sources"]:
        dropped = "; ".join(f"{n} {why}" for why, n in (s.get("dropped") or {}).items())
        note = "; ".join(x for x in [s.get("truncation") or ""] + list(s.get("notes") or []) if x)
        fam = (s.get("family") or "") + (f" (weight {s['weight']})" if s.get("weight") is not None else "")
        used = "" if s.get("used") is None else s["used"]
        L.append(
            f"| {s['name']} | {fam} | {s['origin']} | {s['commit'] or '-'} | {s['license']} | {s['records']} | "
            f"{used} | {dropped} | {note} |"
        )
    dv = c["counts"]["dev"]
    L += [
        "",
        "## Counts",
        "",
        f"- Public `dev` pool: {dv['sessions']} timed sessions ({dv['families']}), {dv['turns']} turns, {dv['warmup']} warm-up sessions, "
        f"{dv['fidelity']} fidelity texts; apps {dv['apps']}.",
        f"- Hidden `test` pool: {c['counts']['test']}.",
        f"- Greedy probe prompts: {c['counts']['greedy_probes']} (Spec-Bench, diverse selection).",
        "",
        "## Family mix",
        "",
        f"Proposed mix of timed sessions {c['family_mix']['proposed']} (protocol v1 states none); "
        f"realized in `dev`: {c['family_mix']['dev_realized']}.",
        "",
        "## Fitted distributions next to the sources",
        "",
        "Fitted = the structure statistics sessions are sampled from; public pool = the sessions as built (turns cut to "
        "the window, reply budgets capped by `max_tokens_cap`; think times as sampled, before the runner's cap and scale `c`).",
        "",
        f"![distributions]({c['task_id']}.png)",
        "",
    ]
    for fam in ("agent", "chat"):
        rows = [(f"fitted {k} ({v['source']})", v) for k, v in c["fitted"][fam].items()]
        rows += [(f"source {k} ({v['source']})", v) for k, v in c["reference_sources"].get(fam, {}).items()]
        rows += [(f"public pool {k}", v) for k, v in c["public_pool"].get(fam, {}).items()]
        L += [f"### {fam}", "", _table(rows)]
    ct = c["cache_hit_targets"]
    L += [
        "## Cache-hit targets",
        "",
        f"Status: {ct['status']}.",
        "",
        f"- Agent traces, recorded cached share (token-weighted): {ct['agent_recorded_cache_hit_token_weighted']}",
        f"- Chat (Mooncake conversation trace), repeated prefix-block share: {ct['chat_mooncake_repeated_block_share']}",
        f"- Target cache hit, token-weighted, in the family mix: **{ct['target_cache_hit_token_weighted']}**",
        f"- Share of a returning session's history still cached: **{ct['returning_session_history_cached_target']}** (proposal)",
        f"- Upper bound of this pool with a perfect cache: {ct['pool_prefix_hit_upper_bound']}",
        "",
        "## Diversity (SPEED-Bench Algorithm 1, all-MiniLM-L6-v2 embeddings)",
        "",
        "| selection | candidates | selected | mean pairwise cosine, diverse | random (mean ± sd over draws) |",
        "|---|---|---|---|---|",
    ]
    for name, d in c["diversity"].items():
        if d:
            L.append(
                f"| {name} | {d['candidates']} | {d['selected']} | {d['diverse_mean_similarity']} | "
                f"{d['random_mean_similarity']} ± {d['random_std']} ({d['random_draws']}) |"
            )
    b = c["busy_lanes"]
    L += [
        "",
        "## Busy lanes (section 4)",
        "",
        f"KV cache {b['kv_cache_tokens']} tokens / mean footprint {b['mean_footprint_tokens']} (protocol: {b['protocol_mean_footprint_tokens']}) "
        f"= {b['sessions_cache_holds']} sessions; `busy` keeps {b['busy_live_sessions']} live ({b['cache_fill_by_busy']:.0%} of the cache); "
        f"lanes for 85%: {b['lanes_for_85pct']} against {b['busy_lanes']}. {'OK: no overflow.' if b['ok'] else 'OVERFLOW: the live sessions exceed the cache.'}",
        "",
        "## Window",
        "",
        f"`MAX_MODEL_LEN` {c['window']['max_model_len']}, `max_tokens_cap` {c['window']['max_tokens_cap']}; "
        f"every turn's prompt (system, first turn, this turn) fits {c['window']['per_turn_prompt_budget_at_cap']} tokens after the cut.",
        "",
    ]
    return "\n".join(L)
