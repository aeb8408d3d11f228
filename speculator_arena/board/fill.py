"""The scorer fills the board's score store (board/store.py) with what it has just scored.

Why: the `evaluation` asset scores each evaluation as it lands, and the `scores` asset and a
publication score the whole warehouse; without this, the first board read after a landing
scored the new evaluation again (about 0.3 s for one at 10,000 evaluations, seconds for the
candidates after a new protocol version). They pass this module to `scoring/registry.py`
`score_and_record` as its keeper (`keep=fill`: the scorer ranks below the board and does not
import it), which calls `prepare` before it scores and `record` after, so the next board read,
in any process, takes the rows from the store and scores nothing. `arena score` (the scorer's
own command) keeps nothing: the board scores what it lacks.

The store's rule holds (board/store.py): a row is stored with the fingerprint of its raw
partitions taken BEFORE the scorer read them (warehouse/catalog.py `fingerprints`), and only a
trusted one (never racy): a partition written less than the catalog's racy window ago is
waited for (at most that window, 0.1 s on filesystems with fine mtimes) before the
fingerprints are taken. Which rows: the evaluations asked for (the `evaluation` asset's one),
or, for a whole-warehouse scoring, only the board's candidates (each group's last finished
evaluation, catalog.latest_finished): the board reads the store whole, so it must hold what
the board shows, not every evaluation ever scored. Best effort: a store that cannot be
written leaves the scoring's result as it is, and the board scores what it lacks.
"""

from __future__ import annotations

import os
import time

import numpy as np
import pandas as pd

from speculator_arena.board import store
from speculator_arena.warehouse import catalog, parts
from speculator_arena.warehouse.schema import TABLES


def _wait_until_trusted(home: str, ids: list[str]) -> None:
    """Sleep until every partition of `ids` is older than the racy window (skipped when that
    would be longer than the coarse window: a clock ahead of the files)."""
    m = np.array([parts.partition_mtime(home, t, e) for e in ids for t in TABLES], dtype=np.int64)
    if not len(m):
        return
    window = np.where((m % 1_000_000_000) == 0, catalog.RACY_NS, catalog.RACY_FINE_NS)
    need = int(((m + window) - time.time_ns())[m >= 0].max(initial=0)) + 1_000_000
    if 0 < need <= catalog.RACY_NS + 1_000_000:
        time.sleep(need / 1e9)


def prepare(home: str | os.PathLike, evaluation_ids) -> dict[str, tuple] | None:
    """Before scoring: the fingerprints of the evaluations whose rows `record` will store (id ->
    fingerprint; racy ones left out), or None when the store is off."""
    from speculator_arena.board.data import index_frame
    from speculator_arena.board.memo import _fingerprints

    if not store.enabled():
        return None
    home = str(home)
    if evaluation_ids is None:
        table, _ = catalog.read_evaluations(home)
        ids = sorted(catalog.latest_finished(index_frame(table)))
    else:
        ids = sorted(set(evaluation_ids))
    if not ids:
        return {}
    _wait_until_trusted(home, ids)
    prints = _fingerprints(home, ids, time.time_ns())
    return {eid: p for eid, p in prints.items() if len(p) == len(TABLES)}


def record(home: str | os.PathLike, scores, prints: dict[str, tuple] | None):
    """After scoring: the scorer's rows (and bootstrap intervals) of the evaluations `prints`
    names, merged into the store's newest generation for the scores' protocol version. Returns
    the generation written, or None (off, nothing to store, or not writable)."""
    from speculator_arena.board.memo import FRAMES, INTERVALS, _joined, _rows_of, _without
    from speculator_arena.scoring.intervals import bootstrapped_intervals

    if not prints or scores is None:
        return None
    ev = scores.evaluations
    scored = set(ev["evaluation_id"].astype(str)) if "evaluation_id" in ev.columns else set()
    ids = sorted(e for e in prints if e in scored)
    if not ids:
        return None
    new = {name: _rows_of(getattr(scores, name).copy(), ids) for name in FRAMES}
    try:
        drawn = bootstrapped_intervals(new["evaluations"], new["passes"])
    except ValueError:  # a SpecScore without its pass ratios: the board draws (and raises) as before
        drawn = {}
    new[INTERVALS] = pd.DataFrame(
        {
            "evaluation_id": pd.Series(sorted(drawn), dtype=object),
            "boot_low": [drawn[e][0] for e in sorted(drawn)],
            "boot_high": [drawn[e][1] for e in sorted(drawn)],
        }
    )
    version, digest = int(scores.protocol_version), str(scores.protocol_digest)
    loaded = store.load(home, version, digest)
    kept = {eid: p for eid, p in prints.items() if eid in ids}
    if loaded is not None:
        old, old_prints = loaded
        new = {name: _joined(_without(old[name], ids), df) for name, df in new.items()}
        kept = {**{e: p for e, p in old_prints.items() if e not in kept}, **kept}
    return store.save(home, version, digest, new, kept)
