"""One evaluation: how its SpecScore was computed from its own numbers, its plots, the figures
shown beside it (throughput against interactivity, acceptance in detail and as the context grows,
goodput: sections of dashboards/shown_sections.py), the entry's history with its regression flag
and acceptance spread (dashboards/history_section.py), its per-request export, its speculation
profile and provenance.

Chosen by `?evaluation=<id>` or the select box. A queued, running, void or failed evaluation is
explained with what it holds so far; a test evaluation's engine logs and error texts are not
shown (they could repeat hidden prompts).
"""

import pandas as pd
import streamlit as st

from speculator_arena.board.data import (
    BoardDataError,
    memory_budget_bytes,
    provenance,
)
from speculator_arena.dashboards import cached, charts, history_section, sweep_charts
from speculator_arena.dashboards import formatting as fmt
from speculator_arena.dashboards import shown_sections as shown
from speculator_arena.protocol import load_protocol
from speculator_arena.protocol.model import WORKLOADS
from speculator_arena.rules.status import FAILED, RANKED, UNFINISHED, VOID

MAX_OPTIONS = 1000
FIGURE_NAMES = {
    "wall_seconds": "wall time of the timed passes (s)",
    "output_tokens_per_second": "output tokens per second (generated / wall)",
    "generated_tokens": "generated tokens",
    "latency_mean": "latency mean (s)",
    "latency_p50": "latency p50 (s)",
    "latency_p95": "latency p95 (s)",
    "ttft_p50": "TTFT p50 (s)",
    "ttft_p90": "TTFT p90 (s)",
    "ttft_p99": "TTFT p99 (s)",
    "tpot_p50": "TPOT p50 (s)",
    "tpot_p90": "TPOT p90 (s)",
    "tpot_p99": "TPOT p99 (s)",
    "cache_hit_tokens": "cache hit, token-weighted",
    "cache_hit_mean": "cache hit, mean per request",
    "tokens_per_chunk": "tokens per chunk",
    "mean_acceptance_length": "mean acceptance length (engine's counters)",
    "draft_acceptance_rate": "draft acceptance rate (engine's counters)",
    "memory_peak_bytes": "device memory peak (bytes)",
}


def pick_evaluation(sel) -> str | None:
    idx = cached.index(sel.home)
    wanted = st.query_params.get("evaluation")
    if wanted is not None and wanted not in set(idx["evaluation_id"]):
        st.error(f"No evaluation {wanted!r} in the warehouse at {sel.home}.")
        wanted = None
    pool = idx[idx["task_id"] == sel.task_id] if sel.task_id else idx
    options = pool["evaluation_id"].head(MAX_OPTIONS).tolist()
    if wanted is not None and wanted not in options:
        options = [wanted] + options
    if not options:
        st.info(f"No evaluation of {sel.task_id} yet.")
        return None
    labels = idx.set_index("evaluation_id")
    current = wanted or options[0]

    def show(eid: str) -> str:
        r = labels.loc[eid]
        return f"{r['label']} · {r['split']} · {r['status']} · {eid}"

    choice = st.selectbox(
        "Evaluation",
        options,
        index=options.index(current),
        format_func=show,
        help=f"The newest {MAX_OPTIONS} evaluations of the task; link one with ?evaluation=<id>.",
    )
    if choice != wanted:
        st.query_params["evaluation"] = choice
    return choice


def status_notice(ev: pd.Series, raw) -> None:
    status = ev["status"]
    if status in UNFINISHED:
        st.warning(
            f"This evaluation is {status}: its score appears once every pass and probe is stored. "
            "What it holds so far is below; figures that need missing rows are blank with the reason."
        )
    elif status == VOID:
        st.warning(f"Void (refunded, never ranked): {fmt.text(ev.get('void_reason')) or 'no reason recorded'}.")
    elif status == FAILED:
        st.error(
            f"Failed: {fmt.text(ev.get('failure_reason')) or 'no reason recorded'}. A candidate engine that "
            "does not start or dies scores 0 (protocol section 7)."
        )
    if status not in RANKED:
        st.table(raw.row_counts.rename(columns={"table": "raw table", "rows": "rows stored"}), hide_index=True)
    starts = raw.engine_starts
    if not starts.empty and (starts["unprivileged"] == False).any():
        users = ", ".join(sorted({fmt.text(u) for u in starts.loc[starts["unprivileged"] == False, "run_as_user"]}))
        st.warning(
            f"Not isolated: engines of this evaluation ran as the runner's own user ({users}), not as an "
            "unprivileged user of their own (a runner that could not drop privileges; for a participant's "
            "submission, only where the operator allowed it). See the engine starts under Provenance."
        )


