"""What the board page shows, as text, made once per board the memo computed.

Why: a render after the Streamlit caches' time-to-live expired must cost about what an empty
board's does (issue 36). The memo (board/memo.py) answers such a re-read with the very
`ScoreFrames` object it returned before, and the very index frame; what the page made of them
(the Markdown of a page of 100 rows, the metrics, the captions, the list of evaluations not on
the board) is kept here, keyed by those two objects, so a re-read formats nothing again, and
Streamlit's cache stores a few strings instead of pickling 870 evaluations' frames.

The page (views/board.py) only writes what a `BoardView` holds; the caches in cached.py call
`board_view` and `participants_page`.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import pandas as pd

from speculator_arena.board.memo import BoardMemo
from speculator_arena.board.ranking import board_noise
from speculator_arena.dashboards import board_table
from speculator_arena.dashboards import formatting as fmt
from speculator_arena.dashboards.links import evaluation_md
from speculator_arena.rules.status import RANKED

PAGE_SIZE = 100
PENDING_LISTED = 50  # evaluations named in the "not on the board" list


@dataclass(frozen=True)
class Metric:
    value: str
    help: str | None = None
    caption: str | None = None


@dataclass(frozen=True)
class BoardView:
    caption: str  # under the title: the protocol version the board is scored under
    no_rows: str | None  # the notice when the split has no finished evaluation (then nothing below but `pending`)
    leader: Metric
    ranked: Metric
    best_reference: Metric
    participants: int  # rows of the participants' table (`participants_page` draws a page of it)
    pages: int
    no_participants: str | None
    intervals_caption: str
    references_md: str | None
    no_references: str | None
    noise: dict | None  # board/ranking.py board_noise, for board_table.show_aa_check (None: no rows)
    # the picture's rows (board_table.interval_rows of the same rows as the tables), per section
    participants_chart: pd.DataFrame | None
    references_chart: pd.DataFrame | None
    chart_caption: str | None
    pending: tuple[str, str] | None  # (the expander's title, its Markdown) of evaluations not ranked yet


_lock = threading.Lock()
_views: dict[tuple, tuple] = {}  # (home, task, version, split) -> (frames, index, BoardView, {page: md})
KEPT = 32  # views kept (tasks x splits x versions viewed lately)


def _entry(memo: BoardMemo, task_id: str, protocol_version: int, split: str) -> tuple:
    frames = memo.board(task_id, protocol_version)
    index = memo.index_frame()
    key = (str(memo.wh.home), task_id, protocol_version, split)
    with _lock:
        last = _views.get(key)
        if last is not None and last[0] is frames and last[1] is index:
            return last
    entry = (frames, index, _make(frames, index, task_id, protocol_version, split), {})
    with _lock:
        _views.pop(key, None)
        _views[key] = entry
        while len(_views) > KEPT:
            del _views[next(iter(_views))]
    return entry


def board_view(memo: BoardMemo, task_id: str, protocol_version: int, split: str) -> BoardView:
    """The board page's text for one task, split and protocol version (raises the memo's
    `data.BoardDataError` when the warehouse cannot be scored)."""
    return _entry(memo, task_id, protocol_version, split)[2]


def participants_page(memo: BoardMemo, task_id: str, protocol_version: int, split: str, page: int) -> str:
    """The Markdown of page `page` (from 1) of the participants' table."""
    frames, _, _, pages = _entry(memo, task_id, protocol_version, split)
    with _lock:
        md = pages.get(page)
    if md is None:
        participants = _participants(frames, split)
        shown = participants.iloc[(page - 1) * PAGE_SIZE : page * PAGE_SIZE]
        md = board_table.markdown(shown, protocol_version)
        with _lock:
            pages[page] = md
    return md


def _participants(frames, split: str) -> pd.DataFrame:
    rows = frames.boards.get(split)
    return rows[rows["section"] == "participants"]


