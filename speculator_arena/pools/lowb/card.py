"""The LowBArena item pool's data card as markdown: sources, licenses, counts per domain and
split, the domains and benchmarks the pool lacks. Counts and declarations only, never item text,
so it may be published (it is written beside the public split)."""

from __future__ import annotations


def render_card(card: dict) -> str:
    lines = [
        f"# LowBArena items: {card['task_id']}",
        "",
        f"Protocol {card['protocol_version']}; splits built: {', '.join(card['splits'])}"
        + (f"; hidden split key id `{card['key_id']}`" if card["key_id"] else "; no hidden split (no pool key)"),
        f"RULER items at {card['ruler_context_tokens']} tokens by the target's tokenizer; "
        f"items per domain and split: {card['per_domain']}.",
        "",
        "## Sources",
        "",
        "| benchmark | domain | source | upstream | version | license | present |",
        "|---|---|---|---|---|---|---|",
    ]
    for s in card["sources"]:
        version = s["installed_version"] or s["declared_version"] or "—"
        lines.append(
            f"| {s['benchmark']} | {s['domain']} | {s['name']} | {s['upstream'] or '—'} | {version} "
            f"| {s['license'] or '—'} | {'yes' if s['present'] else 'no'} |"
        )
    lines += ["", "## Items per domain and split", "", "| split | domain | benchmark | items |", "|---|---|---|---|"]
    for split, c in sorted(card["counts"].items()):
        for domain, per in sorted(c["items"].items()):
            lines += [f"| {split} | {domain} | {b} | {n} |" for b, n in sorted(per.items())]
    lines += [""]
    for split, c in sorted(card["counts"].items()):
        lines.append(f"KL probe prompts ({split}): {c['kl_prompts']} of {c['kl_prompts_wanted']} wanted.")
    gated = [d for d, s in card["domains"].items() if s["gated"]]
    lines += [
        "",
        f"Gated domains: {', '.join(gated)}. Domains lacking: {', '.join(card['domains_lacking']) or 'none'}. "
        f"Benchmarks lacking: {', '.join(card['benchmarks_lacking']) or 'none'}.",
        "",
    ]
    return "\n".join(lines)
