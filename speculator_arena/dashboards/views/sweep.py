"""A sweep's curve (`arena sweep`): SpecScore with its interval and mean acceptance length against
the swept setting's value, acceptance by draft position per value, the table, the downloads.

Chosen by `?sweep=<id>` or the select box. Every number is read from the sweep's stored
evaluations through the board's memo (board/sweep.py), under the sidebar's protocol version;
sweeps are dev evaluations only, so nothing here comes from the hidden pool.
"""

import json

import pandas as pd
import streamlit as st

from speculator_arena.board.export import ExportRefused, file_name
from speculator_arena.board.sweep import sweep_parquet
from speculator_arena.dashboards import cached
from speculator_arena.dashboards import formatting as fmt
from speculator_arena.dashboards.sweep_charts import curve, positions_chart, table


def pick(sel) -> str | None:
    found = cached.sweeps(sel.home)
    if not found:
        st.info(
            f"No sweep in {sel.home} yet: `arena sweep --task local-smollm2 --engine engines/dev-ngram "
            "--setting DEV_ENGINE_SPEC_K --values 1,2,4,8` makes one (docs/participants/sweeps.md)."
        )
        return None
    ids = [d["sweep_id"] for d in found]
    wanted = st.query_params.get("sweep")
    if wanted is not None and wanted not in ids:
        st.error(f"No sweep {wanted!r} in {sel.home}.")
        wanted = None
    about = {d["sweep_id"]: d for d in found}

    def show(sid: str) -> str:
        d = about[sid]
        return f"{sid} · {d.get('setting')} = {', '.join(map(str, d.get('values', [])))} · {d.get('label')}"

    choice = st.selectbox("Sweep", ids, index=ids.index(wanted or ids[0]), format_func=show)
    if choice != wanted:
        st.query_params["sweep"] = choice
    return choice


def main() -> None:
    sel = st.session_state["selection"]
    st.title("Sweep")
    sid = pick(sel)
    if sid is None:
        return
    try:
        doc = cached.sweep_document(sel.home, sid, sel.protocol_version)
    except ExportRefused as exc:
        st.error(exc.reason)
        return
    setting = doc["setting"]
    st.caption(
        f"`{setting}` of `{doc['engine']}` on {doc['task_id']} (dev split), each value one evaluation against the "
        f"stock engine; scored under protocol v{doc['protocol_version']}. Columns: docs/participants/sweeps.md."
    )
    points = pd.DataFrame(doc["points"])
    st.subheader("SpecScore and mean acceptance length")
    st.altair_chart(curve(points, setting), width="content")
    st.subheader("Acceptance by draft position")
    chart = positions_chart(points, setting)
    if chart is None:
        st.info(
            "No value has per-position counters: "
            + "; ".join(sorted({fmt.text(w) for w in points["acceptance_reason"]}))
        )
    else:
        st.altair_chart(chart, width="content")
    st.subheader("Per value")
    st.table(table(points, setting), hide_index=True)
    st.download_button(
        "Download the sweep (JSON)",
        data=json.dumps(doc, indent=1),
        file_name=file_name(sid, "sweep.json"),
        mime="application/json",
        on_click="ignore",
    )
    st.download_button(
        "Download the sweep (Parquet)",
        data=lambda: sweep_parquet(doc),
        file_name=file_name(sid, "sweep.parquet"),
        mime="application/vnd.apache.parquet",
        on_click="ignore",
    )


main()
