"""The board's plots (the evaluation page's and the task page's), built with Altair (bundled with Streamlit)."""

from __future__ import annotations

import altair as alt
import pandas as pd

from speculator_arena.board.data import GIB

ENGINE_COLORS = alt.Scale(domain=["candidate", "stock"], range=["#d62728", "#1f77b4"])


def throughput(bins: pd.DataFrame, workload: str) -> alt.Chart:
    """Output tokens per second over each pass of one workload, candidate against stock."""
    df = bins[bins["workload"] == workload].copy()
    df["pass"] = "pass " + df["pass_index"].astype(int).astype(str)
    return (
        alt.Chart(df)
        .mark_line(interpolate="step-after")
        .encode(
            x=alt.X("second:Q", title="seconds from the pass's start"),
            y=alt.Y("tokens_per_second:Q", title="output tokens / s"),
            color=alt.Color("engine:N", scale=ENGINE_COLORS),
            tooltip=["engine", "pass", "second", alt.Tooltip("tokens_per_second:Q", format=".1f")],
        )
        .properties(height=180, width=260)
        .facet(column=alt.Column("pass:N", title=None))
    )


def memory(samples: pd.DataFrame, budgets: pd.DataFrame, workload: str) -> alt.LayerChart | alt.FacetChart:
    """Device memory in use over each pass of one workload, with the memory gate's bound."""
    df = samples[samples["workload"] == workload].copy()
    df["pass"] = "pass " + df["pass_index"].astype(int).astype(str)
    df["used_gib"] = df["used_bytes"] / GIB
    b = budgets[budgets["workload"] == workload].copy()
    b["pass"] = "pass " + b["pass_index"].astype(int).astype(str)
    b["budget_gib"] = b["budget_bytes"] / GIB
    lines = (
        alt.Chart()
        .mark_line()
        .encode(
            x=alt.X("second:Q", title="seconds from the pass's start"),
            y=alt.Y("used_gib:Q", title="device memory used (GiB)"),
            color=alt.Color("engine:N", scale=ENGINE_COLORS),
            tooltip=["engine", "pass", "second", alt.Tooltip("used_gib:Q", format=".2f")],
        )
    )
    rule = (
        alt.Chart()
        .mark_rule(strokeDash=[6, 3], color="black")
        .encode(y="budget_gib:Q", tooltip=[alt.Tooltip("budget_gib:Q", title="budget (GiB)", format=".2f")])
    )
    data = pd.concat([df, b[["pass", "budget_gib"]]], ignore_index=True)
    return (
        alt.layer(lines, rule, data=data)
        .properties(height=180, width=260)
        .facet(column=alt.Column("pass:N", title=None))
    )


def contention(intervals: pd.DataFrame, workload: str, limit: float | None) -> alt.LayerChart | alt.FacetChart:
    """Foreign CPU (cores held by processes outside the engine's and the runner's trees) over each
    pass of one workload, with the protocol's limit on its pass average."""
    df = intervals[(intervals["workload"] == workload) & intervals["error"].isna()].copy()
    df["pass"] = "pass " + df["pass_index"].astype(int).astype(str)
    lines = (
        alt.Chart()
        .mark_line(interpolate="step-before")
        .encode(
            x=alt.X("second:Q", title="seconds from the pass's start"),
            y=alt.Y("foreign_cores:Q", title="foreign CPU (cores)"),
            color=alt.Color("engine:N", scale=ENGINE_COLORS),
            tooltip=[
                "engine",
                "pass",
                "second",
                alt.Tooltip("foreign_cores:Q", format=".2f"),
                alt.Tooltip("steal_share:Q", format=".1%"),
                "foreign_gpu_processes",
            ],
        )
    )
    layers = [lines]
    if limit is not None:
        df["limit"] = limit
        layers.append(
            alt.Chart()
            .mark_rule(strokeDash=[6, 3], color="black")
            .encode(y="limit:Q", tooltip=[alt.Tooltip("limit:Q", title="limit on the pass average (cores)")])
        )
    return alt.layer(*layers, data=df).properties(height=160, width=260).facet(column=alt.Column("pass:N", title=None))


