"""Whether a measured evaluation's raw rows are all there: the `evaluation` asset's checks.

Why checks beside the scorer, which blanks or voids what lacks rows: an operator reading the
Dagster UI should see at a glance, per evaluation partition, that a landed evaluation is whole
(every timed pass of both engines with its requests, host and device samples, both engines'
starts) and that every gate has its inputs (both engines' greedy and fidelity probes, the
likelihood scoring of both engines' replies), before anyone reads its score. An evaluation that
is not `measured` (void, failed) ended early by design and is not judged here.
"""

from __future__ import annotations

from speculator_arena.protocol import load_protocol
from speculator_arena.protocol.model import WORKLOADS
from speculator_arena.rules.status import MEASURED
from speculator_arena.warehouse.evaluations import current_row
from speculator_arena.warehouse.store import Warehouse

ENGINES = ("candidate", "stock")


def _rows(wh: Warehouse, table: str, evaluation_id: str, columns: list[str]) -> list[dict]:
    t = wh.read_table(table, evaluation_id)
    return t.select([c for c in columns if c in t.column_names]).to_pylist() if t.num_rows else []


def judged(wh: Warehouse, evaluation_id: str) -> tuple[dict | None, object]:
    """(the evaluation's current row, its task's protocol under the version it ran under), or
    (row, None) when it is not measured or its task is not in that version."""
    row = current_row(wh, evaluation_id)
    if row is None or row["status"] != MEASURED:
        return row, None
    from speculator_arena.protocol.lowb import is_lowb_task

    if is_lowb_task(row["task_id"]):  # LowBArena's rows are judged by its scorer (blank with a reason)
        return row, None
    proto = load_protocol(row.get("protocol_version"))
    return row, (proto.task(row["task_id"]) if row["task_id"] in proto.tasks else None)


def missing_raw_rows(wh: Warehouse, evaluation_id: str, task) -> list[str]:
    """What a measured evaluation's raw rows lack: a timed pass of an engine, or its completion,
    its requests, its contention samples (versions that record them) or its device-memory samples
    (where the device was sampled); an engine's timed or probe start."""
    passes = _rows(wh, "passes", evaluation_id, ["pass_id", "engine", "status", "memory_status"])
    seen = {(p["engine"], p["pass_id"]): p for p in passes}
    requested = {(r["engine"], r["pass_id"]) for r in _rows(wh, "requests", evaluation_id, ["engine", "pass_id"])}
    host = {(r["engine"], r["pass_id"]) for r in _rows(wh, "contention", evaluation_id, ["engine", "pass_id"])}
    sampled = {(r["engine"], r["pass_id"]) for r in _rows(wh, "memory", evaluation_id, ["engine", "pass_id"])}
    out = []
    for engine in ENGINES:
        for w in WORKLOADS:
            for i in range(task.passes_per_workload):
                key, pid = (engine, f"{w}-{i}"), f"{w}-{i}"
                p = seen.get(key)
                if p is None:
                    out.append(f"{engine} {pid}: no passes row")
                    continue
                if p["status"] != "complete":
                    out.append(f"{engine} {pid}: pass {p['status']}")
                if key not in requested:
                    out.append(f"{engine} {pid}: no requests")
                if task.contention is not None and key not in host:
                    out.append(f"{engine} {pid}: no contention samples")
                if p.get("memory_status") == "sampled" and key not in sampled:
                    out.append(f"{engine} {pid}: device sampled but no memory rows")
    starts = {(r["engine"], r["purpose"]) for r in _rows(wh, "engine_starts", evaluation_id, ["engine", "purpose"])}
    out += [
        f"{e} {purpose} start: no engine_starts row"
        for e in ENGINES
        for purpose in ("timed", "probe")
        if (e, purpose) not in starts
    ]
    return out


def missing_gate_inputs(wh: Warehouse, evaluation_id: str, task) -> list[str]:
    """What a measured evaluation's gates lack: each engine's row for every greedy prompt and
    fidelity text the version asks for, and the likelihood scoring of each engine's replies."""
    g = task.gates
    out = []
    for table, n, what in (
        ("probe_greedy", g.greedy_agreement.prompts, "greedy prompts"),
        ("probe_fidelity", g.target_fidelity.texts, "fidelity texts"),
    ):
        rows = _rows(wh, table, evaluation_id, ["engine"])
        for engine in ENGINES:
            have = sum(r["engine"] == engine for r in rows)
            if have < n:
                out.append(f"{engine}: {have} of {n} {what}")
    scored = {r["reply_engine"] for r in _rows(wh, "probe_scored", evaluation_id, ["reply_engine"])}
    out += [f"no likelihood scoring of the {e}'s replies" for e in ENGINES if e not in scored]
    return out
