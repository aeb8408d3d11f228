"""What the runner reads: `load_pool(task_id, split)` and the pool's per-evaluation queues.

How passes stay fresh and disjoint without knowing how many sessions each pass will use: per
evaluation the pool's sessions are put in a seeded order (per family, then merged in the
family mix), and that order is cut into one contiguous block per (workload, pass), sized by
the workload's live sessions (lanes x interleave). A pass reads only its own block, so no
session serves twice in an evaluation, whatever `n` each pass asks for; asking for more than
a block holds is an error, never a silent overlap. Warm-up sessions come from a separate set.
Every pass salts its sessions' shared system prompt with a header line derived from
(evaluation, workload, pass), so no shared prefix repeats across passes, and both engines of
an evaluation get exactly the same sessions, salts and order.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from functools import cached_property
from pathlib import Path

import numpy as np

from speculator_arena.errors import ArenaError
from speculator_arena.pools.hashing import seed_of
from speculator_arena.pools.layout import pool_root, read_jsonl, split_folder
from speculator_arena.pools.model import FidelityText, Probe, Session, Turn
from speculator_arena.protocol import load_protocol
from speculator_arena.rules.slots import live_slots

__all__ = [
    "FidelityText",
    "Pool",
    "PoolExhausted",
    "PoolNotBuilt",
    "PoolShort",
    "Probe",
    "Session",
    "Turn",
    "load_pool",
    "require_sessions",
    "salt_line",
    "shortfall",
]

SPLITS = ("dev", "test")


class PoolNotBuilt(FileNotFoundError, ArenaError):
    """The pool was not built (run `arena pools build --task T`)."""


class PoolExhausted(ValueError, ArenaError):
    """A pass asked for more sessions than its block of the pool holds."""


class PoolShort(PoolExhausted):
    """A pool that cannot supply the protocol's sessions for every pass (or its warm-up, probes,
    fidelity texts): the runner refuses it rather than run fewer lanes. `.numbers` holds
    needed and available per workload."""

    def __init__(self, message: str, numbers: dict):
        super().__init__(message)
        self.numbers = numbers


def salt_line(evaluation_id: str, workload: str, pass_index: int | str) -> str:
    digest = hashlib.sha256(f"salt|{evaluation_id}|{workload}|{pass_index}".encode()).hexdigest()[:12]
    return f"[session set {digest}]"


class Pool:
    """One built split of one task's pool."""

    def __init__(self, task_id: str, split: str, folder: Path, root: Path):
        self.task_id = task_id
        self.split = split
        self.folder = folder
        self.root = root
        self.task = load_protocol().task(task_id)
        self.manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))

    @classmethod
    def at(cls, task_id: str, split: str, root: Path) -> Pool:
        """The split of the pool whose root is `root`: a build's own folder, or a served pool's
        resolved link."""
        return cls(task_id, split, split_folder(root, split), root)

    # ---- stored records ----------------------------------------------------------------------
    @cached_property
    def sessions(self) -> list[Session]:
        return [Session.from_json(d) for d in read_jsonl(self.folder / "sessions.jsonl")]

    @cached_property
    def warmup_sessions(self) -> list[Session]:
        return [Session.from_json(d) for d in read_jsonl(self.folder / "warmup.jsonl")]

    # ---- allocation --------------------------------------------------------------------------
    def _order(self, evaluation_id: str, items: list[Session], tag: str) -> list[Session]:
        rng = np.random.default_rng(seed_of(self.task_id, self.split, evaluation_id, tag))
        fams = sorted({s.family for s in items})
        by = {f: [items[i] for i in rng.permutation([j for j, s in enumerate(items) if s.family == f])] for f in fams}
        share = {f: len(by[f]) / len(items) for f in fams}
        out, taken = [], dict.fromkeys(fams, 0)
        while len(out) < len(items):
            f = min((f for f in fams if taken[f] < len(by[f])), key=lambda f: (taken[f] + 1) / share[f])
            out.append(by[f][taken[f]])
            taken[f] += 1
        return out

    def blocks(self) -> dict[tuple[str, int], tuple[int, int]]:
        """(workload, pass) -> [start, end) in the evaluation's order of timed sessions."""
        weights = live_slots(self.task)
        passes = self.task.passes_per_workload
        total = sum(weights.values()) * passes
        n = len(self.sessions)
        out, start = {}, 0
        for w in self.task.workloads:
            for p in range(passes):
                size = int(n * weights[w] / total)
                out[(w, p)] = (start, start + size)
                start += size
        return out

    def _check(self, workload: str, pass_index: int | None = None) -> None:
        if workload not in self.task.workloads:
            raise ValueError(f"unknown workload {workload!r}; workloads: {sorted(self.task.workloads)}")
        if pass_index is not None and not 0 <= pass_index < self.task.passes_per_workload:
            raise ValueError(f"pass_index must be in [0, {self.task.passes_per_workload}), got {pass_index}")

    @staticmethod
    def _salted(s: Session, salt: str) -> Session:
        system = f"{salt}\n{s.system_prompt}" if s.system_prompt else salt
        return replace(s, system_prompt=system)

    def passes(self, evaluation_id: str, workload: str, pass_index: int, n: int) -> list[Session]:
        """The first `n` sessions of this pass's block, salted for this pass."""
        self._check(workload, pass_index)
        start, end = self.blocks()[(workload, pass_index)]
        if n > end - start:
            raise PoolExhausted(
                f"{self.task_id}/{self.split}: pass {workload}-{pass_index} asked for {n} sessions; "
                f"its block holds {end - start} (pool {len(self.sessions)} sessions)"
            )
        order = self._order(evaluation_id, self.sessions, "timed")
        salt = salt_line(evaluation_id, workload, pass_index)
        return [self._salted(s, salt) for s in order[start : start + n]]

    def warmup_blocks(self) -> dict[str, tuple[int, int]]:
        """workload -> (start, size) in the evaluation's order of warm-up sessions."""
        weights = live_slots(self.task)
        total = sum(weights.values())
        out, start = {}, 0
        for w in self.task.workloads:
            size = int(len(self.warmup_sessions) * weights[w] / total)
            out[w] = (start, size)
            start += size
        return out

    def warmup(self, evaluation_id: str, workload: str, n: int) -> list[Session]:
        """Warm-up sessions for one workload: from the warm-up set, which no pass sends."""
        self._check(workload)
        start, size = self.warmup_blocks()[workload]
        items = self.warmup_sessions
        if n > size:
            raise PoolExhausted(f"{self.task_id}/{self.split}: warm-up for {workload} asked for {n}; it holds {size}")
        order = self._order(evaluation_id, items, "warmup")
        salt = salt_line(evaluation_id, workload, "warmup")
        return [self._salted(s, salt) for s in order[start : start + n]]

    # ---- probes ------------------------------------------------------------------------------
    def greedy_prompts(self, n: int) -> list[Probe]:
        rows = read_jsonl(self.root / "probes.jsonl")
        if n > len(rows):
            raise PoolExhausted(f"{self.task_id}: {n} greedy prompts asked; the pool holds {len(rows)}")
        return [Probe(r["prompt_id"], r["messages"]) for r in rows[:n]]

    def fidelity_texts(self, n: int) -> list[FidelityText]:
        rows = read_jsonl(self.folder / "fidelity.jsonl")
        if n > len(rows):
            raise PoolExhausted(f"{self.task_id}/{self.split}: {n} fidelity texts asked; the pool holds {len(rows)}")
        return [FidelityText(r["text_id"], r["messages"], r["reply"]) for r in rows[:n]]


