"""A sweep's charts and table (`arena sweep`, board/sweep.py): drawn on the Sweep page and, for an
evaluation that is one of a sweep's points, on that evaluation's page (`sweep_section`)."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from speculator_arena.board.export import ExportRefused
from speculator_arena.dashboards import cached
from speculator_arena.dashboards import formatting as fmt
from speculator_arena.protocol.model import WORKLOADS


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


def sweep_of(home: str, evaluation_id: str) -> tuple[dict, str] | None:
    """The sweep (its manifest) that `evaluation_id` is a point of, and the point's value; None
    when it is none's."""
    for manifest in cached.sweeps(home):
        for p in manifest.get("points", []):
            if evaluation_id in (p.get("evaluation_ids") or []):
                return manifest, str(p["value"])
    return None


def sweep_section(home: str, evaluation_id: str, protocol_version: int | None) -> None:
    """On a sweep point's evaluation page: the sweep's curve, this point named, a link to the sweep."""
    found = sweep_of(home, evaluation_id)
    if found is None:
        return
    manifest, value = found
    sid, setting = manifest["sweep_id"], manifest["setting"]
    st.subheader(f"Sweep {sid}: {setting}")
    try:
        doc = cached.sweep_document(home, sid, protocol_version)
    except ExportRefused as exc:
        st.error(exc.reason)
        return
    st.caption(
        f"This evaluation is the point `{setting}` = {fmt.md_escape(value)} of a sweep of `{doc['engine']}`; "
        f"every point is an evaluation against the stock engine ([the sweep's page](./sweep?sweep={sid}))."
    )
    st.altair_chart(curve(pd.DataFrame(doc["points"]), setting), width="content")