def score_section(ev: pd.Series, passes: pd.DataFrame, version: int) -> None:
    st.subheader("SpecScore")
    cols = st.columns(4)
    cols[0].metric("SpecScore", fmt.score(ev.get("specscore")))
    for col, w in zip(cols[1:], WORKLOADS):
        col.metric(f"r_{w}", fmt.ratio(ev.get(f"r_{w}")))
    reason = fmt.text(ev.get("specscore_reason"))
    rs = [ev.get(f"r_{w}") for w in WORKLOADS]
    if not reason and all(fmt.finite(r) for r in rs):
        st.markdown(
            f"SpecScore = (r_solo · r_team · r_busy)^(1/3) = ({' · '.join(fmt.ratio(r) for r in rs)})^(1/3) "
            f"= **{fmt.score(ev.get('specscore'))}**, every gate passing (protocol v{version}, section 5)."
        )
    else:
        st.markdown(f"SpecScore {fmt.score(ev.get('specscore'))}: {fmt.md_escape(reason) or 'no reason given'}.")
    for w in WORKLOADS:
        why = fmt.text(ev.get(f"r_{w}_reason"))
        if why:
            st.caption(f"r_{w} blank: {why}")

    st.markdown(
        "**Per pass.** A pass's ratio is the candidate's speed over the stock engine's on the same "
        "sessions; r_w is the median over its passes. A pass where the candidate failed more requests "
        "than the stock engine by more than the failure rule allows counts 0."
    )
    if passes.empty:
        st.info("No pass rows stored yet.")
        return
    order = {w: i for i, w in enumerate(WORKLOADS)}
    passes = passes.assign(_o=passes["workload"].map(order)).sort_values(["_o", "pass_index"]).drop(columns="_o")
    shown = pd.DataFrame(
        {
            "workload": passes["workload"],
            "pass": passes["pass_index"].astype("Int64").astype(str),
            "candidate tok/s": passes["candidate_speed"].map(lambda x: fmt.num(x, 2)),
            "stock tok/s": passes["stock_speed"].map(lambda x: fmt.num(x, 2)),
            "ratio": passes["ratio"].map(fmt.ratio),
            "failures (candidate / stock)": [
                f"{fmt.text(c) or 0} / {fmt.text(s) or 0}"
                for c, s in zip(passes["candidate_failures"], passes["stock_failures"])
            ],
            "requests": passes["requests"].map(lambda x: fmt.BLANK if fmt.missing(x) else str(int(x))),
            "zeroed by failure rule": passes["zeroed_by_failure_rule"].map(
                lambda x: "yes" if x is True or x == 1 else ""
            ),
            "why blank": passes.get("ratio_reason", pd.Series([None] * len(passes))).map(fmt.text),
        }
    )
    steal = [
        passes.get(f"{e}_steal_fraction", pd.Series(0.0, index=passes.index)).fillna(0.0)
        for e in ("candidate", "stock")
    ]
    if any((s > 0).any() for s in steal):
        # the version corrects the speeds for the hypervisor's steal (docs/scoring.md "Steal correction")
        shown.insert(4, "steal taken off (candidate / stock)", [f"{c:.1%} / {s:.1%}" for c, s in zip(*steal)])
    st.table(shown, hide_index=True)


def gates_section(gates: pd.DataFrame) -> None:
    st.subheader("Gates")
    if gates.empty:
        st.info("No gate rows.")
        return
    shown = pd.DataFrame(
        {
            "gate": gates["gate"],
            "statistic": gates["statistic"].map(fmt.general),
            "SE": gates["se"].map(fmt.general),
            "95% CI": [
                fmt.BLANK if fmt.missing(lo) else f"[{fmt.general(lo)}, {fmt.general(hi)}]"
                for lo, hi in zip(gates["ci_low"], gates["ci_high"])
            ],
            "bound": gates["limit"].map(fmt.general),
            "verdict": gates["verdict"].map(fmt.text),
            "detail": gates["detail"].map(fmt.text),
        }
    )
    st.table(shown, hide_index=True)


