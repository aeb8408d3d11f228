"""An entry's history on the evaluation page and the references' on the References page:
SpecScore with its interval and the mean acceptance length over time, the regression flag, and
the acceptance spread beside the mean (shown, never scored).

Every number is the board's read model's (`board/history.py`, `board/spread.py`, through the
board's memo, so nothing is scored twice); this module only lays them out and writes each blank
figure with its reason (ADR-0009).
"""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from speculator_arena.board.history import entry_history
from speculator_arena.board.spread import evaluation_spread, with_pass_spread
from speculator_arena.dashboards import cached
from speculator_arena.dashboards import formatting as fmt

FLAG = (
    "Regression: this evaluation's SpecScore lies below the interval's low end of the entry's previous scored "
    "evaluation (the one named). Shown, never scored."
)


@st.cache_data(ttl=cached.TTL, show_spinner="Reading the entry's history…")
def history(
    home: str, task_id: str, split: str, account: str | None, label: str | None, version: int | None
) -> tuple[pd.DataFrame, dict]:
    """The entry's history rows with their spread across passes, and the spread across them."""
    h = entry_history(cached.memo(home), task_id, split, account=account, label=label, protocol_version=version)
    return with_pass_spread(home, h.rows), evaluation_spread(h.rows)


def _spread(r) -> str:
    if fmt.missing(r.acceptance_pass_sd):
        return f"blank: {fmt.text(r.acceptance_pass_reason)}"
    return (
        f"sd {fmt.num(r.acceptance_pass_sd, 3)} · {fmt.num(r.acceptance_pass_min, 2)}–"
        f"{fmt.num(r.acceptance_pass_max, 2)} · n {int(r.acceptance_passes)}"
    )


def table(rows: pd.DataFrame, current: str | None = None) -> pd.DataFrame:
    """The history as the page's table (the evaluation shown marked ◀)."""
    return pd.DataFrame(
        {
            "measured (UTC)": pd.to_datetime(rows["created_at"], unit="s").dt.strftime("%Y-%m-%d %H:%M"),
            "evaluation": [f"{e} ◀" if e == current else e for e in rows["evaluation_id"]],
            "engine": [
                f"{fmt.text(n)} {fmt.text(d)[:12]}".strip() or fmt.BLANK
                for n, d in zip(rows["engine"], rows["engine_digest"])
            ],
            "measured under": rows["run_protocol_version"].map(lambda v: fmt.BLANK if fmt.missing(v) else f"v{int(v)}"),
            "SpecScore": rows["specscore"].map(fmt.score),
            "interval": [
                f"[{fmt.num(lo, 3)}, {fmt.num(hi, 3)}]" for lo, hi in zip(rows["interval_low"], rows["interval_high"])
            ],
            "acceptance length": [
                fmt.num(v, 3) if not fmt.missing(v) else f"blank: {fmt.text(w)}"
                for v, w in zip(rows["mean_acceptance_length"], rows["mean_acceptance_length_reason"])
            ],
            "across passes": [_spread(r) for r in rows.itertuples()],
            "memory peak": [
                fmt.gib(v) if not fmt.missing(v) else f"blank: {fmt.text(w)}"
                for v, w in zip(rows["memory_peak_bytes"], rows["memory_peak_reason"])
            ],
            "regression": [
                f"yes, below {fmt.text(p)}" if bool(f) else "no"
                for f, p in zip(rows["regression"], rows["previous_evaluation_id"])
            ],
        }
    )


