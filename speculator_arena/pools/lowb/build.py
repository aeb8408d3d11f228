"""`build_items(task_id, home, key)`: a LowBArena task's item pool, KL probe prompts, workload
prompt material and data card, built whole into a fresh folder and then switched to.

Why one build for all of it: the items, the KL prompts and the card describe the same split of
the same sources; built together they cannot disagree, and a failed build (a broken declared
file, a generator that fails) leaves the pool served before untouched. Deterministic: the same
sources, key and tokenizer give the same files.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import time
from pathlib import Path

from speculator_arena.pools.hashing import key_id
from speculator_arena.pools.layout import data_card_dir, ensure_hidden, private_files, split_folder, write_jsonl
from speculator_arena.pools.lowb import folders, ruler_items, selection, sources
from speculator_arena.pools.lowb.card import render_card
from speculator_arena.pools.lowb.model import Candidate, Item, ItemPoolError
from speculator_arena.pools.lowb.protocol_data import lowb_domains, lowb_task, protocol_version
from speculator_arena.pools.lowb.text import cut, tokenizer_of
from speculator_arena.pools.settings import operator_key


def build_items(task_id: str, home=None, key: bytes | str | None = None, *, tokenizer=None, sources_file=None) -> dict:
    """Build the task's items; returns the data card's summary (counts only, no text).

    `key`: the operators' split key (default: ARENA_POOL_KEY / ARENA_POOL_KEY_FILE); without one
    only the public split is built. `tokenizer`: the target's checkpoint directory (default: the
    task's sealed target, `checkpoints.prepare_checkpoint`). `sources_file`: an operator's
    sources YAML (default: the package's `sources.yaml`)."""
    task = lowb_task(task_id)
    key = key.encode() if isinstance(key, str) else key
    key = key if key is not None else operator_key()
    tok_dir = str(tokenizer) if tokenizer is not None else _target_dir(task_id, home)
    tok = tokenizer_of(tok_dir)
    entries = _protocol_entries(sources.load_sources(sources_file))
    splits = ["dev"] + (["test"] if key is not None else [])
    build = folders.builds_root(task_id, home) / f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
    build.mkdir(parents=True)
    try:
        cache: dict[str, list[Candidate]] = {}
        counts: dict[str, dict[str, int]] = {}
        for split in splits:
            items, texts = _split_items(task, entries, split, key, tok_dir, cache)
            kl = _kl_prompts(tok, task, split, key, texts)
            folder = split_folder(build, split)
            if split != "dev":
                ensure_hidden(build)
            folder.mkdir(parents=True, exist_ok=True)
            write_jsonl(folder / folders.ITEMS, [i.to_row() for i in items])
            write_jsonl(folder / folders.KL_PROMPTS, kl)
            if split != "dev":
                private_files(folder)
            counts[split] = {"items": _per_domain(items), "kl_prompts": len(kl)}
            counts[split]["kl_prompts_wanted"] = int(task["kl_probe"]["prompts"][split])
            if split == "dev":
                write_jsonl(split_folder(build, "dev") / folders.MATERIAL, _material(entries, cache, key))
        _check_disjoint(build, splits)
        card = _card(task_id, task, entries, counts, key, tok_dir)
        data_card_dir(build).mkdir()
        (folders.card_file(build)).write_text(json.dumps(card, indent=2, sort_keys=True) + "\n")
        (data_card_dir(build) / "card.md").write_text(render_card(card))
        folders.switch(task_id, build, home)
    except BaseException:
        shutil.rmtree(build, ignore_errors=True)
        raise
    return card


def _target_dir(task_id: str, home) -> str:
    from speculator_arena.checkpoints import prepare_checkpoint

    try:
        return str(prepare_checkpoint(task_id, home))
    except KeyError as exc:
        raise ItemPoolError(
            f"{task_id}: its sealed target cannot be prepared yet ({exc}); pass the target's checkpoint "
            "directory as `tokenizer`"
        ) from exc


def _protocol_entries(entries: list[dict]) -> list[dict]:
    """The declared sources of the protocol's benchmarks, each with its domain."""
    domain_of = {b: d for d, spec in lowb_domains().items() for b in spec["benchmarks"]}
    return [dict(e, domain=domain_of[e["benchmark"]]) for e in entries if e["benchmark"] in domain_of]


def _candidates(entry: dict, split: str, want: int | None, key, tok_dir: str, task: dict, cache: dict) -> list:
    """The entry's candidates for a split, in the split's order."""
    if entry["kind"] == "ruler":
        gens = len(entry["generators"])
        n = int(entry.get("samples_per_generator", 32)) if want is None else max(1, math.ceil(want / gens))
        made = ruler_items.generate(entry, split, n, int(task["items"]["ruler_context_tokens"]), tok_dir, key)
        by_gen: dict[str, list[Candidate]] = {}
        for c in made:
            by_gen.setdefault(c.grader["task"], []).append(c)
        return selection.take(list(by_gen.values()), None)
    if entry["benchmark"] not in cache:
        cache[entry["benchmark"]] = sources.read_candidates(entry)
    return selection.split_order(cache[entry["benchmark"]], split, key)


def _split_items(task: dict, entries: list[dict], split: str, key, tok_dir: str, cache: dict):
    want = task["items"]["per_domain"][split]
    max_tokens = int(task["items"]["max_tokens"])
    items: list[Item] = []
    texts: list[Candidate] = []
    for domain in lowb_domains():
        present = [e for e in entries if e["domain"] == domain and sources.available(e)]
        ordered = [_candidates(e, split, want, key, tok_dir, task, cache) for e in present]
        for c in selection.take(ordered, want):
            iid = selection.item_id(c, split, key)
            items.append(Item(iid, domain, c.benchmark, c.messages, max_tokens, c.grader))
        texts += [c for row in ordered for c in row if c.text]
    return items, texts


def _kl_prompts(tok, task: dict, split: str, key, texts: list[Candidate]) -> list[dict]:
    """Natural text of the split's items, each cut to the probe's `max_prompt_tokens`."""
    limit = int(task["kl_probe"]["max_prompt_tokens"])
    wanted = int(task["kl_probe"]["prompts"][split])
    out, seen = [], set()
    for c in sorted(texts, key=lambda c: selection.text_id(c.source_id, split, key, "kl")):
        text, n = cut(tok, c.text, limit)
        if n < 16 or text in seen:
            continue
        seen.add(text)
        out.append({"prompt_id": selection.text_id(c.source_id, split, key, "kl"), "text": text, "tokens": n})
        if len(out) == wanted:
            break
    return out


def _material(entries: list[dict], cache: dict, key) -> list[dict]:
    """Public real text for the workloads' prompts: the public items' natural text and RULER's
    bundled essays (the haystack RULER itself reads; public, never hidden)."""
    docs = [
        c.text
        for e in entries
        if e["benchmark"] in cache
        for c in selection.split_order(cache[e["benchmark"]], "dev", key)
        if c.text
    ]
    for e in entries:
        if e["kind"] == "ruler" and sources.available(e):
            essays = ruler_items._synthetic_dir(e) / "json" / "PaulGrahamEssays.json"
            if essays.is_file():
                docs.append(json.loads(essays.read_text(encoding="utf-8"))["text"])
    return [{"doc": i, "text": t} for i, t in enumerate(docs)]


def _per_domain(items: list[Item]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for i in items:
        out.setdefault(i.domain, {}).setdefault(i.benchmark, 0)
        out[i.domain][i.benchmark] += 1
    return out


def _check_disjoint(build: Path, splits: list[str]) -> None:
    """No item or KL text in two splits (the hidden items never reach a public file)."""
    if len(splits) < 2:
        return
    from speculator_arena.pools.layout import read_jsonl

    def texts(split: str) -> set[str]:
        rows = read_jsonl(folders.split_file(build, split, folders.ITEMS))
        kl = read_jsonl(folders.split_file(build, split, folders.KL_PROMPTS))
        return {m["content"] for r in rows for m in r["messages"]} | {r["text"] for r in kl}

    shared = texts("dev") & texts("test")
    if shared:
        raise ItemPoolError(f"{len(shared)} texts are in both the public and the hidden split")


def _card(task_id: str, task: dict, entries: list[dict], counts: dict, key, tok_dir: str) -> dict:
    domains = lowb_domains()
    have = {e["benchmark"] for e in entries if sources.available(e)}
    return {
        "task_id": task_id,
        "arena": "lowbarena",
        "protocol_version": protocol_version(),
        "key_id": key_id(key) if key is not None else None,
        "splits": sorted(counts),
        "tokenizer": Path(tok_dir).name,
        "ruler_context_tokens": task["items"]["ruler_context_tokens"],
        "per_domain": task["items"]["per_domain"],
        "counts": counts,
        "sources": [
            {
                "benchmark": e["benchmark"],
                "domain": e["domain"],
                "name": e.get("name", e["benchmark"]),
                "kind": e["kind"],
                "upstream": e.get("upstream"),
                "declared_version": e.get("version"),
                "installed_version": sources.installed_version(e),
                "license": e.get("license"),
                "present": e["benchmark"] in have,
            }
            for e in entries
        ],
        "benchmarks_lacking": sorted({b for s in domains.values() for b in s["benchmarks"]} - have),
        "domains": {
            d: {"gated": bool(s["gated"]), "present": [b for b in s["benchmarks"] if b in have]}
            for d, s in domains.items()
        },
        "domains_lacking": sorted(d for d, s in domains.items() if not any(b in have for b in s["benchmarks"])),
    }
