"""The board of one task and split: participants ranked by SpecScore (ranks shared within each
other's intervals), references apart, with the A/A reference checked against the calibrated noise.

What it shows is made once per board the memo computed (dashboards/board_view.py): the page
only writes it, so a render after the caches expired costs about what an empty board's does."""

import streamlit as st

from speculator_arena.dashboards import board_table, cached
from speculator_arena.dashboards.board_view import PAGE_SIZE


def pending_notice(view) -> None:
    """Evaluations of this task and split that carry no score yet, so a viewer knows they exist."""
    if view.pending is None:
        return
    title, body = view.pending
    with st.expander(title):
        st.caption(
            "Queued and running evaluations are ranked once they finish; void ones are refunded and never ranked."
        )
        st.markdown(body)


def main() -> None:
    sel = st.session_state["selection"]
    view = cached.titled_board(
        sel, "Board", lambda: cached.board_view(sel.home, sel.task_id, sel.protocol_version, sel.split)
    )
    if view is None:
        return
    st.caption(view.caption)
    if view.no_rows:
        st.info(view.no_rows)
        pending_notice(view)
        return

    cols = st.columns(3)
    cols[0].metric("Leading SpecScore", view.leader.value, help=view.leader.help)
    if view.leader.caption:
        cols[0].caption(view.leader.caption)
    cols[1].metric("Participants ranked", view.ranked.value)
    cols[2].metric("Best reference SpecScore", view.best_reference.value, help=view.best_reference.help)

    st.subheader("Participants")
    if view.no_participants:
        st.info(view.no_participants)
    else:
        page = 1
        if view.pages > 1:
            page = int(st.number_input(f"Page (of {view.pages}, {PAGE_SIZE} rows each)", 1, view.pages, 1))
        st.markdown(cached.participants_page(sel.home, sel.task_id, sel.protocol_version, sel.split, page))
    st.caption(view.intervals_caption)
    st.caption(
        "TTFT, TPOT, cache hit and acceptance are the candidate engine's over all counted timed requests; "
        "acceptance is the engine's own report (vllm:spec_decode_* counters), shown and never scored. "
        "Dev/test gap: FLAGGED when the last test SpecScore is below (1 − gap) × the last dev SpecScore."
    )

    st.subheader("References")
    if view.no_references:
        st.info(view.no_references)
    else:
        st.markdown(view.references_md)
    board_table.show_aa_check(st, view.noise)
    pending_notice(view)


main()
