"""An in-process memo of what the board has already read and scored, checked against the files.

Why: the warehouse stores one Parquet part per evaluation and table, and scoring re-derives
everything from them. Redoing that for every evaluation each time the board's cache expires
would make a board of hundreds of accounts slow all day, not only on its first render. So the
memo keeps the evaluations index as last read through the warehouse's catalog (which re-reads
only partitions whose directory changed since, see warehouse/catalog.py) and, per evaluation
and protocol version, what the scorer computed, stamped with the mtimes of the partition
directories it came from (the catalog's rule). A refresh stats the directories (milliseconds),
re-reads and re-scores only what changed, and recomputes the one cross-evaluation figure, the dev/test gap flag, over the
result. Nothing is written anywhere: the memo lives and dies with the server process, and every
number still comes from the raw rows under the chosen protocol.
"""

from __future__ import annotations

import os
import threading
import time

import numpy as np
import pandas as pd

from speculator_arena.board import data
from speculator_arena.warehouse import catalog, parts
from speculator_arena.warehouse.schema import TABLES
from speculator_arena.warehouse.store import Warehouse


def _fingerprint(home: str, evaluation_id: str, now_ns: int) -> tuple:
    """The mtimes of the evaluation's partition directories (-1: none). The store writes by
    create-and-rename, which moves a directory's mtime; a directory changed less than the
    catalog's racy window ago is not trusted (a later write within the same clock tick would
    leave the same mtime), so its fingerprint never equals a later one and it is re-scored."""
    out = []
    for table in TABLES:
        m = parts.partition_mtime(home, table, evaluation_id)
        if m >= 0 and not catalog.trusted_mask(np.int64(m), np.int64(m), np.int64(now_ns)):
            return (object(),)
        out.append(m)
    return tuple(out)