WORKLOAD_ORDER = ["solo", "team", "busy", "all"]


def interactivity(points: pd.DataFrame, series: str = "engine") -> alt.LayerChart:
    """Throughput against per-user speed (SPEED-Bench's and InferenceX's curves): one line per
    `series` through its workloads' points, in the order of their lanes; `points` has the columns
    of board/curves.py (blank points left out) plus `series` and `dash` (candidate or stock)."""
    df = points.dropna(subset=["throughput", "per_user"]).copy()
    df["order"] = df["workload"].map({w: i for i, w in enumerate(WORKLOAD_ORDER)})
    color = alt.Color(
        f"{series}:N", scale=ENGINE_COLORS if series == "engine" else alt.Scale(scheme="tableau10"), title=None
    )
    base = alt.Chart(df).encode(
        x=alt.X("per_user:Q", title="per-user speed (output tokens/s per lane)", scale=alt.Scale(zero=False)),
        y=alt.Y("throughput:Q", title="throughput (output tokens/s, busy window)", scale=alt.Scale(zero=False)),
        color=color,
        tooltip=[
            series,
            "engine",
            "workload",
            "lanes",
            alt.Tooltip("per_user:Q", format=".2f"),
            alt.Tooltip("throughput:Q", format=".2f"),
        ],
    )
    lines = base.mark_line(point=True).encode(
        order="order:Q",
        strokeDash=alt.StrokeDash(
            "dash:N",
            title=None,
            scale=alt.Scale(domain=["candidate", "stock"], range=[[1, 0], [5, 3]]),
            legend=None,  # the caption says it: candidates solid, stock dashed
        ),
        detail=["engine", series],
    )
    labels = base.mark_text(align="left", dx=6, dy=-6, fontSize=11).encode(text="workload:N")
    return alt.layer(lines, labels).properties(height=360, width=600)


def acceptance_by_position(positions: pd.DataFrame) -> alt.Chart:
    """The share of drafts whose token at each position was accepted, one line per workload."""
    df = positions.dropna(subset=["rate"]).copy()
    return (
        alt.Chart(df)
        .mark_line(point=True)
        .encode(
            x=alt.X("position:O", title="draft position"),
            y=alt.Y("rate:Q", title="accepted / drafts", scale=alt.Scale(domain=[0, 1])),
            color=alt.Color("workload:N", sort=WORKLOAD_ORDER),
            tooltip=["workload", "position", "accepted", "drafts", alt.Tooltip("rate:Q", format=".3f")],
        )
        .properties(height=220, width=360)
    )


def histogram(bins: pd.DataFrame, x_title: str) -> alt.Chart:
    """One engine's histogram (a share per value), the workloads side by side."""
    df = bins.dropna(subset=["share"]).copy()
    df["value"] = df["value"].astype(int)
    return (
        alt.Chart(df)
        .mark_bar()
        .encode(
            x=alt.X("value:O", title=x_title),
            xOffset=alt.XOffset("workload:N", sort=WORKLOAD_ORDER),
            y=alt.Y("share:Q", title="share", axis=alt.Axis(format="%")),
            color=alt.Color("workload:N", sort=WORKLOAD_ORDER),
            tooltip=["workload", "value", "count", alt.Tooltip("share:Q", format=".1%")],
        )
        .properties(height=200, width=360)
    )


def acceptance_by_context(bins: pd.DataFrame, axis: str, x_title: str) -> alt.Chart:
    """Acceptance length (tokens per chunk) against one axis of the context, candidate solid and
    stock dashed, one colour per session family (board/context.py)."""
    df = bins[(bins["axis"] == axis)].dropna(subset=["acceptance_length"]).copy()
    return (
        alt.Chart(df)
        .mark_line(point=True)
        .encode(
            x=alt.X("bin_low:Q", title=x_title, scale=alt.Scale(type="log" if axis == "prompt_tokens" else "linear")),
            y=alt.Y("acceptance_length:Q", title="tokens per chunk"),
            color=alt.Color("family:N"),
            strokeDash=alt.StrokeDash("engine:N", sort=["candidate", "stock"]),
            tooltip=[
                "engine",
                "family",
                "bin_low",
                "bin_high",
                "requests",
                alt.Tooltip("acceptance_length:Q", format=".3f"),
                alt.Tooltip("acceptance_length_per_request:Q", format=".3f"),
            ],
        )
        .properties(height=220, width=420)
    )


