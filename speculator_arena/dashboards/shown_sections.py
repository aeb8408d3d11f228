"""The evaluation page's sections of figures shown, never scored: throughput against
interactivity, acceptance in detail, acceptance as the context grows, goodput, the per-request
export and the speculation profile.

Every number is computed by the board's read model from raw rows (`board/curves.py`,
`board/acceptance.py`, `board/context.py`, `board/goodput.py`, `board/export.py`,
`board/profile.py`); these functions only lay them out, and write each blank figure with its
reason (ADR-0009).
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from speculator_arena.board import acceptance, context, curves, goodput, profile
from speculator_arena.board.export import MEDIA_TYPE, file_name
from speculator_arena.board.shown import ALL, ShownRows
from speculator_arena.dashboards import cached, charts
from speculator_arena.dashboards import formatting as fmt
from speculator_arena.protocol.model import WORKLOADS

REGIMES = (
    "The arena's three regimes are the curve's points: solo (one lane), team and busy (the task's lanes), "
    "each pooling its passes' busy windows. Throughput = output tokens of counted requests inside the busy "
    "window / its seconds; per-user speed = throughput / lanes."
)


def _order(df: pd.DataFrame) -> pd.DataFrame:
    order = {w: i for i, w in enumerate((*WORKLOADS, ALL))}
    return df.assign(_o=df["workload"].map(order)).sort_values(["engine", "_o"], kind="stable").drop(columns="_o")


def interactivity_section(rows: ShownRows) -> None:
    st.subheader("Throughput against interactivity")
    st.caption(REGIMES + " The candidate solid, the stock engine dashed. Shown, never scored.")
    points = curves.interactivity_points(rows)
    if points["throughput"].notna().any():
        st.altair_chart(charts.interactivity(points.assign(dash=points["engine"])), width="content")
    st.table(
        pd.DataFrame(
            {
                "engine": points["engine"],
                "workload": points["workload"],
                "lanes": points["lanes"].map(lambda x: fmt.BLANK if fmt.missing(x) else str(int(x))),
                "throughput (tok/s)": points["throughput"].map(lambda x: fmt.num(x, 2)),
                "per-user (tok/s per lane)": points["per_user"].map(lambda x: fmt.num(x, 2)),
                "why blank": points["reason"].map(fmt.text),
            }
        ),
        hide_index=True,
    )


def _positions_table(pos: pd.DataFrame) -> pd.DataFrame:
    shown = pos[pos["engine"] == "candidate"]
    return pd.DataFrame(
        {
            "workload": shown["workload"],
            "position": shown["position"].map(lambda x: fmt.BLANK if fmt.missing(x) else str(int(x))),
            "accepted": shown["accepted"].map(lambda x: fmt.num(x, 0)),
            "drafts": shown["drafts"].map(lambda x: fmt.num(x, 0)),
            "accepted / drafts": shown["rate"].map(fmt.ratio),
            "conditional AR": shown["conditional"].map(fmt.ratio),
            "why blank": shown["reason"].map(fmt.text),
        }
    )


def _family_table(fam: pd.DataFrame) -> pd.DataFrame:
    """One row per family and app (each family's total as app 'all'), one column per workload:
    the candidate's and the stock engine's tokens per chunk."""
    fam = fam.dropna(subset=["family"])
    cell = {(r.family, r.app, r.workload, r.engine): r.tokens_per_chunk for r in fam.itertuples()}
    keys = sorted({(f, a) for f, a, _, _ in cell}, key=lambda k: (k[0], k[1] == ALL, k[1]))
    return pd.DataFrame(
        [
            {"family": f, "app": a}
            | {
                w: " / ".join(fmt.ratio(cell.get((f, a, w, engine))) for engine in ("candidate", "stock"))
                for w in (*WORKLOADS, ALL)
            }
            for f, a in keys
        ],
        columns=["family", "app", *WORKLOADS, ALL],
    )


def acceptance_section(ev: pd.Series, rows: ShownRows) -> None:
    st.subheader("Acceptance in detail")
    st.caption(
        "From the engine's counters (vllm:spec_decode_*, read before and after every pass and differenced): "
        "the share of drafts whose token at each position was accepted, and SPEED-Bench's conditional "
        "acceptance rate AR = accepted at p / accepted at p − 1. These are the engine's own claims; shown, "
        "never scored."
    )
    pos = _order(acceptance.by_position(rows))
    st.markdown("**Acceptance by draft position** (candidate)")
    if pos.loc[pos["engine"] == "candidate", "rate"].notna().any():
        st.altair_chart(charts.acceptance_by_position(pos[pos["engine"] == "candidate"]), width="content")
    st.table(_positions_table(pos), hide_index=True)

    hist = acceptance.step_histogram(rows)
    st.markdown("**Histogram per verification step, else per chunk**")
    st.caption(
        "Where the engine reports per-position counters: verification steps that accepted exactly k draft "
        "tokens (accepted at k − 1 minus accepted at k). Elsewhere: tokens per streamed chunk, the arena's own "
        "count, which is one step only for an engine that streams every step."
    )
    for engine in ("candidate", "stock"):
        h = hist[(hist["engine"] == engine) & (hist["workload"] != ALL)]
        sources = sorted(set(h["source"]))
        for source in sources:
            part = h[h["source"] == source]
            st.markdown(f"{engine}: {source}")
            if part["share"].notna().any():
                title = "accepted draft tokens per step" if source == acceptance.STEPS else "tokens per chunk"
                st.altair_chart(charts.histogram(part, title), width="content")
            notes = sorted({f"{r.workload}: {fmt.text(r.reason)}" for r in part.itertuples() if fmt.text(r.reason)})
            notes += sorted({f"counters not used: {fmt.text(n)}" for n in part["note"] if fmt.text(n)})
            for note in notes:
                st.caption(note)

    st.markdown("**By session family and app** (tokens per chunk, the arena's count: candidate / stock)")
    fam = acceptance.by_family(rows)
    st.table(_family_table(fam), hide_index=True)
    for why in sorted({f"{r.engine}, {r.workload}: {r.reason}" for r in fam.itertuples() if fmt.text(r.reason)}):
        st.caption(f"Blank: {why}")

    st.markdown("**SPEED-Bench's speedup proxy beside the measured ratio**")
    st.caption(
        "S = t_ar · AL / t_sd (SPEED-Bench, Appendix H): AL is the candidate's mean acceptance length from its "
        "counters, 1 + accepted / drafts; t_ar and t_sd are the stock engine's and the candidate's time per "
        "decoding step as the stream shows it, Σ (last chunk − first chunk) / Σ (chunks − 1) over counted "
        "requests of two chunks or more. The measured ratio is r_w, the median of the workload's pass ratios. "
        "Steps on which the drafter proposes nothing are not in AL, so the proxy overstates such an engine."
    )
    proxy = acceptance.speedup_proxy(rows)
    st.table(
        pd.DataFrame(
            {
                "workload": proxy["workload"],
                "t_ar (ms/step)": proxy["t_ar"].map(fmt.ms),
                "t_sd (ms/step)": proxy["t_sd"].map(fmt.ms),
                "AL": proxy["acceptance_length"].map(fmt.ratio),
                "proxy S": proxy["proxy"].map(fmt.ratio),
                "measured r_w": [fmt.ratio(ev.get(f"r_{w}")) for w in proxy["workload"]],
                "why blank": proxy["reason"].map(fmt.text),
            }
        ),
        hide_index=True,
    )


def context_section(ev: pd.Series, rows: ShownRows) -> None:
    st.subheader("Acceptance as the context grows")
    if fmt.text(ev.get("split")) != "dev":
        st.caption(
            "Not shown for test evaluations: requests binned by prompt length and turn describe the hidden pool "
            "(as their per-request rows and speculation profile are withheld). The board shows their mean "
            "acceptance length and draft acceptance rate."
        )
        return
    st.caption(
        f"Acceptance length against the prompt's length (the arena's count, in bins [2^k, 2^(k+1))) and against "
        f"the turn within the session, agent and chat sessions apart, over all three workloads. Source: "
        f"{context.SOURCE}; {context.WHY_NOT_COUNTERS}. Per chunk: Σ tokens / Σ chunks over the bin's requests; "
        "per request: the mean of each request's tokens per chunk. Candidate solid, stock dashed. Shown, never "
        "scored."
    )
    c = context.by_context(rows)
    pooled = c[c["workload"] == ALL]
    for axis, title in (("prompt_tokens", "prompt tokens (bin's low end)"), ("turn", "turn within the session")):
        if pooled.loc[pooled["axis"] == axis, "acceptance_length"].notna().any():
            st.altair_chart(charts.acceptance_by_context(pooled, axis, title), width="content")
    shown = pooled.dropna(subset=["axis"])
    st.table(
        pd.DataFrame(
            {
                "engine": shown["engine"],
                "family": shown["family"],
                "axis": shown["axis"],
                "bin": [
                    f"{int(lo)}–{int(hi) - 1}" if a == "prompt_tokens" else str(int(lo))
                    for a, lo, hi in zip(shown["axis"], shown["bin_low"], shown["bin_high"])
                ],
                "requests": shown["requests"].map(lambda x: fmt.num(x, 0)),
                "tokens per chunk": shown["acceptance_length"].map(fmt.ratio),
                "per request": shown["acceptance_length_per_request"].map(fmt.ratio),
            }
        ),
        hide_index=True,
    )
    for why in sorted({f"{r.engine}, {r.workload}: {r.reason}" for r in c.itertuples() if fmt.text(r.reason)}):
        st.caption(f"Blank: {why}")


def goodput_section(rows: ShownRows) -> None:
    st.subheader("Goodput")
    sources = sorted(set(rows.objectives["source"]))
    obj = rows.objectives.drop_duplicates("workload").set_index("workload")
    st.caption(
        "The share of each engine's timed requests (counted or not) that counted with TTFT and TPOT within the "
        "workload's objectives: "
        + "; ".join(
            f"{w} TTFT ≤ {fmt.num(obj.at[w, 'ttft_seconds'], 2)} s, TPOT ≤ {fmt.ms(obj.at[w, 'tpot_seconds'])} ms"
            for w in WORKLOADS
            if w in obj.index
        )
        + f" ({'; '.join(sources)}). Shown, never scored."
    )
    g = _order(goodput.goodput(rows))
    st.table(
        pd.DataFrame(
            {
                "engine": g["engine"],
                "workload": g["workload"],
                "good / requests": [
                    fmt.BLANK if fmt.missing(n) else f"{int(k)} / {int(n)}" for k, n in zip(g["good"], g["requests"])
                ],
                "goodput": g["share"].map(fmt.pct),
                "why blank": g["reason"].map(fmt.text),
            }
        ),
        hide_index=True,
    )


def export_section(ev: pd.Series, home: str, version: int) -> None:
    st.subheader("Per-request rows")
    eid = str(ev["evaluation_id"])
    if fmt.text(ev.get("split")) != "dev":
        st.caption(
            "Not exported for test evaluations: their requests come from the hidden pool "
            f"(GET /api/evaluations/{eid}/requests.parquet answers 403)."
        )
        return
    st.download_button(
        "Download the per-request rows (Parquet)",
        data=lambda: cached.requests_parquet(home, eid, version),  # made when the viewer clicks
        file_name=file_name(eid),
        mime=MEDIA_TYPE,
        on_click="ignore",
        help="Times, tokens, cache hits and chunk times of every timed request, whether it counted under "
        f"protocol v{version}, and its session's family and app; no reply text.",
    )
    st.caption(
        f"Also from the API: `GET /api/evaluations/{eid}/requests.parquet`. The columns are documented in "
        "docs/warehouse.md (table requests, plus counted, family and app)."
    )


def profile_section(ev: pd.Series, home: str, version: int) -> None:
    st.subheader("Speculation profile")
    eid = str(ev["evaluation_id"])
    if fmt.text(ev.get("split")) != "dev":
        st.caption(
            "Not published for test evaluations: the acceptance of their traffic by position, workload, prompt "
            f"length and turn describes the hidden pool (GET /api/evaluations/{eid}/speculation_profile.json "
            "answers 403). The board shows their mean acceptance length and draft acceptance rate."
        )
        return
    st.download_button(
        "Download speculation_profile.json",
        data=lambda: cached.speculation_profile(home, eid, version),  # made when the viewer clicks
        file_name=file_name(eid, profile.FILE_SUFFIX),
        mime=profile.MEDIA_TYPE,
        on_click="ignore",
        help="NVIDIA Model-Optimizer's speculation profile (schema 1.0) of the candidate, measured on the arena's "
        "traffic: conditional and marginal acceptance per draft position, the acceptance-length histogram and "
        "the mean per step, per workload and over all three, with its consistency checks.",
    )
    st.caption(
        f"Also from the API: `GET /api/evaluations/{eid}/speculation_profile.json`. Its numbers are the counters "
        "above (acceptance by draft position, the histogram per verification step, the mean acceptance length); "
        "docs/participants/speculation-profile.md says which field comes from what."
    )
