"""The board as plain text for the terminal (`arena board --text`, `arena demo`), and the labels every board writes a rank and an interval with (the Streamlit
board's `formatting.rank` and the `scores` asset's Markdown use them too).

The rows are board/ranking.py's `board_rows`, the one ranking every surface shows.
"""

from __future__ import annotations

import math
import os

import pandas as pd

from speculator_arena.board.ranking import board_noise, board_rows
from speculator_arena.scoring.result import Scores


def _fmt(x, digits=3) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)) or x is pd.NA:
        return "-"
    return f"{x:.{digits}f}"


def rank_label(rank, tie) -> str:
    """A rank as the boards write it: `2=` when another entry shares it, "" when unranked."""
    if rank is None or rank is pd.NA or (isinstance(rank, float) and math.isnan(rank)):
        return ""
    return f"{int(rank)}=" if bool(tie) else str(int(rank))


def interval_label(low, high, digits: int = 3) -> str:
    """`[low, high]`, or "" when the entry has no interval (no SpecScore)."""
    if any(v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)) for v in (low, high)):
        return ""
    return f"[{low:.{digits}f}, {high:.{digits}f}]"


def board_text(scores: Scores, split: str = "test", task_ids=None) -> str:
    """Every task's board as plain text for the terminal."""
    ev = scores.evaluations
    if task_ids is None:
        task_ids = ev["task_id"].dropna().unique() if "task_id" in ev else []
    tasks = sorted(task_ids)
    lines = [
        f"SpeculatorArena board, split {split}, scored under protocol v{scores.protocol_version} "
        f"(digest {scores.protocol_digest[:12]})"
    ]
    if not tasks:
        lines.append("  (no evaluations stored)")
    for task in tasks:
        rows = board_rows(scores, task, split)
        lines.append("")
        lines.append(f"== {task} ({split}) ==")
        if rows.empty:
            lines.append(f"  (no {split} evaluations)")
            continue
        noise = board_noise(scores.protocol_version, task, rows)
        lines.append(
            "  SpecScore [95% interval]: bootstrap over the passes, widened by the max A/A error"
            + (f" {noise['max_abs_error']:.3f}" if noise["calibrated"] else " (not calibrated)")
            + "; entries whose intervals overlap share a rank (2=)"
        )
        for section in ("participants", "references"):
            sec = rows[rows["section"] == section]
            lines.append(f"  {section}:")
            if sec.empty:
                lines.append("    (none)")
                continue
            lines.append(
                f"    {'#':>4}  {'label':<24} {'account':<16} {'SpecScore [95% interval]':<24} "
                f"{'solo':>6} {'team':>6} {'busy':>6}  note"
            )
            for r in sec.itertuples():
                note = r.specscore_reason if isinstance(r.specscore_reason, str) else ""
                if r.gap_flag is True or (not pd.isna(r.gap_flag) and bool(r.gap_flag)):
                    note = (note + "; " if note else "") + "dev/test gap flagged"
                score = f"{_fmt(r.specscore, 4)} {interval_label(r.interval_low, r.interval_high)}".rstrip()
                lines.append(
                    f"    {rank_label(r.rank, r.tie):>4}  {str(r.label)[:24]:<24} {str(r.account_id)[:16]:<16} "
                    f"{score:<24} {_fmt(r.r_solo):>6} {_fmt(r.r_team):>6} {_fmt(r.r_busy):>6}  {note}"
                )
            if section == "references":
                lines.append(f"    A/A check: {noise['note']}")
    return "\n".join(lines)


def read_board_text(
    home: str | os.PathLike | None, split: str, protocol_version: int | None, task_ids: list[str] | None = None
) -> str:
    """The board as `board_text` prints it, read as the Streamlit board reads it (BoardMemo.board)."""
    from speculator_arena.board import data
    from speculator_arena.board.memo import BoardMemo

    memo = BoardMemo(home)
    index = memo.index()
    tasks = task_ids or data.tasks_present(index)
    boards = [memo.board(t, protocol_version, index=index) for t in tasks]
    return board_text(data.combined_frames(boards, protocol_version), split=split, task_ids=tasks)
