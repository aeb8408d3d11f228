"""The task's reference speculators (protocol section 11): what the protocol lists, and how each
measured, exactly as submissions are, ranked apart from the participants, and each one's history
across engine and protocol versions (dashboards/history_section.py)."""

import pandas as pd
import streamlit as st

from speculator_arena.board.data import BoardDataError
from speculator_arena.board.ranking import board_noise
from speculator_arena.dashboards import board_table, cached, history_section
from speculator_arena.dashboards import formatting as fmt
from speculator_arena.protocol import load_protocol


def main() -> None:
    sel = st.session_state["selection"]
    st.title(f"References: {sel.task_id or 'no task'} ({sel.split})")
    if sel.task_id is None:
        st.info(sel.state.message)
        return
    proto = load_protocol(sel.protocol_version)
    listed = proto.tasks[sel.task_id].references if sel.task_id in proto.tasks else []
    refs = pd.DataFrame()
    if sel.state.evaluations:
        try:
            frames = cached.board(sel.home, sel.task_id, sel.protocol_version)
        except BoardDataError as exc:
            st.error(str(exc))
            return
        board = frames.boards.get(sel.split, pd.DataFrame())
        if not board.empty:
            refs = board[board["section"] == "references"]
    measured = set(refs["label"].astype(str)) if not refs.empty else set()

    st.subheader(f"Listed by protocol v{proto.version}")
    if not listed:
        st.info(f"Protocol v{proto.version} lists no reference for {sel.task_id}.")
    else:
        st.table(
            pd.DataFrame(
                [
                    {
                        "reference": r.name,
                        "kind": r.kind,
                        "engine directory": r.engine,
                        "speculator": r.speculator or "none",
                        f"measured on {sel.split}": "yes" if r.name in measured else "not yet",
                    }
                    for r in listed
                ]
            ),
            hide_index=True,
        )

    st.subheader("Measured")
    if refs.empty:
        st.info(
            sel.state.message
            if sel.state.evaluations == 0
            else f"No reference has a finished {sel.split} evaluation of {sel.task_id} yet."
        )
        return
    st.markdown(board_table.markdown(refs, sel.protocol_version, label_column="Reference"))
    board_table.show_aa_check(st, board_noise(frames.protocol_version or sel.protocol_version, sel.task_id, board))
    failing = refs[refs["failed_gates"].fillna("") != ""]
    for r in failing.itertuples():
        st.caption(
            f"{fmt.text(r.label)} misses a gate ({fmt.text(r.failed_gates)}) and stays on the board as a "
            "reference that fails."
        )
    history_section.references_history_section(
        sel.home, sel.task_id, sel.split, sorted(measured), frames.protocol_version or sel.protocol_version
    )


main()
