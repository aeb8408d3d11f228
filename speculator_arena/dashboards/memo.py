"""An in-process memo of what the board has already read and scored, checked against the files.

Why: the warehouse stores one Parquet part per evaluation and table, and scoring re-derives
everything from them. Redoing that for every evaluation each time the board's cache expires
would make a board of hundreds of accounts slow all day, not only on its first render. But a
part's rows change only when its file does, so the memo keeps, per part file, what it read (the
evaluation rows) and, per evaluation and protocol version, what the scorer computed, each with
the (name, size, mtime) of the files it came from. A refresh stats the files (milliseconds),
re-reads and re-scores only what changed, and recomputes the one cross-evaluation figure, the
dev/test gap flag, over the result. Nothing is written anywhere: the memo lives and dies with
the server process, and every number still comes from the raw rows under the chosen protocol.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import duckdb
import pandas as pd

from speculator_arena.dashboards import data
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
        self._index_rows: dict[str, tuple[tuple[Stamp, ...], list[dict]]] = {}
        self._scores: dict[tuple[str, int | None], tuple[tuple, dict[str, pd.DataFrame]]] = {}
        self._combined: dict[tuple, object] = {}  # (ids, version) -> (prints, Scores) of the last request
        self.last_refresh: dict[str, int] = {}

    # ---- the evaluations index ----------------------------------------------------------
    def index(self) -> pd.DataFrame:
        root = self.wh.raw / "evaluations"
        with self._lock:
            seen: dict[str, tuple[Stamp, ...]] = {}
            if root.is_dir():
                for d in os.scandir(root):
                    if d.is_dir() and d.name.startswith("evaluation_id="):
                        stamps = _stamps(Path(d.path))
                        if stamps:
                            seen[d.name] = stamps
            stale = [name for name, stamps in seen.items()
                     if name not in self._index_rows or self._index_rows[name][0] != stamps]
            for name in set(self._index_rows) - set(seen):
                del self._index_rows[name]
            if stale:
                files = [str(root / name / f[0]) for name in stale for f in seen[name]]
                rows = _read_evaluation_rows(files)
                by_id: dict[str, list[dict]] = {}
                for r in rows:
                    by_id.setdefault(r["evaluation_id"], []).append(r)
                for name in stale:
                    self._index_rows[name] = (seen[name], by_id.get(name.split("=", 1)[1], []))
            self.last_refresh["index_parts_read"] = len(stale)
            rows = [r for _, rs in self._index_rows.values() for r in rs]
        if not rows:
            return data.evaluations_index(self.wh.home)  # the empty frame with its columns
        df = pd.DataFrame(rows)[data.INDEX_COLUMNS]
        df["is_reference"] = df["is_reference"].fillna(False).astype(bool)
        return df.sort_values(["created_at", "evaluation_id"], ascending=[False, True],
                              na_position="last").reset_index(drop=True)

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
            if stale:
                frames, scores = data._score(self.wh.home, stale, protocol_version)
                digest, version = scores.protocol_digest, scores.protocol_version
                for eid in stale:
                    parts = {name: df[df["evaluation_id"] == eid] if "evaluation_id" in df.columns else df.iloc[:0]
                             for name, df in (("evaluations", frames.evaluations), ("passes", frames.passes),
                                              ("gates", frames.gates), ("figures", frames.figures))}
                    parts["_meta"] = pd.DataFrame({"digest": [digest], "version": [version]})
                    self._scores[(eid, protocol_version)] = (prints[eid], parts)
            self.last_refresh["evaluations_scored"] = len(stale)
            key = (tuple(ids), protocol_version)
            signature = tuple(prints[eid] for eid in ids)
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

    def board(self, task_id: str, protocol_version: int | None) -> data.ScoreFrames:
        """What `data.board_scores` computes, from the memo."""
        ids = data.board_candidates(self.index(), task_id)
        scores = self.scores(ids, protocol_version)
        if scores is None:
            return data._empty_frames(protocol_version)
        from speculator_arena.scoring import board_rows

        frames = data.ScoreFrames(scores.evaluations, scores.passes, scores.gates, scores.figures,
                                  protocol_version=scores.protocol_version, protocol_digest=scores.protocol_digest)
        frames.boards = {split: board_rows(scores, task_id, split) for split in data.SPLITS}
        return frames


def _read_evaluation_rows(files: list[str]) -> list[dict]:
    con = data.quiet(duckdb.connect(":memory:"))
    try:
        df = con.execute(data.board_sql("evaluation_parts.sql"), {"files": files}).fetchdf()
    finally:
        con.close()
    return df.to_dict("records")


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
