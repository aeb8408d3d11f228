"""An in-process memo of what the board has already read and scored, checked against the files.

Why: the warehouse stores one Parquet part per evaluation and table, and scoring re-derives
everything from them. Redoing that for every evaluation each time the board's cache expires
would make a board of hundreds of accounts slow all day, not only on its first render. So the
memo keeps the evaluations index as last read through the warehouse's catalog (which re-reads
only partitions whose directory changed since, see warehouse/catalog.py) and, per evaluation
and protocol version, what the scorer computed, stamped with the (name, size, mtime) of every
part it came from. A refresh stats the files (milliseconds), re-reads and re-scores only what
changed, and recomputes the one cross-evaluation figure, the dev/test gap flag, over the
result. Nothing is written anywhere: the memo lives and dies with the server process, and every
number still comes from the raw rows under the chosen protocol.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pandas as pd

from speculator_arena.dashboards import data
from speculator_arena.warehouse import catalog
from speculator_arena.warehouse.schema import TABLES
from speculator_arena.warehouse.store import Warehouse

Stamp = tuple[str, int, int]  # (file name, size, mtime_ns)


def _stamps(partition: Path) -> tuple[Stamp, ...]:
    try:
        entries = list(os.scandir(partition))
    except FileNotFoundError:
        return ()
    out = []
    for e in entries:
        if e.name.endswith(".parquet") and not e.name.startswith(".tmp-"):
            st = e.stat()
            out.append((e.name, st.st_size, st.st_mtime_ns))
    return tuple(sorted(out))


class BoardMemo:
    """One warehouse's memo (Streamlit keeps one per ARENA_HOME with `st.cache_resource`)."""

    def __init__(self, home: str | os.PathLike):
        self.wh = Warehouse(home)
        self._lock = threading.Lock()
        self._index_table = None  # the catalog's rows as last read (pyarrow Table)
        self.last_refresh_racy = 0
        self._scores: dict[tuple[str, int | None], tuple[tuple, dict[str, pd.DataFrame]]] = {}
        self._combined: dict[tuple, object] = {}  # (ids, version) -> (prints, Scores) of the last request
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
    def fingerprint(self, evaluation_id: str) -> tuple:
        return tuple(_stamps(self.wh.partition_dir(t, evaluation_id)) for t in TABLES)

    def scores(self, evaluation_ids: list[str], protocol_version: int | None):
        """The scorer's `Scores` for these evaluations, re-scoring only those whose files changed."""
        from speculator_arena.scoring.score import Scores

        ids = sorted(set(evaluation_ids))
        with self._lock:
            prints = {eid: self.fingerprint(eid) for eid in ids}
            stale = [eid for eid in ids
                     if (eid, protocol_version) not in self._scores or self._scores[(eid, protocol_version)][0] != prints[eid]]
            digest = version = None
            fresh = None
            if stale:
                frames, fresh = data._score(self.wh.home, stale, protocol_version)
                digest, version = fresh.protocol_digest, fresh.protocol_version
                meta = pd.DataFrame({"digest": [digest], "version": [version]})
                # one group-by per frame, not one boolean mask per evaluation (870 evaluations x 4
                # frames of masks over every figure row took seconds)
                by_eval = {}
                for name, df in (("evaluations", frames.evaluations), ("passes", frames.passes),
                                 ("gates", frames.gates), ("figures", frames.figures)):
                    groups = dict(iter(df.groupby("evaluation_id", sort=False))) \
                        if "evaluation_id" in df.columns and len(df) else {}
                    by_eval[name] = (groups, df.iloc[:0])
                for eid in stale:
                    parts = {name: groups.get(eid, empty) for name, (groups, empty) in by_eval.items()}
                    parts["_meta"] = meta
                    self._scores[(eid, protocol_version)] = (prints[eid], parts)
            self.last_refresh["evaluations_scored"] = len(stale)
            key = (tuple(ids), protocol_version)
            signature = tuple(prints[eid] for eid in ids)
            if fresh is not None and len(stale) == len(ids):
                # everything was scored together just now (a first render): the scorer's own
                # result, gap flag included, is the answer; nothing to stitch together
                self._combined = {key: (signature, fresh)}
                return fresh
            last = self._combined.get(key)
            if last is not None and last[0] == signature:
                return last[1]  # nothing changed since this exact request: no concatenation either
            kept = [self._scores[(eid, protocol_version)][1] for eid in ids]
        if not kept:
            return None
        meta = kept[0]["_meta"].iloc[0]
        cat = {name: pd.concat([k[name] for k in kept], ignore_index=True)
               for name in ("evaluations", "passes", "gates", "figures")}
        _gap_flags(cat["evaluations"], protocol_version)
        scores = Scores(int(meta["version"]), str(meta["digest"]), cat["evaluations"], cat["passes"], cat["gates"],
                        cat["figures"])
        with self._lock:
            self._combined = {key: (signature, scores)}  # the last one only: memory stays bounded
        return scores

    def board(self, task_id: str, protocol_version: int | None, index: pd.DataFrame | None = None) -> data.ScoreFrames:
        """What `data.board_scores` computes, from the memo (`index`: the evaluations index when
        the caller has just read it, so a render lists the warehouse once)."""
        ids = data.board_candidates(self.index() if index is None else index, task_id)
        scores = self.scores(ids, protocol_version)
        if scores is None:
            return data._empty_frames(protocol_version)
        from speculator_arena.scoring import board_rows

        frames = data.ScoreFrames(scores.evaluations, scores.passes, scores.gates, scores.figures,
                                  protocol_version=scores.protocol_version, protocol_digest=scores.protocol_digest)
        frames.boards = {split: board_rows(scores, task_id, split) for split in data.SPLITS}
        return frames


def _gap_flags(ev: pd.DataFrame, protocol_version: int | None) -> None:
    """The dev/test gap flag over the combined rows: the scorer's own rule (it spans evaluations,
    so it cannot be memoized per evaluation)."""
    from speculator_arena.protocol import load_protocol
    from speculator_arena.scoring.limits import protocol_limits
    from speculator_arena.scoring.score import _gap_flags as scorer_gap_flags

    if ev.empty:
        return
    lim = protocol_limits(load_protocol(protocol_version)).set_index("task_id")
    lim_e = lim.reindex(ev["task_id"]).reset_index(drop=True)
    lim_e.index = ev.index
    scorer_gap_flags(ev, lim_e)
