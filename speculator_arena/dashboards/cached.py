"""Streamlit caches around the board's read model (`board/data.py`, `board/memo.py`): one place that decides what is cached and for how long.

Why a time-to-live and not a cache that lives forever: the warehouse grows while the board
runs (a runner writes new evaluations, an evaluation's status changes), and a viewer must see
that within `ARENA_BOARD_TTL` seconds (default 30) without restarting the server. Keys are
the warehouse path and the arguments, so one server can show several warehouses.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from speculator_arena import settings
from speculator_arena.board import data, export
from speculator_arena.board.memo import BoardMemo
from speculator_arena.board.shown import ShownRows, read_shown
from speculator_arena.dashboards import board_view as views
from speculator_arena.dashboards.board_view import BoardView
from speculator_arena.warehouse.store import arena_home

TTL = settings.number("ARENA_BOARD_TTL")


def home() -> str:
    return str(arena_home())


@st.cache_resource(show_spinner=False)
def memo(home: str) -> BoardMemo:
    """One memo per warehouse for the server's life (see memo.py: it re-reads only changed files)."""
    return BoardMemo(home)


@st.cache_data(ttl=TTL, show_spinner=False)
def state(home: str) -> data.WarehouseState:
    """What the sidebar needs of the warehouse (a few numbers and names, cheap to cache)."""
    from pathlib import Path

    if not Path(home).exists():
        return data.warehouse_state(home)
    return memo(home).state()


@st.cache_data(ttl=TTL, show_spinner="Listing evaluations…")
def index(home: str) -> pd.DataFrame:
    return memo(home).index()


@st.cache_data(ttl=TTL, show_spinner="Scoring the board from raw rows…")
def board(home: str, task_id: str, protocol_version: int | None) -> data.ScoreFrames:
    # no index passed: the memo lists the warehouse only when its change marker moved (memo.py)
    return memo(home).board(task_id, protocol_version)


@st.cache_data(ttl=TTL, show_spinner="Scoring the board from raw rows…")
def board_view(home: str, task_id: str, protocol_version: int, split: str) -> BoardView:
    """The board page's text (board_view.py): what a render after the time-to-live re-reads."""
    return views.board_view(memo(home), task_id, protocol_version, split)


@st.cache_data(ttl=TTL, show_spinner=False)
def participants_page(home: str, task_id: str, protocol_version: int, split: str, page: int) -> str:
    return views.participants_page(memo(home), task_id, protocol_version, split, page)


@st.cache_data(ttl=TTL, show_spinner=False, max_entries=8)
def board_csv(home: str, task_id: str, protocol_version: int, split: str) -> bytes:
    """The board's rows as CSV (board_view.rows_csv), made when the viewer clicks the download."""
    return views.rows_csv(memo(home), task_id, protocol_version, split)


def board_or_notice(sel, read=None):
    """The selected task's board (`read()`, when given, instead: another view of it, such as
    `board_view`), or None after telling the viewer why there is none (no evaluation or task
    yet, or a warehouse that cannot be read)."""
    if sel.state.evaluations == 0 or sel.task_id is None:
        st.info(sel.state.message)
        return None
    try:
        return read() if read is not None else board(sel.home, sel.task_id, sel.protocol_version)
    except data.BoardDataError as exc:
        st.error(str(exc))
        return None


def titled_board(sel, title: str, read=None):
    """A page about the selected task and split: its title, then the board (or `read()`, as
    `board_or_notice`) or the notice why none."""
    st.title(f"{title}: {sel.task_id or 'no task'} ({sel.split})")
    return board_or_notice(sel, read)


@st.cache_data(ttl=TTL, show_spinner="Scoring the evaluation from raw rows…")
def evaluation_scores(home: str, evaluation_id: str, protocol_version: int | None) -> data.ScoreFrames:
    return data.evaluation_scores(home, evaluation_id, protocol_version, index=index(home))


@st.cache_data(ttl=TTL, show_spinner="Reading the evaluation's measurements…")
def evaluation_raw(home: str, evaluation_id: str) -> data.EvaluationRaw:
    return data.evaluation_raw(home, evaluation_id)


@st.cache_data(ttl=TTL, show_spinner="Reading the rows of the shown figures…")
def shown_rows(home: str, evaluation_ids: tuple[str, ...], protocol_version: int | None) -> ShownRows:
    return read_shown(home, evaluation_ids, protocol_version, index=index(home))


@st.cache_data(ttl=TTL, show_spinner=False, max_entries=8)
def requests_parquet(home: str, evaluation_id: str, protocol_version: int | None) -> bytes:
    """The export's bytes (board/export.py), made when the viewer clicks the download."""
    return export.requests_parquet(home, evaluation_id, protocol_version, index=index(home))


@st.cache_data(ttl=TTL, show_spinner=False, max_entries=8)
def speculation_profile(home: str, evaluation_id: str, protocol_version: int | None) -> bytes:
    """The speculation profile's bytes (board/profile.py), made when the viewer clicks the download."""
    from speculator_arena.board import profile

    doc = profile.speculation_profile(home, evaluation_id, protocol_version, index=index(home))
    return profile.profile_json(doc)


@st.cache_data(ttl=TTL, show_spinner=False)
def sweeps(home: str) -> list[dict]:
    """The home's sweeps' manifests, newest first (board/sweep.py)."""
    from speculator_arena.board import sweep

    return sweep.sweeps(home)


@st.cache_data(ttl=TTL, show_spinner="Scoring the sweep's evaluations from raw rows…")
def sweep_document(home: str, sweep_id: str, protocol_version: int | None) -> dict:
    """One sweep's points, read from its stored evaluations through the memo (board/sweep.py)."""
    from speculator_arena.board import sweep

    return sweep.sweep_document(home, sweep_id, protocol_version, memo=memo(home))


def clear() -> None:
    """The sidebar's refresh button: read again now, statting every partition whatever the
    warehouse's change marker says (the memo still re-scores only changed files)."""
    BoardMemo.recheck_all()
    for fn in (
        state,
        index,
        board,
        board_view,
        participants_page,
        board_csv,
        evaluation_scores,
        evaluation_raw,
        shown_rows,
        requests_parquet,
        speculation_profile,
        sweeps,
        sweep_document,
    ):
        fn.clear()