SECTION_COLORS = {"participants": "#1f77b4", "references": "#7f7f7f"}
ROW_STEP = 26  # pixels per entry of the board's picture
LABEL_WIDTH = 180  # pixels of the rank and label on its left


def board_domain(*frames: pd.DataFrame) -> list[float]:
    """One x domain for the board's pictures (participants and references on the same scale),
    always holding 1.0 (the stock engine), with room on the right for the score's label."""
    lows = [1.0] + [float(v) for f in frames if f is not None for v in f["interval_low"].dropna()]
    highs = [1.0] + [float(v) for f in frames if f is not None for v in f["interval_high"].dropna()]
    low, high = min(lows), max(highs)
    span = max(high - low, 0.05)
    return [max(0.0, low - 0.05 * span), high + 0.3 * span]


def board_intervals(rows: pd.DataFrame, domain: list[float]) -> alt.LayerChart:
    """One section of the board as a horizontal interval plot: a row per entry (its rank and
    label on the axis, in the board's order), a dot at its SpecScore, a bar over its 95%
    interval, the score and interval written beside it, and a dashed line at 1.0, the stock
    engine. `rows`: dashboards/board_table.py `interval_rows`, the table's own rows."""
    color = SECTION_COLORS.get(str(rows["section"].iloc[0]), "#1f77b4") if not rows.empty else "#1f77b4"
    x_scale = alt.Scale(domain=domain, zero=False, nice=False)
    y = alt.Y(
        "entry:N",
        sort=alt.EncodingSortField("order", order="ascending"),
        title=None,
        # one label width for both sections, so that their plots line up on the shared scale
        axis=alt.Axis(
            labelLimit=LABEL_WIDTH,
            minExtent=LABEL_WIDTH,
            maxExtent=LABEL_WIDTH,
            labelFontSize=13,
            labelPadding=8,
            ticks=False,
            domain=False,
        ),
    )
    tooltip = [
        alt.Tooltip("rank:N", title="rank"),
        alt.Tooltip("label:N", title="entry"),
        alt.Tooltip("account_id:N", title="account"),
        alt.Tooltip("specscore:Q", title="SpecScore", format=".4f"),
        alt.Tooltip("interval_low:Q", title="interval low", format=".3f"),
        alt.Tooltip("interval_high:Q", title="interval high", format=".3f"),
    ]
    base = alt.Chart(rows).encode(y=y, tooltip=tooltip)
    bars = base.mark_rule(strokeWidth=5, opacity=0.45, color=color).encode(
        x=alt.X(
            "interval_low:Q",
            scale=x_scale,
            axis=alt.Axis(tickCount=10),
            title="SpecScore (dot) and its 95% interval (bar); 1.0 = the stock engine",
        ),
        x2="interval_high:Q",
    )
    dots = base.mark_circle(size=90, opacity=1, color=color).encode(x=alt.X("specscore:Q", scale=x_scale))
    labels = base.mark_text(align="left", dx=8, fontSize=12, color="#31333f").encode(
        x=alt.X("interval_high:Q", scale=x_scale), text="score_text:N"
    )
    stock = (
        alt.Chart(pd.DataFrame({"x": [1.0], "what": ["stock engine"]}))
        .mark_rule(strokeDash=[5, 4], color="#555555")
        .encode(x=alt.X("x:Q", scale=x_scale), tooltip=[alt.Tooltip("what:N", title="1.0")])
    )
    return alt.layer(stock, bars, dots, labels).properties(height=alt.Step(ROW_STEP))
