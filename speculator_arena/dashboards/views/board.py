"""The board of one task and split: participants ranked by SpecScore (ranks shared within each
other's intervals), references apart, with the A/A reference checked against the calibrated noise."""

import streamlit as st

from speculator_arena.board.ranking import board_noise
from speculator_arena.dashboards import board_table, cached
from speculator_arena.dashboards import formatting as fmt
from speculator_arena.dashboards.links import evaluation_md
from speculator_arena.rules.status import RANKED

PAGE_SIZE = 100


def unranked_notice(sel) -> None:
    """Evaluations of this task and split that carry no score yet, so a viewer knows they exist."""
    idx = cached.index(sel.home)
    pending = idx[(idx["task_id"] == sel.task_id) & (idx["split"] == sel.split) & ~idx["status"].isin(RANKED)]
    if pending.empty:
        return
    by_status = ", ".join(f"{n} {s}" for s, n in pending["status"].value_counts().items())
    with st.expander(f"Not on the board: {len(pending)} evaluation(s) without a score ({by_status})"):
        st.caption(
            "Queued and running evaluations are ranked once they finish; void ones are refunded and never ranked."
        )
        st.markdown(
            "\n".join(
                f"- {evaluation_md(r.label, r.evaluation_id, sel.protocol_version)}: {fmt.md_escape(r.status)}"
                + (f" ({fmt.md_escape(r.void_reason)})" if fmt.text(r.void_reason) else "")
                for r in pending.head(50).itertuples()
            )
        )


def main() -> None:
    sel = st.session_state["selection"]
    frames = cached.titled_board(sel, "Board")
    if frames is None:
        return
    rows = frames.boards.get(sel.split)
    st.caption(
        f"Scored under protocol v{frames.protocol_version or sel.protocol_version}"
        + (f" (digest {frames.protocol_digest[:12]})" if frames.protocol_digest else "")
        + " from the warehouse's raw rows. Each account's last finished evaluation is ranked by "
        "SpecScore = (r_solo · r_team · r_busy)^(1/3); one that misses a gate scores 0 and is listed "
        "below the ranked ones. Entries within each other's noise share a rank (2=). References are "
        "measured exactly as submissions are and ranked apart."
    )
    if rows is None or rows.empty:
        st.info(f"No finished {sel.split} evaluation of {sel.task_id} yet.")
        unranked_notice(sel)
        return
    noise = board_noise(frames.protocol_version or sel.protocol_version, sel.task_id, rows)
    participants = rows[rows["section"] == "participants"]
    references = rows[rows["section"] == "references"]
    ranked = participants[participants["ranked"].fillna(False).astype(bool)]

    cols = st.columns(3)
    if not ranked.empty:
        top = ranked.iloc[0]
        leaders = ranked[ranked["rank"] == 1]
        cols[0].metric("Leading SpecScore", fmt.score(top["specscore"]), help=f"{top['label']} ({top['account_id']})")
        cols[0].caption(
            ("Leader: " if len(leaders) == 1 else "Sharing rank 1: ")
            + ", ".join(fmt.md_escape(x) for x in leaders["label"])
        )
    else:
        cols[0].metric("Leading SpecScore", fmt.BLANK)
    cols[1].metric("Participants ranked", f"{len(ranked)} of {len(participants)}")
    best_ref = references[references["ranked"].fillna(False).astype(bool)]
    cols[2].metric(
        "Best reference SpecScore",
        fmt.score(best_ref.iloc[0]["specscore"]) if not best_ref.empty else fmt.BLANK,
        help=None if best_ref.empty else str(best_ref.iloc[0]["label"]),
    )

    st.subheader("Participants")
    if participants.empty:
        st.info(f"No participant has a finished {sel.split} evaluation of {sel.task_id} yet.")
    else:
        page = 1
        pages = (len(participants) + PAGE_SIZE - 1) // PAGE_SIZE
        if pages > 1:
            page = int(st.number_input(f"Page (of {pages}, {PAGE_SIZE} rows each)", 1, pages, 1))
        shown = participants.iloc[(page - 1) * PAGE_SIZE : page * PAGE_SIZE]
        st.markdown(board_table.markdown(shown, sel.protocol_version))
    st.caption(board_table.intervals_caption(noise))
    st.caption(
        "TTFT, TPOT, cache hit and acceptance are the candidate engine's over all counted timed requests; "
        "acceptance is the engine's own report (vllm:spec_decode_* counters), shown and never scored. "
        "Dev/test gap: FLAGGED when the last test SpecScore is below (1 − gap) × the last dev SpecScore."
    )

    st.subheader("References")
    if references.empty:
        st.info("No reference speculator has been measured on this task and split yet (see the References page).")
    else:
        st.markdown(board_table.markdown(references, sel.protocol_version, label_column="Reference"))
    board_table.show_aa_check(st, noise)
    unranked_notice(sel)


main()
