"""One task's throughput against interactivity: the references' curves and a chosen entry's on one
plot (SPEED-Bench's and InferenceX's view), each evaluation's stock engine dashed beside it.

The entries are the board's (board/ranking.py: each reference's and each account's last scored
evaluation of the split); the points are board/curves.py's, from raw rows. Shown, never scored.
"""

import pandas as pd
import streamlit as st

from speculator_arena.board import curves
from speculator_arena.board.data import BoardDataError
from speculator_arena.dashboards import cached, charts
from speculator_arena.dashboards import formatting as fmt
from speculator_arena.dashboards.links import evaluation_md
from speculator_arena.dashboards.shown_sections import REGIMES
from speculator_arena.protocol import load_protocol
from speculator_arena.protocol.model import WORKLOADS


def _entry(participants: pd.DataFrame) -> pd.Series | None:
    """The participant the viewer picked (`?entry=<evaluation id>` links one), the leader by default."""
    if participants.empty:
        return None
    ids = participants["evaluation_id"].tolist()
    wanted = st.query_params.get("entry")
    labels = dict(zip(ids, participants["label"].astype(str) + " · " + participants["account_id"].astype(str)))
    choice = st.selectbox(
        "Entry beside the references",
        ids,
        index=ids.index(wanted) if wanted in ids else 0,
        format_func=lambda eid: labels[eid],
        help="Each account's last scored evaluation on this split, in the board's order.",
    )
    if choice != wanted:
        st.query_params["entry"] = choice
    return participants[participants["evaluation_id"] == choice].iloc[0]


def main() -> None:
    sel = st.session_state["selection"]
    frames = cached.titled_board(sel, "Task")
    if frames is None:
        return
    version = frames.protocol_version or sel.protocol_version
    proto = load_protocol(version)
    if sel.task_id in proto.tasks:
        lanes = proto.task(sel.task_id).lanes
        st.caption("Lanes: " + ", ".join(f"{w} {lanes[w]}" for w in WORKLOADS) + f" (protocol v{version}). " + REGIMES)
    rows = frames.boards.get(sel.split)
    if rows is None or rows.empty:
        st.info(f"No finished {sel.split} evaluation of {sel.task_id} yet.")
        return
    references = rows[rows["section"] == "references"]
    entry = _entry(rows[rows["section"] == "participants"])
    shown = pd.concat([references, entry.to_frame().T] if entry is not None else [references], ignore_index=True)
    if shown.empty:
        st.info("No reference or participant to draw yet.")
        return
    try:
        raw = cached.shown_rows(sel.home, tuple(shown["evaluation_id"]), version)
    except BoardDataError as exc:
        st.error(str(exc))
        return
    names = dict(zip(shown["evaluation_id"], shown["label"].astype(str)))
    kinds = dict(
        zip(shown["evaluation_id"], shown["section"].map({"references": "reference", "participants": "entry"}))
    )
    points = curves.interactivity_points(raw)
    points = points.assign(
        dash=points["engine"],
        curve=[f"{names[e]} ({kinds[e]})" for e in points["evaluation_id"]],
    )
    st.subheader("Throughput against interactivity")
    if points["throughput"].notna().any():
        st.caption(
            f"{sel.task_id}, {sel.split}: each evaluation's candidate solid, its stock engine (measured on the "
            "same sessions) dashed."
        )
        st.altair_chart(charts.interactivity(points, series="curve"), width="content")
    else:
        st.info("No point can be drawn: every one is blank (below, with the reason).")
    st.markdown(
        fmt.md_table(
            [
                {
                    "curve": evaluation_md(names[p.evaluation_id], p.evaluation_id, version)
                    + f" ({kinds[p.evaluation_id]})",
                    "engine": p.engine,
                    "workload": p.workload,
                    "lanes": fmt.BLANK if fmt.missing(p.lanes) else str(int(p.lanes)),
                    "throughput (tok/s)": fmt.num(p.throughput, 2),
                    "per-user (tok/s per lane)": fmt.num(p.per_user, 2),
                    "why blank": fmt.md_escape(p.reason),
                }
                for p in points.itertuples()
            ],
            ["curve", "engine", "workload", "lanes", "throughput (tok/s)", "per-user (tok/s per lane)", "why blank"],
        )
    )


main()
