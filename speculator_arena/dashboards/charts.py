"""The evaluation page's plots, built with Altair (bundled with Streamlit)."""

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
