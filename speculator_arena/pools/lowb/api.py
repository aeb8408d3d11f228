"""How the runner reads a LowBArena task's item pool: items, KL probe prompts, workload prompts
and which domains the pool has. Read only; built by `build.build_items`.

Why through this module only: the hidden split lives under the root-only folder and its text must
reach no public surface; one reader keeps the paths, the error wording and the id rules in one
place, and every error is an `ItemPoolError` (an `ArenaError`) that names the file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from speculator_arena.pools.hashing import seed_of
from speculator_arena.pools.lowb import folders
from speculator_arena.pools.lowb.model import Item, ItemPoolError
from speculator_arena.pools.lowb.text import encode, exact_window, tokenizer_of

SPLITS = ("dev", "test")


@dataclass(frozen=True)
class DomainCoverage:
    """The gated domains the pool has items of and those it lacks, and the same by benchmark."""

    gated_present: list[str]
    gated_lacking: list[str]
    reported_present: list[str]  # not gated (expert): reported only
    benchmarks_present: list[str]
    benchmarks_lacking: list[str]


def _root(task_id: str, home) -> Path:
    root = folders.items_root(task_id, home)
    if not root.exists():
        raise ItemPoolError(f"{task_id}: its LowBArena items are not built ({root}); build them with build_items")
    return root


def _rows(path: Path, split: str, task_id: str) -> list[dict]:
    if not path.is_file():
        hint = " (the hidden split is built only with the operators' key: ARENA_POOL_KEY)" if split != "dev" else ""
        raise ItemPoolError(f"{task_id}: no {split} items at {path}{hint}")
    rows = []
    try:
        with open(path, encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                if line.strip():
                    try:
                        rows.append(json.loads(line))
                    except ValueError as exc:
                        raise ItemPoolError(f"{path}:{n}: broken item file: {exc}") from exc
    except OSError as exc:
        raise ItemPoolError(f"{path}: cannot read: {exc}") from exc
    return rows


def load_items(task_id: str, split: str, home=None) -> list[Item]:
    """The split's items, in the pool's order."""
    if split not in SPLITS:
        raise ItemPoolError(f"unknown split {split!r}; splits: {SPLITS}")
    path = folders.split_file(_root(task_id, home), split, folders.ITEMS)
    out = []
    for n, row in enumerate(_rows(path, split, task_id), 1):
        try:
            out.append(Item.from_row(row))
        except (KeyError, TypeError, ValueError) as exc:
            raise ItemPoolError(f"{path}: item {n} is broken: {type(exc).__name__}: {exc}") from exc
    return out


def kl_prompts(task_id: str, split: str, home=None, n: int | None = None) -> list[tuple[str, str]]:
    """(prompt_id, text) for the KL probe: the split's natural text, each at most the task's
    `kl_probe.max_prompt_tokens`. Fewer than `n` stored is an error (the probe would be short)."""
    path = folders.split_file(_root(task_id, home), split, folders.KL_PROMPTS)
    rows = _rows(path, split, task_id)
    if n is not None and len(rows) < n:
        raise ItemPoolError(f"{task_id}: {len(rows)} KL prompts in the {split} split, {n} asked")
    try:
        return [(str(r["prompt_id"]), str(r["text"])) for r in rows[: n if n is not None else len(rows)]]
    except KeyError as exc:
        raise ItemPoolError(f"{path}: a KL prompt lacks {exc}") from exc


def domains(task_id: str, home=None) -> DomainCoverage:
    """Which gated domains the built pool has items of, and which it lacks (from its data card)."""
    path = folders.card_file(_root(task_id, home))
    try:
        card = json.loads(path.read_text(encoding="utf-8"))
        doms = card["domains"]
    except (OSError, ValueError, KeyError) as exc:
        raise ItemPoolError(f"{path}: the data card is missing or broken: {exc}") from exc
    return DomainCoverage(
        gated_present=sorted(d for d, s in doms.items() if s["gated"] and s["present"]),
        gated_lacking=sorted(d for d, s in doms.items() if s["gated"] and not s["present"]),
        reported_present=sorted(d for d, s in doms.items() if not s["gated"] and s["present"]),
        benchmarks_present=sorted(b for s in doms.values() for b in s["present"]),
        benchmarks_lacking=list(card.get("benchmarks_lacking", [])),
    )


@lru_cache(maxsize=4)
def _material_ids(path: str, mtime: float, tok) -> tuple[int, ...]:
    """The public material as one token stream (documents joined by a blank line)."""
    texts = [r["text"] for r in _rows(Path(path), "dev", "material")]
    if not texts:
        raise ItemPoolError(f"{path}: no workload material")
    return tuple(encode(tok, "\n\n".join(texts)))


def workload_prompts(
    task_id: str,
    evaluation_id: str,
    workload: str,
    pass_index: int,
    n: int,
    prompt_tokens: int,
    tokenizer,
    home=None,
) -> list[tuple[str, str]]:
    """(request_id, prompt text) for one timed pass: `n` windows of the public material, each
    exactly `prompt_tokens` tokens by `tokenizer` (a tokenizer or its directory). The same
    evaluation, workload and pass give the same prompts (both engines get them); another pass
    starts its windows elsewhere."""
    tok = tokenizer_of(tokenizer)
    path = folders.split_file(_root(task_id, home), "dev", folders.MATERIAL)
    if not path.is_file():
        raise ItemPoolError(f"{task_id}: no workload material at {path}; rebuild the items")
    ids = list(_material_ids(str(path), path.stat().st_mtime, tok))
    if len(ids) < prompt_tokens + 16:
        raise ItemPoolError(f"{task_id}: the material holds {len(ids)} tokens, a prompt needs {prompt_tokens}")
    out = []
    for i in range(n):
        start = seed_of("lowb-workload", task_id, evaluation_id, workload, pass_index, i) % (len(ids) - prompt_tokens)
        text = exact_window(tok, ids, start, prompt_tokens)
        if text is None:
            raise ItemPoolError(f"{task_id}: no window of exactly {prompt_tokens} tokens near token {start}")
        out.append((f"{workload}-{pass_index}-{i}", text))
    return out
