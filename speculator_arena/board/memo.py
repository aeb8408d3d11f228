"""An in-process memo of what the board has already read and scored, checked against the files.

Why: the warehouse stores one Parquet part per evaluation and table, and scoring re-derives
everything from them. Redoing that for every evaluation each time the board's cache expires
would make a board of hundreds of accounts slow all day, not only on its first render. So the
memo keeps the evaluations index as last read through the warehouse's catalog (which re-reads
only partitions whose directory changed since, see warehouse/catalog.py) and, per evaluation
and protocol version, what the scorer computed, stamped with the mtimes of the partition
directories it came from (the catalog's rule). A refresh stats the directories (milliseconds),
re-reads and re-scores only what changed, and recomputes the one cross-evaluation figure, the dev/test gap flag, over the
result. What it scores it also writes to the score store (board/store.py, under
`$ARENA_HOME/scores/board-store/`), and what it lacks it first looks for there, so a fresh
process (a restarted server, `arena board --text`) scores only what landed or changed since
any process last scored it, not every candidate again. Every number still comes from the raw
rows under the chosen protocol: the store's rows are the scorer's, kept at the fingerprint
they were scored at, and used only while that fingerprint holds.

Before it stats anything, a re-read reads the warehouse's change marker (warehouse/generation.py:
one small file every writer of raw rows replaces after its write). While the marker holds the
value read before this memo's last walk, and less than `ARENA_BOARD_FULL_CHECK` seconds
(default 300) passed since it, the memo answers from what it holds without statting a
directory (the index's 10,040 and the fingerprints' 870 x 12 at 10,000 evaluations). The racy
window does not enter this rule: a writer bumps after its write, a reader reads the marker
before its walk, so a write the walk may have missed bumps the marker after the value read
(the next walk still applies the racy rule to its mtimes). A change the marker cannot see (made by hand, or by a writer that crashed
between its write and its bump) shows at the next full check; `ARENA_BOARD_FULL_CHECK=0`
walks on every re-read.
"""

from __future__ import annotations

import os
import threading
import time

import pandas as pd

from speculator_arena import settings
from speculator_arena.board import data, store
from speculator_arena.board.history import flag_board
from speculator_arena.warehouse import catalog, generation
from speculator_arena.warehouse.catalog import fingerprints as _fingerprints
from speculator_arena.warehouse.schema import TABLES
from speculator_arena.warehouse.store import Warehouse


