"""Each evaluation's outcome under a protocol version, written once per scoring, read without scoring.

Why a file: the quota (protocol section 8) refunds evaluations the scorer ends void (SCORING.md
"Outcomes": the stock engine without tokens on a pass, a gate not measured for the arena's
reasons, a contended host), and the front door must not run the scorer inside its SQLite write
lock to learn that. Every scoring (`registry.score_and_record`: `arena score`, the `scores`
asset, and the `evaluation` asset's scoring of the evaluation it ran) merges the rows it computed
into `$ARENA_HOME/scores/v<N>/outcomes.parquet`; readers take them as they are. Like the
convenience copy beside it, the file is derived and rebuildable (`arena score` rewrites it).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from speculator_arena.atomic import write_atomic

OUTCOMES = "outcomes.parquet"
SCHEMA = pa.schema(
    [
        ("evaluation_id", pa.string()),
        ("status", pa.string()),
        ("void", pa.bool_()),
        ("specscore", pa.float64()),
        ("specscore_reason", pa.string()),
        ("scored_at", pa.float64()),
    ]
)


def _text(v):
    return None if v is None or (isinstance(v, float) and v != v) else str(v)


def merge(directory, evaluations, scored_at: float) -> None:
    """Merge the scorer's evaluation rows into `directory/outcomes.parquet` (atomic replace):
    a row replaces the stored row of its evaluation, the others stay."""
    path = directory / OUTCOMES
    new = {
        str(r.evaluation_id): {
            "evaluation_id": str(r.evaluation_id),
            "status": _text(r.status),
            "void": bool(r.void),
            "specscore": None if r.specscore != r.specscore else float(r.specscore),
            "specscore_reason": _text(r.specscore_reason),
            "scored_at": scored_at,
        }
        for r in evaluations[["evaluation_id", "status", "void", "specscore", "specscore_reason"]].itertuples()
    }
    kept = [r for r in read(directory) if r["evaluation_id"] not in new]
    table = pa.Table.from_pylist(kept + list(new.values()), schema=SCHEMA)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    write_atomic(path, sink.getvalue().to_pybytes())


def read(directory) -> list[dict]:
    """The stored outcome rows of one version's directory ([] when none was written)."""
    path = directory / OUTCOMES
    if not path.is_file():
        return []
    return pq.read_table(path, schema=SCHEMA).to_pylist()


def voided(scores_root, evaluation_ids) -> set[str]:
    """Of `evaluation_ids`, those whose latest scoring (under any version) ended void."""
    wanted, latest = set(evaluation_ids), {}
    if not wanted or not scores_root.is_dir():
        return set()
    for d in scores_root.iterdir():
        for r in read(d) if d.is_dir() else ():
            eid = r["evaluation_id"]
            if eid in wanted and (eid not in latest or r["scored_at"] > latest[eid]["scored_at"]):
                latest[eid] = r
    return {eid for eid, r in latest.items() if r["void"]}
