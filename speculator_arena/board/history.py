"""History per entry: every scored evaluation of one board entry over time, and the regression flag.

Why: the board shows each entry's last scored evaluation only, so a participant whose new
submission is slower, or a reference whose engine or protocol version changed, sees the new
figure and not the drop. An entry is what the board ranks (board/ranking.py): a participant's
account, or a reference's label, on one task and split. Its history lists, oldest first, each
evaluation the board could have shown as that entry's row, the ones with a SpecScore (a 0 by a
failed gate or a failed candidate included, as on the board; void, queued and running ones are
not points, as they never hide a score on the board), with the SpecScore's interval as the board
computes it under the version scored (scoring/intervals.py), the candidate's mean acceptance
length and memory peak (the scorer's figures, blank with their reason, never 0), the version it
was measured under and its engine (path name and digest from the provenance).

The regression flag: an evaluation's SpecScore lies below the previous point's `interval_low`
(the same entry's scored evaluation before it); `previous_evaluation_id` names the point it was
compared with. Nothing is scored twice: the history asks the board's memo (board/memo.py) for
the entry's evaluations, and the memo scores only those it does not hold yet. The board's own
rows get the flag from what the memo already holds (`board_regression`), never by scoring an
entry's older evaluations: a previous evaluation the memo does not hold under this version
leaves the flag null (unknown), and the entry's history scores it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pandas as pd

from speculator_arena.rules.accounts import CALIBRATION_ACCOUNT
from speculator_arena.rules.status import RANKED
from speculator_arena.scoring.intervals import max_abs_error, specscore_intervals

COLUMNS = [
    "evaluation_id",
    "created_at",
    "task_id",
    "split",
    "account_id",
    "label",
    "is_reference",
    "run_protocol_version",  # the version it was measured under
    "protocol_version",  # the version it is scored under (the one in force)
    "engine",
    "engine_digest",
    "specscore",
    "interval_low",
    "interval_high",
    "specscore_reason",
    "failed_gates",
    "mean_acceptance_length",
    "mean_acceptance_length_reason",
    "memory_peak_bytes",
    "memory_peak_reason",
    "previous_evaluation_id",
    "previous_interval_low",
    "regression",
]
FLAG_COLUMNS = ["previous_evaluation_id", "regression"]  # what each board row gains


def entry_key(ev: pd.DataFrame) -> pd.Series:
    """The entry of each row (of the index or the scorer's evaluations): participants by account,
    references by label (board/ranking.py's groups)."""
    ref = ev["is_reference"].fillna(False).astype(bool)
    return np.where(ref, "reference\x00", "participant\x00") + ev["account_id"].where(~ref, ev["label"]).fillna(
        ""
    ).astype(str)


def entry_evaluations(
    index: pd.DataFrame, task_id: str, split: str, account: str | None = None, label: str | None = None
) -> list[str]:
    """The finished evaluations (measured or failed) of one entry: a participant's `account`, or
    a reference's `label` (exactly one of them); the calibration's runs are not entries."""
    if (account is None) == (label is None):
        raise ValueError("name one entry: an account, or a reference's label")
    rows = index[
        (index["task_id"] == task_id)
        & (index["split"] == split)
        & index["status"].isin(RANKED)
        & (index["account_id"] != CALIBRATION_ACCOUNT)
    ]
    ref = rows["is_reference"].fillna(False).astype(bool)
    rows = rows[ref & (rows["label"] == label)] if label is not None else rows[~ref & (rows["account_id"] == account)]
    return sorted(rows["evaluation_id"].astype(str).unique().tolist())


def flag_regressions(points: pd.DataFrame) -> pd.DataFrame:
    """`points` (scored evaluations with entry, created_at, specscore, interval_low) oldest first
    per entry, with each one's previous point, its `interval_low`, and the flag."""
    points = points.sort_values(["entry", "created_at", "evaluation_id"], kind="stable").reset_index(drop=True)
    by = points.groupby("entry", sort=False)
    points["previous_evaluation_id"] = by["evaluation_id"].shift(1)
    points["previous_interval_low"] = by["interval_low"].shift(1).astype(float)
    below = points["specscore"].astype(float) < points["previous_interval_low"]
    points["regression"] = below.where(points["previous_evaluation_id"].notna(), False).astype(bool)
    return points


def _candidate_figure(figures: pd.DataFrame, ids: pd.Series, figure: str) -> tuple[np.ndarray, np.ndarray]:
    """The candidate's engine-level figure over all workloads, and its reason, per id."""
    if figures.empty:
        return np.full(len(ids), np.nan), np.full(len(ids), "not scored", dtype=object)
    f = figures[(figures["engine"] == "candidate") & (figures["workload"] == "all") & (figures["figure"] == figure)]
    f = f.drop_duplicates("evaluation_id").set_index("evaluation_id")
    value = f["value"].reindex(ids).to_numpy(dtype=float, na_value=np.nan)
    reason = f["reason"].reindex(ids).to_numpy(dtype=object)
    return value, reason


def _engine(provenance) -> tuple[str | None, str | None]:
    """The engine's directory name and digest from the provenance (a submission's sealed digest)."""
    try:
        p = json.loads(provenance) if isinstance(provenance, str) else {}
    except ValueError:
        p = {}
    path = p.get("engine_path") if isinstance(p, dict) else None
    name = str(path).rstrip("/").rsplit("/", 1)[-1] if path else None
    digest = (p.get("engine_sealed_digest") or p.get("engine_digest")) if isinstance(p, dict) else None
    return name, digest


def history_rows(scores, task_id: str, split: str) -> pd.DataFrame:
    """Every scored evaluation of `scores` on this task and split as history points (COLUMNS),
    each entry's oldest first, flagged (the caller hands the scores of one entry, or several)."""
    ev = scores.evaluations
    if ev is None or ev.empty:
        return pd.DataFrame(columns=["entry", *COLUMNS])
    ev = ev[(ev["task_id"] == task_id) & (ev["split"] == split) & ev["specscore"].notna()]
    ev = ev.drop_duplicates("evaluation_id")
    if ev.empty:
        return pd.DataFrame(columns=["entry", *COLUMNS])
    e = max_abs_error(scores.protocol_version, task_id)
    known = getattr(scores, "intervals", None)
    points = pd.concat([ev, specscore_intervals(ev, scores.passes, e, known)], axis=1)
    points["entry"] = entry_key(points)
    ids = points["evaluation_id"].astype(str)
    points["mean_acceptance_length"], points["mean_acceptance_length_reason"] = _candidate_figure(
        scores.figures, ids, "mean_acceptance_length"
    )
    points["memory_peak_bytes"], points["memory_peak_reason"] = _candidate_figure(
        scores.figures, ids, "memory_peak_bytes"
    )
    engines = [_engine(p) for p in points.get("provenance", pd.Series([None] * len(points), index=points.index))]
    points["engine"] = [n for n, _ in engines]
    points["engine_digest"] = [d for _, d in engines]
    if "run_protocol_version" not in points.columns:
        points["run_protocol_version"] = pd.NA
    points["protocol_version"] = scores.protocol_version
    out = flag_regressions(points)
    return out[["entry", *COLUMNS]]


@dataclass
class History:
    """One entry's history (`rows`: COLUMNS, oldest first) under one protocol version."""

    task_id: str
    split: str
    account_id: str | None
    label: str | None
    protocol_version: int
    rows: pd.DataFrame


def entry_history(
    memo,
    task_id: str,
    split: str,
    *,
    account: str | None = None,
    label: str | None = None,
    protocol_version: int | None = None,
) -> History:
    """One entry's history through the board's memo (`memo.scores`: the entry's evaluations it
    does not hold yet are scored once, then kept with the rest)."""
    from speculator_arena.protocol import load_protocol

    version = load_protocol(protocol_version).version
    ids = entry_evaluations(memo.index_frame(), task_id, split, account, label)
    scores = memo.scores(ids, protocol_version) if ids else None
    rows = history_rows(scores, task_id, split) if scores is not None else pd.DataFrame(columns=["entry", *COLUMNS])
    return History(task_id, split, account, label, version, rows.drop(columns="entry").reset_index(drop=True))


def board_regression(
    board: pd.DataFrame, held: dict[str, pd.DataFrame], index: pd.DataFrame, task_id: str, split: str, version: int
) -> pd.DataFrame:
    """FLAG_COLUMNS for each row of one split's `board` (same index), from what the memo holds
    (`held`: its kept frames under the version, evaluations, passes and intervals): each row's
    previous point is the entry's last finished evaluation before it that has a SpecScore; when
    an evaluation between them, or that one, is not held, the flag is null (unknown). A row
    without a SpecScore has no flag; an entry's first point is never a regression."""
    out = pd.DataFrame({"previous_evaluation_id": None, "regression": None}, index=board.index, dtype=object)
    kept = held.get("evaluations")
    if board.empty or kept is None or kept.empty or index.empty:
        return out
    scored_ids = board.loc[board["specscore"].notna(), "evaluation_id"].astype(str)
    if scored_ids.empty:
        return out
    idx = index[(index["task_id"] == task_id) & (index["split"] == split)]
    status = idx["status"]  # masks by ==: a string column's isin loops in Python
    idx = idx[((status == RANKED[0]) | (status == RANKED[1])) & (idx["account_id"] != CALIBRATION_ACCOUNT)]
    kept = kept.drop_duplicates("evaluation_id").set_index("evaluation_id")
    at = kept.index.get_indexer(idx["evaluation_id"].to_numpy(dtype=object))
    score = np.where(at >= 0, kept["specscore"].to_numpy(dtype=float, na_value=np.nan)[np.maximum(at, 0)], np.nan)
    stops = idx[(at < 0) | ~np.isnan(score)].assign(held=(at >= 0)[(at < 0) | ~np.isnan(score)])
    stops = stops.assign(entry=entry_key(stops))
    stops = stops.sort_values(["entry", "created_at", "evaluation_id"], kind="stable")
    by = stops.groupby("entry", sort=False)
    stops = stops.assign(prev=by["evaluation_id"].shift(1), prev_held=by["held"].shift(1)).set_index("evaluation_id")
    mine = stops.reindex(scored_ids.to_numpy())
    prev_ids = sorted(set(mine.loc[mine["prev_held"].fillna(False).astype(bool), "prev"].astype(str)))
    low = {}
    if prev_ids:
        prev_rows = kept.loc[prev_ids].reset_index()
        intervals = held.get("intervals")
        known = {}
        if intervals is not None and len(intervals):
            known = dict(zip(intervals["evaluation_id"], zip(intervals["boot_low"], intervals["boot_high"])))
        try:
            drawn = specscore_intervals(
                prev_rows, held.get("passes", pd.DataFrame()), max_abs_error(version, task_id), known
            )
        except ValueError:  # a SpecScore without its pass ratios: unknown, the board itself unchanged
            drawn = pd.DataFrame({"interval_low": np.nan}, index=prev_rows.index)
        low = dict(zip(prev_rows["evaluation_id"].astype(str), drawn["interval_low"].astype(float)))
    # one vectorized pass over the board's scored rows (a Python loop cost 0.1 s at 435 entries)
    prev = mine["prev"].to_numpy(dtype=object)
    has_prev = pd.notna(prev)
    prev_held = mine["prev_held"].fillna(False).astype(bool).to_numpy()
    prev_low = np.array([low.get(str(p), np.nan) if h else np.nan for p, h in zip(prev, prev_held)], dtype=float)
    score = board.loc[scored_ids.index, "specscore"].to_numpy(dtype=float)
    decided = prev_held & ~np.isnan(prev_low)
    flag = np.full(len(prev), None, dtype=object)
    flag[~has_prev] = False  # an entry's first point
    flag[decided] = [bool(b) for b in score[decided] < prev_low[decided]]
    flag[mine["entry"].isna().to_numpy()] = None  # not a finished evaluation of the index
    out.loc[scored_ids.index, "regression"] = flag
    out.loc[scored_ids.index, "previous_evaluation_id"] = np.where(has_prev, prev, None)
    return out


def flag_board(frames, held: dict[str, pd.DataFrame], task_id: str, index: pd.DataFrame) -> None:
    """Give each split's board rows of `frames` (data.ScoreFrames) FLAG_COLUMNS, from `held`."""
    for split, rows in frames.boards.items():
        if rows is None:
            continue
        flags = board_regression(rows, held, index, task_id, split, frames.protocol_version)
        for c in FLAG_COLUMNS:
            rows[c] = flags[c] if len(rows) else pd.Series(dtype=object)