class BoardMemo:
    """One warehouse's memo (Streamlit keeps one per ARENA_HOME with `st.cache_resource`)."""

    def __init__(self, home: str | os.PathLike):
        self.wh = Warehouse(home)
        self._lock = threading.Lock()
        self._index_table = None  # the catalog's rows as last read (pyarrow Table)
        self.last_refresh_racy = 0
        self._scores: dict[tuple[str, int | None], tuple[tuple, dict[str, pd.DataFrame]]] = {}
        self._combined: dict[tuple, object] = {}  # (ids, version) -> (prints, Scores) of the last request
        self._whole = None  # (version, prints, frames, Scores) of a first render, not yet cut per evaluation
        self.last_refresh: dict[str, int] = {}

    # ---- the evaluations index ----------------------------------------------------------
    def index(self) -> pd.DataFrame:
        """The evaluations index, re-reading only partitions written since the last call (the
        catalog's rule, starting from this memo's last result rather than the stored snapshot)."""
        with self._lock:
            base = self._index_table
            if base is None:
                table, stats = catalog.read_evaluations(self.wh.home)
            else:
                table, stats = catalog.read_evaluations(self.wh.home, base=base)
            self._index_table = table
            self.last_refresh["index_parts_read"] = stats["new"] + stats["changed"]
            self.last_refresh_racy = stats["racy"]
        return data.index_frame(table)

    # ---- scores -------------------------------------------------------------------------
    def scores(self, evaluation_ids: list[str], protocol_version: int | None):
        """The scorer's `Scores` for these evaluations, re-scoring only those whose files changed."""
        from speculator_arena.scoring.result import Scores

        ids = sorted(set(evaluation_ids))
        with self._lock:
            now = time.time_ns()
            home = str(self.wh.home)
            prints = {eid: _fingerprint(home, eid, now) for eid in ids}
            key = (tuple(ids), protocol_version)
            signature = tuple(prints[eid] for eid in ids)
            last = self._combined.get(key)
            if last is not None and last[0] == signature:
                self.last_refresh["evaluations_scored"] = 0
                return last[1]  # nothing changed since this exact request: nothing to score or stitch
            self._split_whole()
            stale = [
                eid
                for eid in ids
                if (eid, protocol_version) not in self._scores
                or self._scores[(eid, protocol_version)][0] != prints[eid]
            ]
            self.last_refresh["evaluations_scored"] = len(stale)
            if stale:
                frames, fresh = data.score_frames(self.wh.home, stale, protocol_version)
                stamped = {eid: prints[eid] for eid in stale}
                if len(stale) == len(ids):
                    # everything was scored together just now (a first render): the scorer's own
                    # result, gap flag included, is the answer. It is cut per evaluation only if a
                    # later request needs part of it (0.4 s at 870 evaluations, off the first render).
                    self._whole = (protocol_version, stamped, frames, fresh)
                    self._combined = {key: (signature, fresh)}
                    return fresh
                self._store_split(protocol_version, stamped, frames, fresh)
            kept = [self._scores[(eid, protocol_version)][1] for eid in ids]
        if not kept:
            return None
        meta = kept[0]["_meta"].iloc[0]
        cat = {
            name: pd.concat([k[name] for k in kept], ignore_index=True)
            for name in ("evaluations", "passes", "gates", "figures")
        }
        _gap_flags(cat["evaluations"], protocol_version)
        scores = Scores(
            int(meta["version"]), str(meta["digest"]), cat["evaluations"], cat["passes"], cat["gates"], cat["figures"]
        )
        with self._lock:
            self._combined = {key: (signature, scores)}  # the last one only: memory stays bounded
        return scores

    def _split_whole(self) -> None:
        """Cut the result kept whole by a first render into per-evaluation parts (under the lock)."""
        if self._whole is not None:
            version, stamped, frames, fresh = self._whole
            self._whole = None
            self._store_split(version, stamped, frames, fresh)

    def _store_split(self, version, stamped: dict, frames, fresh) -> None:
        """Keep the scorer's rows of each evaluation in `stamped` with its fingerprint."""
        meta = pd.DataFrame({"digest": [fresh.protocol_digest], "version": [fresh.protocol_version]})
        # one group-by per frame, not one boolean mask per evaluation (870 evaluations x 4
        # frames of masks over every figure row took seconds)
        by_eval = {}
        for name, df in (
            ("evaluations", frames.evaluations),
            ("passes", frames.passes),
            ("gates", frames.gates),
            ("figures", frames.figures),
        ):
            groups = (
                dict(iter(df.groupby("evaluation_id", sort=False))) if "evaluation_id" in df.columns and len(df) else {}
            )
            by_eval[name] = (groups, df.iloc[:0])
        for eid, stamp in stamped.items():
            parts = {name: groups.get(eid, empty) for name, (groups, empty) in by_eval.items()}
            parts["_meta"] = meta
            self._scores[(eid, version)] = (stamp, parts)

    def board(self, task_id: str, protocol_version: int | None, index: pd.DataFrame | None = None) -> data.ScoreFrames:
        """One task's board: what every board reads (the Streamlit pages, `arena board --text`,
        `GET /api/board`), scoring only what changed since the last call (`index`: the
        evaluations index when the caller has just read it, so a render lists the warehouse once)."""
        scores = data.score_board_candidates(
            self.index() if index is None else index, task_id, lambda ids: self.scores(ids, protocol_version)
        )
        return data.board_frames(scores, task_id, protocol_version)


def _gap_flags(ev: pd.DataFrame, protocol_version: int | None) -> None:
    """The dev/test gap flag over the combined rows: the scorer's own rule (it spans evaluations,
    so it cannot be memoized per evaluation)."""
    from speculator_arena.protocol import load_protocol
    from speculator_arena.scoring.assemble import gap_flags as scorer_gap_flags
    from speculator_arena.scoring.limits import protocol_limits

    if ev.empty:
        return
    lim = protocol_limits(load_protocol(protocol_version)).set_index("task_id")
    lim_e = lim.reindex(ev["task_id"]).reset_index(drop=True)
    lim_e.index = ev.index
    scorer_gap_flags(ev, lim_e)
