"""Score every stored evaluation under one protocol version, from the raw rows only.

The scorer in three steps: the protocol version (or a candidate document) and its limits
(limits.py); every row the scorer reads, in one bundle (rows.py: the evaluations' raw rows
through the warehouse's packs where those are current, warehouse/packs.py, the busy-window
scan of their requests, busy_scan.py, and the SQL of sql/); and assemble.py, which turns those
rows into gates (gates/), SpecScore (outcome.py states the order of precedence), figures and
the dev/test gap flag, for all evaluations at once (docs/scoring.md gives each formula).
The result is recomputed whenever it is asked for, under whichever version is asked for; only
the per-request work, which no rule but the count slack enters, is kept between scorings
(scoring/request_store.py), and only while the raw rows it came from are unchanged.
"""

from __future__ import annotations

from speculator_arena.protocol import load_protocol
from speculator_arena.protocol.version_files import protocol_digest
from speculator_arena.scoring.assemble import assemble
from speculator_arena.scoring.limits import protocol_limits
from speculator_arena.scoring.result import Scores
from speculator_arena.scoring.rows import read_rows
from speculator_arena.scoring.timing import tick
from speculator_arena.warehouse.store import Warehouse


def score_warehouse(
    warehouse, protocol_version: int | None = None, evaluation_ids=None, document: dict | None = None
) -> Scores:
    """Score the stored evaluations (all, or `evaluation_ids`) under `protocol_version` (latest).

    `document`: a protocol document that is not (yet) a version, e.g. a calibration's candidate,
    scored as it would be once published (its evidence shows the scorer's own verdicts)."""
    wh = warehouse if isinstance(warehouse, Warehouse) else Warehouse(warehouse)
    if document is not None:
        from speculator_arena.protocol.model import Protocol
        from speculator_arena.protocol.version_files import document_digest

        proto, digest = Protocol.model_validate(document), document_digest(document)
    else:
        proto = load_protocol(protocol_version)
        digest = protocol_digest(proto.version)
    ids = None if evaluation_ids is None else [str(i) for i in evaluation_ids]
    t0: list = []
    tick("start", t0)
    limits = protocol_limits(proto)
    rows = read_rows(wh, proto, limits, ids, t0)
    out = assemble(proto, digest, limits, rows)
    tick("gates, figures, SpecScore (pandas)", t0)
    return out
