"""The board's ranking, shared by every board surface: the Streamlit board, `arena board --text`
(board/text.py) and `GET /api/board` (board/json_rows.py).

Per task and split: each participant account's last *scored* evaluation (by created_at; a
SpecScore or 0, SCORING.md "Ranking") ranked by SpecScore; a void, queued, running or failed-to-run
evaluation never hides an earlier score. An account with no scored evaluation is listed below the
ranked ones, unranked, with its last evaluation's reason, as are scores of 0 by a failed gate.
References (is_reference) are ranked apart, each reference label's last scored evaluation.

Ranks are shared within the measurement's noise (SCORING.md "Ties on the board"): each entry
carries an interval (scoring/intervals.py: a seeded bootstrap over its passes, widened by the
task's calibrated max A/A error) and its rank is 1 + the number of ranked entries of its
section whose interval lies entirely above its own (LMArena's rule); `tie` marks a rank that
another entry shares. The task's A/A reference (the protocol's reference of kind `none`, the
stock engine as candidate) checks that noise: when its |SpecScore − 1| exceeds the calibrated
max A/A error the references are flagged (`aa_flag`, `board_noise`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from speculator_arena.rules.accounts import CALIBRATION_ACCOUNT
from speculator_arena.scoring.intervals import max_abs_error, specscore_intervals
from speculator_arena.scoring.result import Scores

# The account a calibration's evaluations are made under (calibration/plan.py runs them).

COLUMNS = [
    "section",
    "rank",
    "tie",
    "evaluation_id",
    "account_id",
    "label",
    "is_reference",
    "split",
    "status",
    "specscore",
    "interval_low",
    "interval_high",
    "specscore_reason",
    "r_solo",
    "r_team",
    "r_busy",
    "gates_pass",
    "failed_gates",
    "not_measured_gates",
    "gap_flag",
    "created_at",
    "candidate_ttft_p50",
    "candidate_tpot_p50",
    "candidate_cache_hit_tokens",
    "candidate_mean_acceptance_length",
    "ranked",
    "aa_flag",
]


def shared_ranks(low, high) -> np.ndarray:
    """LMArena's rule: 1 + the number of entries whose interval's low end lies above this
    entry's high end. Entries within each other's intervals share a rank."""
    low, high = np.asarray(low, dtype=float), np.asarray(high, dtype=float)
    ordered = np.sort(low)
    return 1 + len(low) - np.searchsorted(ordered, high, side="right")


def _rank(rows: pd.DataFrame, section: str) -> pd.DataFrame:
    rows = rows.copy()
    rows["section"] = section
    rows["ranked"] = rows["specscore"].notna() & (rows["failed_gates"].fillna("") == "")
    top = rows[rows["ranked"]]
    top = top.assign(rank=shared_ranks(top["interval_low"], top["interval_high"]))
    top = top.assign(tie=top["rank"].duplicated(keep=False))
    top = top.sort_values(["rank", "specscore", "created_at"], ascending=[True, False, True])
    rest = rows[~rows["ranked"]].sort_values(["specscore", "created_at"], ascending=[False, True], na_position="last")
    rest = rest.assign(rank=pd.NA, tie=False)
    return pd.concat([top, rest])


def aa_reference_names(protocol_version: int, task_id: str) -> list[str]:
    """The task's A/A references: the protocol's references of kind `none` (the stock engine as
    the candidate, e.g. `stock`, `dev-stock`)."""
    from speculator_arena.protocol import load_protocol

    task = load_protocol(protocol_version).tasks.get(task_id)
    return [] if task is None else [r.name for r in task.references if r.kind == "none"]


def board_noise(protocol_version: int, task_id: str, rows: pd.DataFrame) -> dict:
    """What the board says about its noise: the calibrated max A/A error the intervals are
    widened by (None: not calibrated), and whether the A/A reference on this board falls
    outside it (`aa_flag`: True, False, or None when not calibrated or not measured)."""
    e = max_abs_error(protocol_version, task_id)
    names = aa_reference_names(protocol_version, task_id)
    refs = (
        rows[(rows["section"] == "references") & rows["label"].isin(names) & rows["specscore"].notna()]
        if len(rows)
        else rows
    )
    aa = refs.iloc[0] if len(refs) else None
    out = {
        "calibrated": e is not None,
        "max_abs_error": e,
        "aa_reference": names[0] if names else None,
        "aa_evaluation_id": None,
        "aa_specscore": None,
        "aa_error": None,
        "aa_flag": None,
    }
    if aa is not None:
        out.update(
            aa_reference=str(aa["label"]),
            aa_evaluation_id=str(aa["evaluation_id"]),
            aa_specscore=float(aa["specscore"]),
            aa_error=abs(float(aa["specscore"]) - 1.0),
        )
        if e is not None:
            out["aa_flag"] = bool(out["aa_error"] > e)
    out["note"] = _noise_note(protocol_version, task_id, out)
    return out


def _noise_note(protocol_version: int, task_id: str, n: dict) -> str:
    if not n["calibrated"]:
        return (
            f"not calibrated: protocol v{protocol_version} sets no max A/A error for {task_id}, so each "
            "interval is the bootstrap's alone and the A/A reference is not checked"
        )
    e = n["max_abs_error"]
    if n["aa_flag"] is None:
        who = n["aa_reference"] or "the A/A reference"
        return f"max A/A error {e:.3f} (protocol v{protocol_version}); {who} is not measured on this board"
    if n["aa_flag"]:
        return (
            f"FLAGGED: A/A reference {n['aa_reference']} scored {n['aa_specscore']:.4f}, |SpecScore − 1| = "
            f"{n['aa_error']:.3f} > max A/A error {e:.3f} (protocol v{protocol_version}): the measurements "
            "are noisier than calibrated"
        )
    return (
        f"A/A reference {n['aa_reference']} scored {n['aa_specscore']:.4f}, within the max A/A error "
        f"{e:.3f} (protocol v{protocol_version})"
    )


def board_rows(scores: Scores, task_id: str, split: str = "test") -> pd.DataFrame:
    """Ranked rows of one task's board: participants first, then references (column `section`)."""
    ev = scores.evaluations
    # the calibration's runs are the arena's own measurements (protocol section 10), not entries
    ev = ev[(ev["task_id"] == task_id) & (ev["split"] == split) & (ev["account_id"] != CALIBRATION_ACCOUNT)]
    # scored rows sort after unscored ones, so each group's last row is its last scored evaluation
    # when it has one, else its last evaluation
    ev = ev.assign(_scored=ev["specscore"].notna()).sort_values(["_scored", "created_at", "evaluation_id"])
    ev = ev.drop(columns="_scored")
    parts = ev[~ev["is_reference"].fillna(False).astype(bool)].groupby("account_id", dropna=False).tail(1)
    refs = ev[ev["is_reference"].fillna(False).astype(bool)].groupby("label", dropna=False).tail(1)
    entries = pd.concat([parts, refs])
    e = max_abs_error(scores.protocol_version, task_id)
    # intervals the board's memo already drew (board/memo.py): the same values, not drawn again
    known = getattr(scores, "intervals", None)
    entries = pd.concat([entries, specscore_intervals(entries, scores.passes, e, known)], axis=1)
    entries["max_abs_error"] = np.nan if e is None else e
    ref = entries["is_reference"].fillna(False).astype(bool)
    out = pd.concat([_rank(entries[~ref], "participants"), _rank(entries[ref], "references")], ignore_index=True)
    for c in COLUMNS:
        if c not in out.columns:
            out[c] = pd.NA
    out["rank"] = out["rank"].astype("Int64")
    out["tie"] = out["tie"].astype(bool)
    noise = board_noise(scores.protocol_version, task_id, out)
    out["aa_flag"] = pd.array(
        [noise["aa_flag"] if r else None for r in out["section"] == "references"], dtype="boolean"
    )
    return out[COLUMNS + [c for c in out.columns if c not in COLUMNS]].reset_index(drop=True)
