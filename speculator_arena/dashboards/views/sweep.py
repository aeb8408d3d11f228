"""A sweep's curve (`arena sweep`): SpecScore with its interval and mean acceptance length against
the swept setting's value, acceptance by draft position per value, the table, the downloads.

Chosen by `?sweep=<id>` or the select box. Every number is read from the sweep's stored
evaluations through the board's memo (board/sweep.py), under the sidebar's protocol version;
sweeps are dev evaluations only, so nothing here comes from the hidden pool.
"""

import json

import altair as alt
import pandas as pd
import streamlit as st

from speculator_arena.board.export import ExportRefused, file_name
from speculator_arena.board.sweep import sweep_parquet
from speculator_arena.dashboards import cached
from speculator_arena.dashboards import formatting as fmt
from speculator_arena.protocol.model import WORKLOADS


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


def _axis(points: pd.DataFrame, setting: str) -> alt.X:
    numeric = pd.to_numeric(points["value"], errors="coerce").notna().all()
    return alt.X("x:Q" if numeric else "x:O", title=setting, scale=alt.Scale(zero=False) if numeric else alt.Undefined)


def curve(points: pd.DataFrame, setting: str) -> alt.HConcatChart:
    """SpecScore with its interval, and mean acceptance length, against the value."""
    df = points.assign(x=pd.to_numeric(points["value"], errors="coerce").fillna(points["value"]))
    x = _axis(points, setting)
    score = alt.Chart(df.dropna(subset=["specscore"]))
    score = score.mark_errorbar(ticks=True).encode(
        x=x, y=alt.Y("interval_low:Q", title="SpecScore"), y2="interval_high:Q"
    ) + score.mark_line(point=True).encode(
        x=x,
        y="specscore:Q",
        tooltip=["value", "evaluation_id", alt.Tooltip("specscore:Q", format=".3f"), "interval_low", "interval_high"],
    )
    al = (
        alt.Chart(df.dropna(subset=["mean_acceptance_length"]))
        .mark_line(point=True, color="#d62728")
        .encode(
            x=x,
            y=alt.Y("mean_acceptance_length:Q", title="mean acceptance length"),
            tooltip=["value", alt.Tooltip("mean_acceptance_length:Q", format=".3f")],
        )
    )
    return alt.hconcat(score.properties(height=240, width=320), al.properties(height=240, width=320))


def positions_chart(points: pd.DataFrame, setting: str) -> alt.Chart | None:
    rows = [
        {setting: str(r.value), "position": k, "acceptance": a}
        for r in points.itertuples()
        for k, a in enumerate(r.acceptance_by_position or [])
    ]
    if not rows:
        return None
    return (
        alt.Chart(pd.DataFrame(rows))
        .mark_line(point=True)
        .encode(
            x=alt.X("position:O", title="draft position"),
            y=alt.Y("acceptance:Q", title="accepted / drafts", scale=alt.Scale(domain=[0, 1])),
            color=alt.Color(f"{setting}:N"),
            tooltip=[setting, "position", alt.Tooltip("acceptance:Q", format=".3f")],
        )
        .properties(height=240, width=420)
    )


def table(points: pd.DataFrame, setting: str) -> pd.DataFrame:
    def ratio(r, w):
        lo, hi = r[f"r_{w}_pass_min"], r[f"r_{w}_pass_max"]
        spread = "" if fmt.missing(lo) or lo == hi else f" (passes {fmt.ratio(lo)}–{fmt.ratio(hi)})"
        return fmt.ratio(r[f"r_{w}"]) + spread

    out = pd.DataFrame({setting: points["value"].astype(str)})
    out["SpecScore"] = points["specscore"].map(fmt.score)
    out["interval"] = [
        fmt.BLANK if fmt.missing(lo) else f"[{fmt.score(lo)}, {fmt.score(hi)}]"
        for lo, hi in zip(points["interval_low"], points["interval_high"])
    ]
    for w in WORKLOADS:
        out[f"r_{w}"] = [ratio(r, w) for _, r in points.iterrows()]
    out["mean acceptance length"] = [
        fmt.general(v) if not fmt.missing(v) else f"blank: {fmt.text(why)}"
        for v, why in zip(points["mean_acceptance_length"], points["mean_acceptance_length_reason"])
    ]
    out["acceptance by position"] = [
        ", ".join(f"{a:.2f}" for a in acc) if len(acc) else f"blank: {fmt.text(why)}"
        for acc, why in zip(points["acceptance_by_position"], points["acceptance_reason"])
    ]
    out["peak memory"] = [
        fmt.gib(v) if not fmt.missing(v) else f"blank: {fmt.text(why)}"
        for v, why in zip(points["memory_peak_bytes"], points["memory_peak_reason"])
    ]
    out["status"] = [f"{s}: {fmt.text(w)}" if fmt.text(w) else s for s, w in zip(points["status"], points["why"])]
    out["evaluation"] = points["evaluation_id"].map(fmt.text)
    return out


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