def _make(frames, index: pd.DataFrame, task_id: str, protocol_version: int, split: str) -> BoardView:
    version = frames.protocol_version or protocol_version
    caption = (
        f"Scored under protocol v{version}"
        + (f" (digest {frames.protocol_digest[:12]})" if frames.protocol_digest else "")
        + " from the warehouse's raw rows. Each account's last finished evaluation is ranked by "
        "SpecScore = (r_solo · r_team · r_busy)^(1/3); one that misses a gate scores 0 and is listed "
        "below the ranked ones. Entries within each other's noise share a rank (2=). References are "
        "measured exactly as submissions are and ranked apart."
    )
    pending = _pending(index, task_id, split, protocol_version)
    rows = frames.boards.get(split)
    blank = Metric(fmt.BLANK)
    if rows is None or rows.empty:
        return BoardView(
            caption,
            f"No finished {split} evaluation of {task_id} yet.",
            blank,
            blank,
            blank,
            0,
            0,
            None,
            "",
            None,
            None,
            None,
            None,
            None,
            None,
            pending,
        )
    noise = board_noise(version, task_id, rows)
    participants = rows[rows["section"] == "participants"]
    references = rows[rows["section"] == "references"]
    ranked = participants[participants["ranked"].fillna(False).astype(bool)]
    leader = blank
    if not ranked.empty:
        top = ranked.iloc[0]
        leaders = ranked[ranked["rank"] == 1]
        leader = Metric(
            fmt.score(top["specscore"]),
            f"{top['label']} ({top['account_id']})",
            ("Leader: " if len(leaders) == 1 else "Sharing rank 1: ")
            + ", ".join(fmt.md_escape(x) for x in leaders["label"]),
        )
    best_ref = references[references["ranked"].fillna(False).astype(bool)]
    participants_chart = board_table.interval_rows(participants, board_table.CHART_PARTICIPANTS)
    references_chart = board_table.interval_rows(references)
    return BoardView(
        caption,
        None,
        leader,
        Metric(f"{len(ranked)} of {len(participants)}"),
        Metric(
            fmt.score(best_ref.iloc[0]["specscore"]) if not best_ref.empty else fmt.BLANK,
            None if best_ref.empty else str(best_ref.iloc[0]["label"]),
        ),
        len(participants),
        (len(participants) + PAGE_SIZE - 1) // PAGE_SIZE,
        f"No participant has a finished {split} evaluation of {task_id} yet." if participants.empty else None,
        board_table.intervals_caption(noise),
        None if references.empty else board_table.markdown(references, protocol_version, label_column="Reference"),
        "No reference speculator has been measured on this task and split yet (see the References page)."
        if references.empty
        else None,
        noise,
        participants_chart,
        references_chart,
        _chart_caption(len(ranked), len(participants_chart), len(participants) - len(ranked)),
        pending,
    )


def _chart_caption(ranked: int, drawn: int, unranked: int) -> str:
    drawn_text = (
        f"the {drawn} best ranked of {ranked} participants are drawn"
        if drawn < ranked
        else "every ranked participant and reference is drawn"
    )
    return (
        "Each row is an entry: its rank (2= when another entry's interval overlaps, so they share it) and "
        "label on the left, a dot at its SpecScore, a bar over its 95% interval, the two written beside it; "
        f"the dashed line at 1.0 is the stock engine. On one scale: {drawn_text}"
        + (f"; the {unranked} not ranked (a missed gate, no SpecScore) are in the table" if unranked else "")
        + "."
    )


def rows_csv(memo: BoardMemo, task_id: str, protocol_version: int, split: str) -> bytes:
    """The board's rows as CSV (the page's download): every column of board/ranking.py's
    `COLUMNS`, the figures of both engines (`board_table.EXPORT_FIGURES`: TTFT and TPOT
    percentiles, cache hit, acceptance, output tokens per second), the ratios' reasons and
    the gap's detail, in the board's order. Numbers as the scorer holds them (seconds, shares)."""
    from speculator_arena.board.ranking import COLUMNS

    frames = _entry(memo, task_id, protocol_version, split)[0]
    rows = frames.boards.get(split)
    if rows is None:
        rows = pd.DataFrame(columns=COLUMNS)
    extra = board_table.EXPORT_FIGURES + ["r_solo_reason", "r_team_reason", "r_busy_reason", "gap_detail"]
    cols = COLUMNS + [c for c in extra if c not in COLUMNS]
    out = rows.reindex(columns=cols)
    return out.to_csv(index=False).encode()


def _pending(index: pd.DataFrame, task_id: str, split: str, protocol_version: int) -> tuple[str, str] | None:
    """Evaluations of this task and split that carry no score yet, so a viewer knows they exist."""
    pending = index[(index["task_id"] == task_id) & (index["split"] == split) & ~index["status"].isin(RANKED)]
    if pending.empty:
        return None
    by_status = ", ".join(f"{n} {s}" for s, n in pending["status"].value_counts().items())
    body = "\n".join(
        f"- {evaluation_md(r.label, r.evaluation_id, protocol_version)}: {fmt.md_escape(r.status)}"
        + (f" ({fmt.md_escape(r.void_reason)})" if fmt.text(r.void_reason) else "")
        for r in pending.head(PENDING_LISTED).itertuples()
    )
    return f"Not on the board: {len(pending)} evaluation(s) without a score ({by_status})", body