def shortfall(pool: Pool) -> dict:
    """What the protocol needs of this pool against what it holds: per workload, the sessions
    of the smallest pass block against the live sessions (lanes x interleave) a pass keeps,
    and the warm-up sessions against the lanes; then the probe prompts and fidelity texts."""
    t = pool.task
    blocks = pool.blocks()
    warmups = pool.warmup_blocks()
    out: dict = {"pool_sessions": len(pool.sessions), "workloads": {}, "short": []}
    for w in t.workloads:
        live = live_slots(t)[w]
        per_pass = [b - a for (wl, _), (a, b) in blocks.items() if wl == w]
        warm = warmups[w][1]
        out["workloads"][w] = {
            "passes": len(per_pass),
            "needed_per_pass": live,
            "available_per_pass": min(per_pass, default=0),
            "warmup_needed": t.lanes[w],
            "warmup_available": warm,
        }
        if min(per_pass, default=0) < live:
            out["short"].append(
                f"{w}: {min(per_pass, default=0)} sessions per pass available, {live} needed "
                f"({t.lanes[w]} lanes x {t.workloads[w].interleave}) for each of {len(per_pass)} passes"
            )
        if warm < t.lanes[w]:
            out["short"].append(f"{w}: {warm} warm-up sessions available, {t.lanes[w]} needed")
    g = t.gates
    probes = len(read_jsonl(pool.root / "probes.jsonl")) if (pool.root / "probes.jsonl").is_file() else 0
    fid = len(read_jsonl(pool.folder / "fidelity.jsonl")) if (pool.folder / "fidelity.jsonl").is_file() else 0
    out["greedy_prompts"] = {"needed": g.greedy_agreement.prompts, "available": probes}
    out["fidelity_texts"] = {"needed": g.target_fidelity.texts, "available": fid}
    for k in ("greedy_prompts", "fidelity_texts"):
        if out[k]["available"] < out[k]["needed"]:
            out["short"].append(f"{k.replace('_', ' ')}: {out[k]['available']} available, {out[k]['needed']} needed")
    return out


def require_sessions(pool: Pool) -> Pool:
    """The pool, or `PoolShort` with the numbers when it cannot supply every pass in full."""
    numbers = shortfall(pool)
    if numbers["short"]:
        raise PoolShort(
            f"the {pool.split} pool of {pool.task_id} ({numbers['pool_sessions']} timed sessions) is short of "
            f"what protocol v{pool.task.protocol_version} needs: "
            + "; ".join(numbers["short"])
            + f". Add sources (docs/pools.md) and run `arena pools build --task {pool.task_id}`",
            numbers,
        )
    return pool


def load_pool(task_id: str, split: str, home=None, *, require: bool = True) -> Pool:
    """The built pool of a task's split; a clear error when it was not built, and `PoolShort`
    when it cannot supply the protocol's sessions for every pass (`require=False` to inspect
    a short pool). The served link is resolved once, so a running evaluation keeps reading the
    build it opened while a rebuild switches the served pool."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    root = pool_root(task_id, home)
    folder = split_folder(root, split)
    if not (folder / "manifest.json").is_file() or not (root / "probes.jsonl").is_file():
        hint = " (the hidden pool needs the operators' key: ARENA_POOL_KEY)" if split == "test" else ""
        raise PoolNotBuilt(
            f"no {split} pool for {task_id} under {root}: run `arena pools build --task {task_id}`{hint}"
        )
    pool = Pool.at(task_id, split, root.resolve())
    return require_sessions(pool) if require else pool