def failures_section(ev: pd.Series, raw, split: str) -> None:
    st.subheader("Failures")
    any_shown = False
    for col, what in (("failure_reason", "Candidate failure"), ("void_reason", "Void")):
        if fmt.text(ev.get(col)):
            st.markdown(f"**{what}:** {fmt.md_escape(ev.get(col))}")
            any_shown = True
    if not raw.failures.empty:
        f = raw.failures.copy()
        if split != "dev":
            st.caption("Error texts of test evaluations are not shown: an engine's error can repeat a hidden prompt.")
        f["error"] = f["error"].map(fmt.text)
        st.table(f, hide_index=True)
        any_shown = True
    starts = raw.engine_starts
    bad = (
        starts[(starts["died"] == True) | (starts["offload_detected"] == True) | (starts["device_idle_ok"] == False)]
        if not starts.empty
        else starts
    )
    if not bad.empty:
        st.table(
            bad[
                [
                    "engine",
                    "purpose",
                    "start_index",
                    "exit_code",
                    "stop_signal",
                    "died",
                    "offload_detected",
                    "offload_evidence",
                    "device_idle_ok",
                ]
            ],
            hide_index=True,
        )
        any_shown = True
    if not any_shown:
        st.markdown("No failed timed request, engine death, offload or busy device recorded.")


def plots_section(ev: pd.Series, raw, version: int) -> None:
    st.subheader("Throughput over time")
    if raw.throughput.empty:
        st.info("No streamed chunks stored yet.")
    else:
        for w in WORKLOADS:
            if (raw.throughput["workload"] == w).any():
                st.markdown(f"**{w}**")
                st.altair_chart(charts.throughput(raw.throughput, w), width="content")

    st.subheader("Device memory against the budget")
    try:
        slack = load_protocol(version).task(ev["task_id"]).gates.memory.slack_gib
    except KeyError:
        slack = None
    if raw.memory.empty:
        notes = sorted({fmt.text(n) for n in raw.passes.get("memory_note", pd.Series(dtype=object)) if fmt.text(n)})
        st.info("Not measured: " + ("; ".join(notes) if notes else "no memory samples stored for this evaluation."))
        return
    budgets = raw.passes[["workload", "pass_index", "engine", "device_total_bytes", "gpu_memory_utilization"]].copy()
    budgets["budget_bytes"] = [
        memory_budget_bytes(t, u, slack) if slack is not None else None
        for t, u in zip(budgets["device_total_bytes"], budgets["gpu_memory_utilization"])
    ]
    budgets = budgets.dropna(subset=["budget_bytes"]).drop_duplicates(["workload", "pass_index"])
    if not budgets.empty:
        b = budgets.iloc[0]
        st.caption(
            f"Budget = GPU_MEMORY_UTILIZATION × device total + slack = {b['gpu_memory_utilization']} × "
            f"{fmt.gib(b['device_total_bytes'])} + {slack} GiB = {fmt.gib(b['budget_bytes'])} (protocol section 7)."
        )
    for w in WORKLOADS:
        if (raw.memory["workload"] == w).any():
            st.markdown(f"**{w}**")
            st.altair_chart(charts.memory(raw.memory, budgets, w), width="content")


def contention_section(raw, version: int) -> None:
    st.subheader("Host contention")
    rule = load_protocol(version).contention
    st.caption(
        "What else used the machine during the timed passes, read from outside the engine: a pass whose "
        "foreign CPU averages over "
        + (
            f"{rule.max_foreign_cpu_share} of a core, whose steal exceeds {rule.max_steal_share:.0%}, or "
            if rule
            else "the limit, "
        )
        + "during which another process held the device is contended, and the evaluation is void "
        "(SCORING.md, host contention)." + ("" if rule else f" Protocol v{version} does not judge contention.")
    )
    if raw.contention.empty:
        st.info("No contention rows stored: the evaluation ran under a protocol version that did not record them.")
        return
    for w in WORKLOADS:
        if (raw.contention["workload"] == w).any():
            st.markdown(f"**{w}**")
            st.altair_chart(
                charts.contention(raw.contention, w, rule.max_foreign_cpu_share if rule else None), width="content"
            )


