"""What an evaluation records about where and with what it ran, in its queued row's provenance.

Why it is kept: a score is only as good as the claim that it measured these engines, with this
code, on this host and device, in this order. The digests are of the engine trees as the runner
found them (and, for sealed submissions, the sealed store's digests and sources), so that a
later reader can tell whether a stored evaluation and a tree on disk are the same engine.
"""

from __future__ import annotations

import hashlib
import os
import socket
from pathlib import Path

from speculator_arena.runners.engines import placement_environment
from speculator_arena.runners.memory import Device
from speculator_arena.runners.privileges import isolation
from speculator_arena.runners.spec import REPO, EvaluationSpec, resolve_engine_path, stock_engine_of
from speculator_arena.sealed.store import sealed_provenance

PASS_ORDER = "per workload (solo, team, busy): one warm-up wave, then its passes in order"


def tree_digest(path: Path) -> str:
    h = hashlib.sha256()
    if path.is_file():
        h.update(path.read_bytes())
        return h.hexdigest()
    for f in sorted(p for p in path.rglob("*") if p.is_file()):
        h.update(str(f.relative_to(path)).encode() + b"\0")
        h.update(f.read_bytes())
    return h.hexdigest()


def code_commit() -> str | None:
    head = REPO / ".git" / "HEAD"
    try:
        ref = head.read_text().strip()
        if ref.startswith("ref: "):
            return (REPO / ".git" / ref[5:]).read_text().strip()
        return ref
    except OSError:
        return None


def provenance(spec: EvaluationSpec, home: Path, device: Device, task=None) -> dict:
    """Engine paths and digests, the sealed store's record, host, code commit, runner user, how the
    engines were isolated from the arena's files, device, pass order and the pairing's starts
    (`task`: the evaluation's `TaskProtocol`)."""
    eng = resolve_engine_path(spec.engine)
    stock = resolve_engine_path(stock_engine_of(spec))
    return {
        "engine_path": str(eng),
        "engine_digest": tree_digest(eng),
        "stock_engine_path": str(stock),
        "stock_engine_digest": tree_digest(stock),
        "speculator": spec.speculator,
        **sealed_provenance(spec.engine, spec.speculator, home),
        "host": socket.gethostname(),
        "code_commit": code_commit(),
        "runner_user": os.environ.get("USER") or str(os.geteuid()),
        "runner_is_root": os.geteuid() == 0,
        "placement": {
            "cpus": os.cpu_count(),
            "runner_cpus": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
            "engine_variables": placement_environment(task),
        },
        "engine_isolation": isolation(),
        "device": {
            "nvml": device.available,
            "reason": device.reason,
            "name": device.name,
            "total_bytes": device.total_bytes,
            "uuid": device.uuid,
        },
        "pass_order": PASS_ORDER,
        **(
            {
                "pairing": task.pairing,
                **(timed_starts(task, spec.evaluation_id) if hasattr(task, "pass_halves") else {}),
            }
            if task is not None
            else {}
        ),
        **({"artifact": spec.artifact} if spec.artifact else {}),
    }


def timed_starts(task, evaluation_id: str) -> dict:
    """What the pairing makes of the timed starts: each start with the passes it serves, and
    under the interleaved pairing who serves each pass first (`engine_order`: interleaved.pass_order)
    and the sliced pass's turn (`slice_seconds`)."""
    if task.pairing != "interleaved":
        return {"timed_starts": [{"engine": e, "passes": list(ix)} for e, ix in task.pass_halves()]}
    from speculator_arena.runners.interleaved import pass_order

    order = pass_order(evaluation_id, task.passes_per_workload)
    return {
        "timed_starts": [{"engine": e, "passes": list(range(task.passes_per_workload))} for e in order[0]],
        "engine_order": [list(pair) for pair in order],  # per pass: who serves it first, then second
        # each pass served by both at once in turns of this many seconds (sliced.py); null: one, then the other
        "slice_seconds": task.interleaving.slice_seconds,
    }