class BoardMemo:
    """One warehouse's memo (Streamlit keeps one per ARENA_HOME with `st.cache_resource`)."""

    COMBINED = 8  # requests whose answer is kept whole (a board asks for a few id sets in turn)
    _recheck_epoch = 0  # `recheck_all()` moves it: every memo of the process walks at its next read

    def __init__(self, home: str | os.PathLike):
        self.wh = Warehouse(home)
        self._lock = threading.Lock()
        self._index_table = None  # the catalog's rows as last read (pyarrow Table)
        self._index_frame = None  # ... and as the index frame
        self.last_refresh_racy = 0
        self._prints: dict[tuple[str, int | None], tuple] = {}  # (evaluation, version) -> fingerprint
        # per version: the scorer's rows of every evaluation kept, one frame per name (FRAMES),
        # and the digest and version it reported; a request takes its rows with one mask per frame
        self._kept: dict[int | None, tuple[dict[str, pd.DataFrame], str, int]] = {}
        self._combined: dict[tuple, object] = {}  # (ids, version) -> (prints, Scores, walk) of recent requests
        self._boards: dict[tuple, tuple] = {}  # (task, version) -> (the Scores ranked, its ScoreFrames, walk)
        self.last_refresh: dict[str, int] = {}
        self._index_seen = None  # (the marker before the index's last walk, its monotonic time, epoch)
        self._state = None  # (the index frame, its WarehouseState)
        self.walks = {"index": 0, "fingerprints": 0}  # full re-checks done (tests count them)

    def _unchanged(self, seen, marker) -> bool:
        """Whether a walk stamped `seen` (the marker's value before it, its monotonic time; None:
        not to be trusted) still holds: the marker `marker` read now is the same and the full
        check is not due (module docstring)."""
        if seen is None or seen[2] != BoardMemo._recheck_epoch:
            return False
        full = settings.number("ARENA_BOARD_FULL_CHECK")
        return seen[0] == marker and full is not None and full > 0 and time.monotonic() - seen[1] < full

    @classmethod
    def recheck_all(cls) -> None:
        """Make every memo of this process stat the warehouse at its next read whatever the
        marker says (the dashboard's Refresh button: an operator who changed files by hand)."""
        cls._recheck_epoch += 1

    # ---- the evaluations index ----------------------------------------------------------
    def index(self) -> pd.DataFrame:
        """The evaluations index, re-reading only partitions written since the last call (the
        catalog's rule, starting from this memo's last result rather than the stored snapshot)."""
        return self.index_frame().copy()

    def index_frame(self) -> pd.DataFrame:
        """`index()` without the copy: the memo's own frame, the same object until something
        changed (readers that key what they made of it by its identity must not modify it)."""
        with self._lock:
            base = self._index_table
            marker = generation.read(self.wh.home)
            if base is not None and self._index_frame is not None and self._unchanged(self._index_seen, marker):
                self.last_refresh["index_parts_read"] = 0
                self.last_refresh_racy = 0
                return self._index_frame  # nothing bumped the marker since the last walk
            walked_at, epoch = time.monotonic(), BoardMemo._recheck_epoch
            self.walks["index"] += 1
            if base is None:
                table, stats = catalog.read_evaluations(self.wh.home)
            else:
                table, stats = catalog.read_evaluations(self.wh.home, base=base)
            self._index_table = table
            self.last_refresh["index_parts_read"] = stats["new"] + stats["changed"]
            self.last_refresh_racy = stats["racy"]
            self._index_seen = (marker, walked_at, epoch)
            # nothing new, changed, re-checked or gone: the rows of last time, so the frame of
            # last time (building it sorts and de-duplicates every row: tens of ms at 10,000)
            same = base is not None and not any(stats.values()) and table.num_rows == base.num_rows
            if not same or self._index_frame is None:
                self._index_frame = data.index_frame(table)
            return self._index_frame

    def state(self) -> data.WarehouseState:
        """`data.warehouse_state` of the index as `index_frame()` holds it, made once per index
        frame (a render after the board's cache expired counts no 10,000 rows again)."""
        frame = self.index_frame()
        last = self._state
        if last is None or last[0] is not frame:
            last = self._state = (frame, data.warehouse_state(self.wh.home, index=frame))
        return last[1]

    # ---- scores -------------------------------------------------------------------------
    def scores(self, evaluation_ids: list[str], protocol_version: int | None):
        """The scorer's `Scores` for these evaluations, re-scoring only those whose files changed."""
        from speculator_arena.scoring.result import Scores

        ids = sorted(set(evaluation_ids))
        with self._lock:
            key = (tuple(ids), protocol_version)
            last = self._combined.get(key)
            marker = generation.read(self.wh.home)
            if last is not None and self._unchanged(last[2], marker):
                self.last_refresh["evaluations_scored"] = 0
                return last[1]  # nothing bumped the marker since this request's last walk
            walked_at, epoch = time.monotonic(), BoardMemo._recheck_epoch
            self.walks["fingerprints"] += 1
            now = time.time_ns()
            home = str(self.wh.home)
            prints = _fingerprints(home, ids, now)
            signature = tuple(prints[eid] for eid in ids)
            seen = (marker, walked_at, epoch)
            if last is not None and last[0] == signature:
                self.last_refresh["evaluations_scored"] = 0
                self._combined[key] = (signature, last[1], seen)
                return last[1]  # nothing changed since this exact request: nothing to score or stitch
            stale = [eid for eid in ids if self._prints.get((eid, protocol_version)) != prints[eid]]
            if stale and self._from_store(protocol_version, {eid: prints[eid] for eid in stale}):
                stale = [eid for eid in ids if self._prints.get((eid, protocol_version)) != prints[eid]]
            self.last_refresh["evaluations_scored"] = len(stale)
            fresh = None
            if stale:
                frames, fresh = data.score_frames(self.wh.home, stale, protocol_version)
                self._keep(protocol_version, stale, frames, str(fresh.protocol_digest), int(fresh.protocol_version))
                self._prints.update({(eid, protocol_version): prints[eid] for eid in stale})
            if not ids:
                return None
            if len(stale) == len(ids):
                # everything was scored together just now (a first render): the scorer's own
                # result, gap flag included, is the answer
                scores = fresh
            else:
                kept, digest, version = self._kept[protocol_version]
                cat = {name: _rows_of(df, ids) for name, df in kept.items()}
                _gap_flags(cat["evaluations"], protocol_version)
                scores = Scores(version, digest, cat["evaluations"], cat["passes"], cat["gates"], cat["figures"])
            drew = self._draw_intervals(protocol_version, scores)
            if stale or drew:
                self._to_store(protocol_version)
            self._combined[key] = (signature, scores, seen)
            while len(self._combined) > self.COMBINED:  # the oldest first: memory stays bounded
                del self._combined[next(iter(self._combined))]
        return scores

    def _keep(self, version, stale: list[str], frames, digest: str, resolved: int) -> None:
        """Keep the scorer's rows of the evaluations `stale` (just scored), replacing what was
        kept of them: one concatenation per frame, not one frame per evaluation (the per-
        evaluation frames of thousands of evaluations cost seconds to cut and minutes to join)."""
        old = self._kept.get(version)
        new = {name: frames[name] if isinstance(frames, dict) else getattr(frames, name) for name in FRAMES}
        given = frames.get(INTERVALS) if isinstance(frames, dict) else None
        new[INTERVALS] = _no_intervals() if given is None else given  # just scored: none drawn yet
        if old is not None:
            new = {name: _joined(_without(old[0][name], stale), df) for name, df in new.items()}
        self._kept[version] = (new, digest, resolved)

    def _draw_intervals(self, version, scores) -> bool:
        """Give `scores` the bootstrap intervals of its evaluations (`Scores.intervals`, which
        the ranking then does not draw again), drawing only those not kept yet; an
        evaluation's interval depends on its own passes alone and goes when it is re-scored
        (`_keep`). Returns whether any was drawn. Where drawing fails (a SpecScore without its
        pass ratios) the ranking draws, and raises, as it did without the memo."""
        from speculator_arena.scoring.intervals import bootstrapped_intervals

        kept = self._kept[version][0]
        have = kept[INTERVALS]
        known = dict(zip(have["evaluation_id"].tolist(), zip(have["boot_low"].tolist(), have["boot_high"].tolist())))
        try:
            found = bootstrapped_intervals(scores.evaluations, scores.passes, known)
        except ValueError:
            scores.intervals = None
            return False
        drawn = sorted(eid for eid in found if eid not in known)
        if drawn:
            rows = pd.DataFrame(
                {
                    "evaluation_id": pd.Series(drawn, dtype=object),
                    "boot_low": [found[e][0] for e in drawn],
                    "boot_high": [found[e][1] for e in drawn],
                }
            )
            kept[INTERVALS] = _joined(have, rows)
        scores.intervals = found
        return bool(drawn)

    # ---- the score store (board/store.py): what any process already scored ----------------
    def _resolved(self, version) -> tuple[int, str]:
        """The version number and digest `version` (None: the latest) is scored under."""
        from speculator_arena.protocol import load_protocol, protocol_digest

        resolved = load_protocol(version).version
        return resolved, protocol_digest(resolved)

    def _from_store(self, version, stale: dict[str, tuple]) -> bool:
        """Take into the memo what the store holds (another process scored it, or this one
        before a restart): the evaluations `stale` (id -> the fingerprint just taken) stored at
        that same fingerprint, and any the memo does not hold at all (the caller compares their
        fingerprints as for the memo's own rows when they are asked for: one whose files
        changed since is scored again). Returns whether anything was taken."""
        resolved, digest = self._resolved(version)
        loaded = store.load(self.wh.home, resolved, digest)
        if loaded is None:
            return False
        frames, prints = loaded
        take = sorted(eid for eid, p in prints.items() if stale.get(eid) == p or (eid, version) not in self._prints)
        if not take:
            return False
        if len(take) < len(prints):
            frames = {name: _rows_of(df, take) for name, df in frames.items()}
        self._keep(version, take, frames, digest, resolved)
        self._prints.update({(eid, version): prints[eid] for eid in take})
        return True

    def _to_store(self, version) -> None:
        """Write what the memo keeps under `version` to the store (its trustworthy
        fingerprints only: a racy one is never stored), for the next process."""
        kept, digest, resolved = self._kept[version]
        prints = {
            eid: p
            for (eid, v), p in self._prints.items()
            if v == version and len(p) == len(TABLES) and all(isinstance(x, int) for x in p)
        }
        frames = {name: _rows_of(df, sorted(prints)) if len(prints) else df.iloc[:0] for name, df in kept.items()}
        store.save(self.wh.home, resolved, digest, frames, prints)

    def board(self, task_id: str, protocol_version: int | None, index: pd.DataFrame | None = None) -> data.ScoreFrames:
        """One task's board: what every board reads (the Streamlit pages, `arena board --text`,
        `GET /api/board`), scoring only what changed since the last call (`index`: the
        evaluations index when the caller has just read it, so a render lists the warehouse once).
        Without `index`, a board computed since the change marker last moved is returned as it
        is (module docstring): no candidates picked from 10,040 rows, nothing looked up."""
        key = (task_id, protocol_version)
        marker = generation.read(self.wh.home) if index is None else None
        with self._lock:
            last = self._boards.get(key)
            if index is None and last is not None and self._unchanged(last[2], marker):
                self.last_refresh.update(index_parts_read=0, evaluations_scored=0)
                return last[1]
            seen = (marker, time.monotonic(), BoardMemo._recheck_epoch) if index is None else None
        index = self.index() if index is None else index
        scores = data.score_board_candidates(index, task_id, lambda ids: self.scores(ids, protocol_version))
        # the same Scores object as last time (nothing changed): its ranking is the same too; the
        # bootstrap intervals of every ranked evaluation cost about a second at 870 evaluations
        if scores is not None and last is not None and last[0] is scores:
            frames = last[1]
        else:
            frames = data.board_frames(scores, task_id, protocol_version)
            # each row's regression flag, from the rows held: nothing scored for it (board/history.py)
            flag_board(frames, self.held(protocol_version), task_id, index)
        with self._lock:
            self._boards[key] = (scores, frames, seen)
        return frames

    def held(self, version) -> dict[str, pd.DataFrame]:
        """The scorer's rows this memo holds under `version` (FRAMES and INTERVALS; {}: none)."""
        with self._lock:
            return dict(self._kept.get(version, ({},))[0])