def figures_section(figures: pd.DataFrame) -> None:
    st.subheader("Figures (ADR-0009)")
    st.caption(
        "Derived from the stored rows only; a figure is blank, with the reason, when any row it needs is missing."
    )
    if figures.empty:
        st.info("No figures.")
        return
    f = figures[figures["workload"] == "all"]
    wide = []
    for name, grp in f.groupby("figure", sort=False):
        row = {"figure": FIGURE_NAMES.get(name, name)}
        reasons = []
        for engine in ("candidate", "stock"):
            g = grp[grp["engine"] == engine]
            v = g["value"].iloc[0] if len(g) else None
            row[engine] = fmt.general(v)
            if len(g) and fmt.text(g["reason"].iloc[0]):
                reasons.append(f"{engine}: {g['reason'].iloc[0]}")
        row["why blank"] = "; ".join(reasons)
        wide.append(row)
    st.table(pd.DataFrame(wide), hide_index=True)
    per_w = figures[figures["workload"] != "all"]
    if not per_w.empty:
        with st.expander("Per workload"):
            t = per_w.assign(value=per_w["value"].map(fmt.general), reason=per_w["reason"].map(fmt.text))
            st.table(t[["workload", "engine", "figure", "value", "reason"]], hide_index=True)


def provenance_section(ev: pd.Series, raw, version: int, digest: str | None, split: str) -> None:
    st.subheader("Protocol and provenance")
    run_v = ev.get("run_protocol_version")
    st.markdown(
        f"Run under protocol **v{fmt.text(run_v) or '?'}**; scored here under protocol **v{version}**"
        + (f" (digest `{digest[:16]}`)" if digest else "")
        + "."
    )
    prov = provenance(ev.get("provenance"))
    if isinstance(prov, dict):
        st.json(prov)
    elif prov:
        st.code(str(prov))
    else:
        st.caption("No provenance recorded.")
    starts = raw.engine_starts
    if not starts.empty:
        st.markdown("**Engine starts**")
        st.table(starts.drop(columns=["log_text"]).astype(str), hide_index=True)
        if split == "dev":
            for r in starts.itertuples():
                if fmt.text(r.log_text):
                    with st.expander(f"Start-up log: {r.engine} ({r.purpose}, start {r.start_index})"):
                        st.code(r.log_text)
        else:
            st.caption("Start-up logs of test evaluations are not shown: the engine saw hidden prompts.")


def main() -> None:
    sel = st.session_state["selection"]
    st.title("Evaluation")
    if sel.state.evaluations == 0:
        st.info(sel.state.message)
        return
    eid = pick_evaluation(sel)
    if eid is None:
        return
    try:
        frames = cached.evaluation_scores(sel.home, eid, sel.protocol_version)
        raw = cached.evaluation_raw(sel.home, eid)
    except BoardDataError as exc:
        st.error(str(exc))
        return
    if frames.evaluations.empty:
        st.error(f"The scorer returned nothing for {eid}.")
        return
    ev = frames.evaluations.iloc[0]
    split = fmt.text(ev.get("split"))
    st.header(fmt.text(ev.get("label")) or eid)
    st.caption(
        f"`{eid}` · account {fmt.text(ev.get('account_id'))} · task {fmt.text(ev.get('task_id'))} · split {split} · "
        f"status {fmt.text(ev.get('status'))}" + (" · reference" if bool(ev.get("is_reference")) else "")
    )
    status_notice(ev, raw)
    version = frames.protocol_version or sel.protocol_version
    score_section(ev, frames.passes, version)
    gates_section(frames.gates)
    failures_section(ev, raw, split)
    plots_section(ev, raw, version)
    contention_section(raw, version)
    shown_rows = cached.shown_rows(sel.home, (eid,), version)
    shown.interactivity_section(shown_rows)
    shown.acceptance_section(ev, shown_rows)
    history_section.history_section(ev, sel.home, version)
    sweep_charts.sweep_section(sel.home, eid, version)
    shown.context_section(ev, shown_rows)
    shown.goodput_section(shown_rows)
    figures_section(frames.figures)
    shown.export_section(ev, sel.home, version)
    shown.profile_section(ev, sel.home, version)
    provenance_section(ev, raw, version, frames.protocol_digest, split)
    if fmt.text(ev.get("gap_detail")):
        st.markdown(f"**Dev/test gap:** {fmt.flag(ev.get('gap_flag'))}: {fmt.md_escape(ev.get('gap_detail'))}")


main()
