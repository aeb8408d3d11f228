"""The board of one task and split: first a picture of every ranked entry's SpecScore with its
95% interval (participants and references apart, on one scale, shared ranks on the rows, the
stock engine's 1.0 marked), then the ranked tables, narrow enough to read without scrolling
sideways (rank, entry, SpecScore [interval], the three ratios, status), references apart, with
the A/A reference checked against the calibrated noise. The candidate's TTFT and TPOT
percentiles, cache hit and acceptance are on each evaluation's page and in the CSV download.

What it shows is made once per board the memo computed (dashboards/board_view.py): the page
only writes it, so a render after the caches expired costs about what an empty board's does."""

import streamlit as st

from speculator_arena.dashboards import board_table, cached, charts
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


def picture(view) -> None:
    """The ranked entries' SpecScores and intervals, from the rows the tables below are made of."""
    domain = charts.board_domain(view.participants_chart, view.references_chart)
    for title, rows in (("Participants", view.participants_chart), ("References", view.references_chart)):
        if rows is None or rows.empty:
            continue
        st.markdown(f"**{title}**")
        st.altair_chart(charts.board_intervals(rows, domain), width="stretch")
    st.caption(view.chart_caption)


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

    picture(view)

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
        "r solo, r team, r busy: the candidate's speed over the stock engine's in each workload. Status: the "
        "gates, why an entry has no SpecScore, and the dev/test gap flag when raised (the last test SpecScore "
        "below (1 − gap) × the last dev SpecScore). The candidate's TTFT and TPOT p50/p90/p99, cache hit and "
        "the engine's own acceptance report (shown, never scored) are on each entry's evaluation page (its "
        "link) and in the download below."
    )

    st.subheader("References")
    if view.no_references:
        st.info(view.no_references)
    else:
        st.markdown(view.references_md)
    board_table.show_aa_check(st, view.noise)
    pending_notice(view)
    st.download_button(
        "Download the board's rows (CSV)",
        data=lambda: cached.board_csv(sel.home, sel.task_id, sel.protocol_version, sel.split),
        file_name=f"board-{sel.task_id}-{sel.split}.csv",
        mime="text/csv",
        on_click="ignore",
        help="Every row above with every figure the board holds for it: ranks, SpecScores and intervals, ratios, "
        "gates, the candidate's and the stock engine's TTFT and TPOT p50/p90/p99, cache hit, acceptance and "
        "output tokens per second (seconds and shares, as the scorer holds them).",
    )


main()