FRAMES = ("evaluations", "passes", "gates", "figures")
INTERVALS = "intervals"  # beside them: each evaluation's bootstrap interval, once drawn


def _no_intervals() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "evaluation_id": pd.Series(dtype=object),
            "boot_low": pd.Series(dtype=float),
            "boot_high": pd.Series(dtype=float),
        }
    )


def _rows_of(df: pd.DataFrame, ids: list[str]) -> pd.DataFrame:
    """The rows of the evaluations `ids` in evaluation order, each evaluation's rows in the
    scorer's order (what joining one kept frame per evaluation gave): one mask and one sort."""
    if "evaluation_id" not in df.columns or not len(df):
        return df.iloc[:0].reset_index(drop=True)
    out = df[df["evaluation_id"].isin(ids)]
    return out.sort_values("evaluation_id", kind="stable").reset_index(drop=True)


def _without(df: pd.DataFrame, ids: list[str]) -> pd.DataFrame:
    """`df` less the rows of the evaluations `ids`."""
    if "evaluation_id" not in df.columns:
        return df
    return df[~df["evaluation_id"].isin(ids)]


def _joined(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """`a`'s rows then `b`'s (an empty side is left out, so it never decides a column's type)."""
    if not len(a):
        return b
    if not len(b):
        return a.reset_index(drop=True)
    return pd.concat([a, b], ignore_index=True)


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
