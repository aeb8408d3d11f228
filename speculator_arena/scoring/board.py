"""The board's ranking, shared by `arena board --text`, `arena score --board` and the Streamlit board.

Per task and split: each participant account's last *scored* evaluation (by created_at; a
SpecScore or 0, SCORING.md "Ranking") ranked by SpecScore; a void, queued, running or failed-to-run
evaluation never hides an earlier score. An account with no scored evaluation is listed below the
ranked ones, unranked, with its last evaluation's reason, as are scores of 0. References
(is_reference) are ranked apart, each reference label's last scored evaluation.
"""

from __future__ import annotations

import math

import pandas as pd

from speculator_arena.scoring.result import Scores

COLUMNS = ["section", "rank", "evaluation_id", "account_id", "label", "is_reference", "split", "status", "specscore",
           "specscore_reason", "r_solo", "r_team", "r_busy", "gates_pass", "failed_gates", "not_measured_gates",
           "gap_flag", "created_at", "candidate_ttft_p50", "candidate_tpot_p50", "candidate_cache_hit_tokens",
           "candidate_mean_acceptance_length", "ranked"]


def _rank(rows: pd.DataFrame, section: str) -> pd.DataFrame:
    rows = rows.copy()
    rows["section"] = section
    rows["ranked"] = rows["specscore"].notna() & (rows["failed_gates"].fillna("") == "")
    top = rows[rows["ranked"]].sort_values(["specscore", "created_at"], ascending=[False, True])
    rest = rows[~rows["ranked"]].sort_values(["specscore", "created_at"], ascending=[False, True], na_position="last")
    top = top.assign(rank=range(1, len(top) + 1))
    rest = rest.assign(rank=pd.NA)
    return pd.concat([top, rest])


def board_rows(scores: Scores, task_id: str, split: str = "test") -> pd.DataFrame:
    """Ranked rows of one task's board: participants first, then references (column `section`)."""
    ev = scores.evaluations
    ev = ev[(ev["task_id"] == task_id) & (ev["split"] == split)]
    # scored rows sort after unscored ones, so each group's last row is its last scored evaluation
    # when it has one, else its last evaluation
    ev = ev.assign(_scored=ev["specscore"].notna()).sort_values(["_scored", "created_at", "evaluation_id"])
    ev = ev.drop(columns="_scored")
    parts = ev[~ev["is_reference"].fillna(False).astype(bool)].groupby("account_id", dropna=False).tail(1)
    refs = ev[ev["is_reference"].fillna(False).astype(bool)].groupby("label", dropna=False).tail(1)
    out = pd.concat([_rank(parts, "participants"), _rank(refs, "references")], ignore_index=True)
    for c in COLUMNS:
        if c not in out.columns:
            out[c] = pd.NA
    out["rank"] = out["rank"].astype("Int64")
    return out[COLUMNS + [c for c in out.columns if c not in COLUMNS]].reset_index(drop=True)


def _fmt(x, digits=3) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)) or x is pd.NA:
        return "-"
    return f"{x:.{digits}f}"


def board_text(scores: Scores, split: str = "test", task_ids=None) -> str:
    """Every task's board as plain text for the terminal."""
    ev = scores.evaluations
    tasks = sorted(task_ids or ev["task_id"].dropna().unique())
    lines = [f"SpeculatorArena board, split {split}, scored under protocol v{scores.protocol_version} "
             f"(digest {scores.protocol_digest[:12]})"]
    if not tasks:
        lines.append("  (no evaluations stored)")
    for task in tasks:
        rows = board_rows(scores, task, split)
        lines.append("")
        lines.append(f"== {task} ({split}) ==")
        if rows.empty:
            lines.append(f"  (no {split} evaluations)")
            continue
        for section in ("participants", "references"):
            sec = rows[rows["section"] == section]
            lines.append(f"  {section}:")
            if sec.empty:
                lines.append("    (none)")
                continue
            lines.append(f"    {'#':>3}  {'label':<24} {'account':<16} {'SpecScore':>9} {'solo':>6} {'team':>6} {'busy':>6}  note")
            for r in sec.itertuples():
                rank = "" if pd.isna(r.rank) else str(int(r.rank))
                note = r.specscore_reason if isinstance(r.specscore_reason, str) else ""
                if r.gap_flag is True or (not pd.isna(r.gap_flag) and bool(r.gap_flag)):
                    note = (note + "; " if note else "") + "dev/test gap flagged"
                lines.append(f"    {rank:>3}  {str(r.label)[:24]:<24} {str(r.account_id)[:16]:<16} {_fmt(r.specscore, 4):>9} "
                             f"{_fmt(r.r_solo):>6} {_fmt(r.r_team):>6} {_fmt(r.r_busy):>6}  {note}")
    return "\n".join(lines)
