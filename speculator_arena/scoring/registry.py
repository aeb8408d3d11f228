"""Pin each protocol version to the digest it was first scored under; keep a convenience copy.

Why: a version is immutable once anything was scored under it. If the document of version N
changes after scores were published under N, every stored score of N would silently change;
refusing here forces the change into a new version N+1. The Parquet copy of the evaluations
frame under `$ARENA_HOME/scores/v<N>/` is for people who want a file: it is not authoritative
and is rewritten at every scoring of the whole warehouse (scores are always recomputed from raw
rows). Every scoring, of all evaluations or of some, also merges its evaluations' outcomes into
`outcomes.parquet` beside it (scoring/outcomes.py), which the quota reads.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from speculator_arena.atomic import write_atomic
from speculator_arena.diskspace import full_disk
from speculator_arena.errors import ArenaError
from speculator_arena.protocol.version_files import protocol_digest
from speculator_arena.scoring import outcomes
from speculator_arena.warehouse.store import Warehouse


class ProtocolChangedError(ValueError, ArenaError):
    """A protocol version's document differs from the one its stored scores were made under."""


def scores_root(warehouse: Warehouse) -> Path:
    """Every version's scores folder lies under this one."""
    return warehouse.home / "scores"


def scores_dir(warehouse: Warehouse, version: int) -> Path:
    return scores_root(warehouse) / f"v{version}"


def check_unchanged(warehouse: Warehouse, version: int) -> str:
    """Return the version's digest; raise when it differs from the digest first scored under."""
    digest = protocol_digest(version)
    pin = scores_dir(warehouse, version) / "protocol.json"
    if pin.exists():
        recorded = json.loads(pin.read_text())["digest"]
        if recorded != digest:
            raise ProtocolChangedError(
                f"protocol v{version} changed since it was first scored (digest {recorded[:12]} recorded at "
                f"{pin}, now {digest[:12]}); versions are immutable once used: publish the change as a new version"
            )
    return digest


def record(warehouse: Warehouse, scores, *, whole: bool = True) -> Path | None:
    """Pin the digest (first time only), merge the outcomes, and (`whole`: the scoring covered
    every stored evaluation) write the convenience copy of the evaluations frame."""
    d = scores_dir(warehouse, scores.protocol_version)
    check_unchanged(warehouse, scores.protocol_version)
    pin = d / "protocol.json"
    if not pin.exists():
        write_atomic(
            pin,
            json.dumps(
                {"version": scores.protocol_version, "digest": scores.protocol_digest, "first_scored_at": time.time()},
                indent=2,
            ).encode(),
        )
    outcomes.merge(d, scores.evaluations, time.time())
    if not whole:
        return None
    import pyarrow as pa
    import pyarrow.parquet as pq

    frame = scores.evaluations.copy()
    for c in frame.columns:
        if frame[c].dtype == object:
            frame[c] = frame[c].map(lambda v: None if v is None or (isinstance(v, float) and v != v) else str(v))
    table = pa.Table.from_pandas(frame, preserve_index=False)
    table = table.replace_schema_metadata(
        {
            **(table.schema.metadata or {}),
            b"arena_note": b"convenience copy, not authoritative: recompute with arena score",
            b"protocol_digest": scores.protocol_digest.encode(),
        }
    )
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    out = d / "evaluations.parquet"
    write_atomic(out, sink.getvalue().to_pybytes())
    write_atomic(
        d / "README.txt",
        (
            f"Scores under protocol v{scores.protocol_version} (digest {scores.protocol_digest}).\n"
            "evaluations.parquet is a convenience copy, NOT authoritative: scores are recomputed from the raw rows\n"
            "by `arena score --protocol N`; protocol.json pins the digest this version was first scored under.\n"
        ).encode(),
    )
    return out


def score_and_record(warehouse: Warehouse, version: int | None = None, evaluation_ids=None, *, keep=None):
    """Check immutability, score, record. What `arena score`, the `scores` asset and the
    `evaluation` asset (for the evaluation it ran: `evaluation_ids`) call.

    `keep`: a keeper of what was just scored (the board's score store, `board/fill.py`, which
    the assets and the publisher pass: the board ranks above the scorer, so the scorer takes it
    as an argument instead of importing it), with `prepare(home, ids)` called before the scorer
    reads the rows and `record(home, scores, prepared)` after. It never fails a scoring.

    The scores are computed from the raw rows whatever happens to the record: when the disk is
    full the scores are returned all the same, with `copy_error` saying what was not written
    (the pin is written again by the next scoring that has room; nothing authoritative is lost)."""
    from speculator_arena.protocol import load_protocol
    from speculator_arena.scoring.score import score_warehouse

    version = load_protocol(version).version
    check_unchanged(warehouse, version)
    prints = _prepare_keep(keep, warehouse, evaluation_ids)
    scores = score_warehouse(warehouse, version, evaluation_ids)
    _keep(keep, warehouse, scores, prints)
    try:
        scores.copy_path = record(warehouse, scores, whole=evaluation_ids is None)
    except OSError as exc:
        full = full_disk(exc, warehouse.home)
        if full is None:
            raise
        scores.copy_error = str(full)
    return scores


# what a keeper (the board's score store, board/fill.py) may raise: it never fails a scoring, the
# board scores what it lacks
_KEEP_ERRORS = (OSError, ValueError, KeyError, TypeError)


def _prepare_keep(keep, warehouse: Warehouse, evaluation_ids) -> dict | None:
    """What the keeper takes before the scorer reads (board/fill.py: the rows' fingerprints)."""
    if keep is None:
        return None
    try:
        return keep.prepare(warehouse.home, evaluation_ids)
    except _KEEP_ERRORS:
        return None


def _keep(keep, warehouse: Warehouse, scores, prepared) -> None:
    if keep is None:
        return
    try:
        keep.record(warehouse.home, scores, prepared)
    except _KEEP_ERRORS:
        pass
