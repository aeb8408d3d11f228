"""The protocol in force and its history: what `arena protocol --json` prints for each version
(what GET /api/protocol serves), and what changed between two versions."""

import pandas as pd
import streamlit as st

from speculator_arena.board.protocol_diff import (
    protocol_diff,
    protocol_document,
    versions,
)
from speculator_arena.protocol import load_protocol


def main() -> None:
    st.title("Protocol")
    vs = versions()
    v = st.selectbox("Version", vs, index=len(vs) - 1, format_func=lambda x: f"v{x}", key="protocol_page_version")
    proto = load_protocol(v)
    doc = protocol_document(v)
    st.markdown(f"**Protocol v{proto.version}**, published {proto.published}. {proto.notes}")
    st.caption(f"Digest `{doc['digest']}`: scores name the version and digest they were computed under.")
    rows = []
    for task_id, task in proto.tasks.items():
        tp = proto.task(task_id)
        lim = tp.limits
        rows.append(
            {
                "task": task_id,
                "public": "yes" if task.public else "no (development)",
                "target": f"{task.model} @ {task.revision}",
                "window": str(task.max_model_len),
                "lanes solo / team / busy": " / ".join(str(tp.lanes[w]) for w in ("solo", "team", "busy")),
                "fidelity ceiling": str(lim.fidelity_ceiling),
                "likelihood bound": str(lim.likelihood_bound),
                "first-choice bound": str(lim.first_choice_bound),
                "greedy floor": "none" if lim.greedy_agreement_floor is None else str(lim.greedy_agreement_floor),
            }
        )
    st.table(pd.DataFrame(rows), hide_index=True)
    st.markdown(
        f"Dev/test gap flag: **{proto.dev_test_gap}**; memory slack **{proto.gates.memory.slack_gib} GiB** "
        f"over GPU_MEMORY_UTILIZATION **{proto.engine_environment.gpu_memory_utilization}**."
    )
    with st.expander("The whole document (`arena protocol --json`)", expanded=False):
        st.json(doc)
    calibration_section(v)

    st.subheader("Differences between versions")
    if len(vs) < 2:
        st.info(f"Only v{vs[0]} exists: there is nothing to compare yet.")
        return
    c1, c2 = st.columns(2)
    old = c1.selectbox("From", vs, index=len(vs) - 2, format_func=lambda x: f"v{x}", key="protocol_diff_old")
    new = c2.selectbox("To", vs, index=len(vs) - 1, format_func=lambda x: f"v{x}", key="protocol_diff_new")
    if old == new:
        st.info("Choose two different versions.")
        return
    diff = protocol_diff(old, new)
    if not diff:
        st.success(f"v{old} and v{new} hold the same values.")
    else:
        st.markdown(f"{len(diff)} value(s) differ between v{old} and v{new}:")
        st.table(pd.DataFrame(diff), hide_index=True)


def calibration_section(v: int) -> None:
    """Per task of version `v`, the evidence of its calibration in force (section 10), published
    with `v` or an earlier version: who published it and when, the table of values with the honest
    runs' range and each control, and the plots."""
    from speculator_arena.calibration.publish import task_calibrations

    for published, evidence, plots in task_calibrations(v):
        _calibration(published, evidence, plots)


def _calibration(v: int, evidence: dict, plots) -> None:
    from speculator_arena.calibration.evidence import value_table
    from speculator_arena.calibration.publish import publication

    rec = publication(v) or {}
    st.subheader(f"Calibration of {evidence['task_id']} (evidence)")
    st.markdown(
        f"Published as v{v} by **{rec.get('published_by', '?')}** at {rec.get('published_at', '?')}, from runs "
        f"made under v{evidence['base_version']} ({len(evidence['runs'])} runs)."
    )
    if evidence["problems"]:
        st.error(
            "This calibration does not separate the honest runs from every control"
            + (" (published with an operator's override)" if rec.get("override") else "")
            + ":\n\n"
            + "\n".join(f"- {p}" for p in evidence["problems"])
        )
    st.table(pd.DataFrame(value_table(evidence)), hide_index=True)
    runs = pd.DataFrame(
        [
            {
                "run": r["name"],
                "role": r["role"],
                "evaluation": r["evaluation_id"],
                "failed gates": ", ".join(r["failed_gates"]) or "-",
                "verdict": (
                    ("caught" if r["caught"] else "NOT CAUGHT")
                    if r["role"] == "control"
                    else ("passes every gate" if r["passes_every_gate"] else "FAILS")
                ),
            }
            for r in evidence["verdicts"]
        ]
    )
    st.table(runs, hide_index=True)
    for name, file in (evidence.get("plots") or {}).items():
        if (plots / file).exists():
            st.image(str(plots / file), caption=name.replace("_", " "))


main()