def chart(rows: pd.DataFrame, color: str | None = None) -> alt.VConcatChart:
    """SpecScore with its interval (error bars) and mean acceptance length over time."""
    df = rows.assign(
        when=pd.to_datetime(rows["created_at"], unit="s"),
        flagged=rows["regression"].map(lambda f: "regression" if bool(f) else "no"),
    )[
        ["when", "evaluation_id", "specscore", "interval_low", "interval_high", "mean_acceptance_length", "flagged"]
        + ([color] if color else [])
    ]
    x = alt.X("when:T", title="measured (UTC)")
    hue = alt.Color(f"{color}:N") if color else alt.value("#d62728")
    base = alt.Chart(df)
    bars = base.mark_errorbar().encode(
        x=x, y=alt.Y("interval_low:Q", title="SpecScore (95% interval)"), y2="interval_high:Q", color=hue
    )
    marks = base.mark_point(filled=True, size=70).encode(
        x=x,
        y="specscore:Q",
        color=hue,
        shape=alt.Shape("flagged:N", scale=alt.Scale(domain=["no", "regression"], range=["circle", "triangle-down"])),
        tooltip=["evaluation_id", alt.Tooltip("specscore:Q", format=".4f"), "flagged"],
    )
    acc = base.mark_line(point=True).encode(
        x=x, y=alt.Y("mean_acceptance_length:Q", title="mean acceptance length"), color=hue
    )
    return alt.vconcat((bars + marks).properties(height=200, width=520), acc.properties(height=140, width=520))


def _evaluation_spread_line(spread: dict) -> str:
    if spread["sd"] is None:
        return f"Across evaluations: blank ({spread['reason']})."
    return (
        f"Across evaluations: mean acceptance length {fmt.num(spread['mean'], 3)}, sd {fmt.num(spread['sd'], 3)} "
        f"({fmt.num(spread['min'], 2)}–{fmt.num(spread['max'], 2)}, n {spread['n']})."
    )


def history_section(ev: pd.Series, home: str, version: int | None) -> None:
    """The evaluation page's section: the history of the entry this evaluation belongs to."""
    st.subheader("History of this entry")
    ref = bool(ev.get("is_reference"))
    account, label = (None, fmt.text(ev.get("label"))) if ref else (fmt.text(ev.get("account_id")), None)
    if not (account or label):  # e.g. `arena evaluate` or `arena sweep` without --account: no board entry
        st.caption("This evaluation belongs to no account and is no reference, so it is no entry's history.")
        return
    rows, spread = history(
        home, fmt.text(ev.get("task_id")), fmt.text(ev.get("split")), account or None, label or None, version
    )
    who = f"reference {label}" if ref else f"account {account}"
    st.caption(
        f"Every scored {fmt.text(ev.get('split'))} evaluation of {who}, oldest first, scored under protocol "
        f"v{version}. {FLAG} The acceptance spread across passes is each timed pass's 1 + accepted / drafts "
        '(sample sd, min–max, passes); docs/scoring.md "Acceptance spread".'
    )
    if rows.empty:
        st.info("No scored evaluation of this entry yet.")
        return
    st.altair_chart(chart(rows), width="content")
    st.table(table(rows, fmt.text(ev.get("evaluation_id"))), hide_index=True)
    st.caption(_evaluation_spread_line(spread))
    flagged = rows[rows["regression"].astype(bool)]
    for r in flagged.itertuples():
        st.warning(
            f"Regression: {r.evaluation_id} scored {fmt.score(r.specscore)}, below {r.previous_evaluation_id}'s "
            f"interval low end {fmt.num(r.previous_interval_low, 3)}."
        )


def references_history_section(home: str, task_id: str, split: str, labels: list[str], version: int | None) -> None:
    """The References page's section: each reference's history across engine and protocol versions."""
    st.subheader("History across engine and protocol versions")
    st.caption(
        f"Every scored {split} evaluation of each reference, scored under protocol v{version}; `engine` is the "
        f"directory's name and digest, `measured under` the version it ran under. {FLAG}"
    )
    parts = []
    for name in labels:
        rows, _ = history(home, task_id, split, None, name, version)
        parts.append(rows.assign(reference=name))
    rows = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    if rows.empty:
        st.info("No reference has a scored evaluation yet.")
        return
    st.altair_chart(chart(rows, color="reference"), width="content")
    st.table(pd.concat([rows[["reference"]], table(rows)], axis=1), hide_index=True)
