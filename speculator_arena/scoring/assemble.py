"""The scorer's pandas step: every gate, the SpecScore precedence and the dev/test gap flag,
computed over whole frames from the rows of the SQL queries (score.py runs those).

Order of precedence for SpecScore (the first that applies decides; SCORING.md "Outcomes": a
measured evaluation ends in a number, 0 with reasons, or void with the reason, never a blank):
1. void (the runner's void_reason, the stock engine unanswered in a probe check, the device
   not idle before the stock engine, the host contended on a timed pass, the stock engine
   without speed on a timed pass) -> blank, "void: ...";
2. the candidate did not start, died, or offloaded -> 0;
3. still running, or a pass of either engine missing or aborted -> blank, "incomplete: ...";
4. a gate fails -> 0 (a gate the candidate left without data fails: the gates say so);
5. a gate not measured (the arena's side: what the candidate causes already failed) -> void,
   except the memory gate on a task that is not public (the local CPU task has no device to
   sample): it is shown "not measured" and does not block;
6. a workload ratio not measured -> void with the passes' reasons;
7. otherwise (r_solo * r_team * r_busy) ** (1/3).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from speculator_arena.protocol.model import WORKLOADS
from speculator_arena.scoring import figures, frames
from speculator_arena.scoring.answering import over_limit
from speculator_arena.scoring.contention import contention_void_reasons
from speculator_arena.scoring.limits import memory_budget_bytes
from speculator_arena.scoring.result import ENGINES, FINISHED, GATES, Scores
from speculator_arena.scoring.statistics import cluster_ratio, two_sided_fails


def _gate(n: int, limit, verdict, detail, statistic=None, se=None, low=None, high=None) -> dict:
    """One gate's columns for every evaluation row (NaN where a statistic is not given)."""
    blank = np.full(n, np.nan)
    return {
        "statistic": blank if statistic is None else statistic,
        "se": blank if se is None else se,
        "ci_low": blank if low is None else low,
        "ci_high": blank if high is None else high,
        "limit": limit,
        "verdict": verdict,
        "detail": detail,
    }


def _incomplete_reasons(ev: pd.DataFrame, passes: pd.DataFrame, version: int) -> pd.Series:
    """Why each evaluation cannot be scored yet (None where it can): its task is not in the
    protocol, it is still running, or one of its passes is missing or aborted."""
    missing = passes[passes["missing_reason"].notna()]
    missing_by_eval = missing.groupby("evaluation_id")["pass_id"].apply(lambda s: ", ".join(s))
    listed = ev["evaluation_id"].map(missing_by_eval).to_numpy(dtype=object)
    has_missing = ev["evaluation_id"].isin(missing_by_eval.index).to_numpy()
    running = ~ev["status"].isin(FINISHED).to_numpy()
    n = len(ev)
    running_text, missing_text = frames.objects(n), frames.objects(n)
    running_text[running] = [f"incomplete: evaluation is {s}" for s in ev["status"].to_numpy()[running]]
    missing_text[has_missing] = [f"incomplete: passes missing or aborted ({m})" for m in listed[has_missing]]
    reasons = np.select(
        [~ev["in_protocol"].to_numpy(), running, has_missing],
        [frames.objects(n, f"task not in protocol v{version}"), running_text, missing_text],
        None,
    )
    return pd.Series(reasons, index=ev.index, dtype=object)


def _workload_ratios(ev: pd.DataFrame, passes: pd.DataFrame) -> None:
    """r_solo, r_team, r_busy: the median over passes; blank, with the passes' reasons, when any pass is."""
    if len(passes):
        g = passes.groupby(["evaluation_id", "workload"])
        wr = pd.DataFrame({"median": g["ratio"].median(), "n": g["ratio"].size(), "valid": g["ratio"].count()})
        wr["reason"] = _blank_ratio_reasons(passes, wr)
    else:
        wr = pd.DataFrame(
            columns=["median", "n", "valid", "reason"],
            index=pd.MultiIndex.from_tuples([], names=["evaluation_id", "workload"]),
        )
    for w in WORKLOADS:
        sub = wr.xs(w, level="workload") if len(wr) else wr.iloc[:0]
        ok = sub["valid"] == sub["n"]
        ev[f"r_{w}"] = ev["evaluation_id"].map(sub["median"].where(ok))
        reason = sub["reason"].where(~ok)
        ev[f"r_{w}_reason"] = ev["evaluation_id"].map(reason)
        ev.loc[ev[f"r_{w}"].isna() & ev[f"r_{w}_reason"].isna(), f"r_{w}_reason"] = "no pass rows"


def _blank_ratio_reasons(passes: pd.DataFrame, wr: pd.DataFrame) -> pd.Series:
    """Per (evaluation, workload) with a blank pass ratio: its passes' distinct reasons, sorted and
    joined ("" when none is given); NaN for the others (never shown).

    Why only those: joining every group's reasons in Python cost more than the rest of the ratios."""
    blank = wr.index[(wr["valid"] != wr["n"]).to_numpy()]
    out = frames.objects(len(wr))
    if len(blank):
        in_blank = pd.MultiIndex.from_frame(passes[["evaluation_id", "workload"]]).isin(blank)
        sub = passes[in_blank]
        seen: dict = {}
        for key, r in zip(zip(sub["evaluation_id"].tolist(), sub["workload"].tolist()), sub["ratio_reason"].to_numpy()):
            entry = seen.setdefault(key, set())
            if isinstance(r, str):
                entry.add(r)
        where = wr.index.get_indexer(list(seen))
        out[where] = ["; ".join(sorted(s)) for s in seen.values()]
    return pd.Series(out, index=wr.index, dtype="str")


def _per_row(ev_ids: np.ndarray, values: np.ndarray, ids: pd.Series) -> np.ndarray:
    """`values` (one per evaluation row, `ev_ids`) looked up for each of `ids`."""
    return pd.Series(values, index=pd.Index(ev_ids)).groupby(level=0).first().reindex(ids).to_numpy()


def _gate_greedy(greedy: pd.DataFrame, uniques: pd.Index, codes: np.ndarray, lim_e: pd.DataFrame) -> dict:
    """Greedy agreement: mean over the prompts the stock engine answered of the common prefix over
    the longer reply, against the floor. A prompt the candidate left unanswered counts a = 0 from
    protocol v2 on (SCORING.md); under v1 it is left out."""
    n = len(codes)
    floor = lim_e["greedy_floor"].to_numpy()
    floor_f = frames.floats(lim_e["greedy_floor"])
    found = np.zeros(n, dtype=bool)
    stat = np.full(n, np.nan)
    unanswered = np.zeros(n, dtype=np.int64)
    if len(greedy):
        worst = _per_row(uniques[codes], lim_e["unanswered_worst"].to_numpy(dtype=bool), greedy["evaluation_id"])
        answered = greedy["candidate_answered"].to_numpy(dtype=bool)
        greedy = greedy[answered | worst.astype(bool)]
        longer = np.maximum(greedy["len_candidate"], greedy["len_stock"])
        a = (greedy["common_prefix"] / longer.where(longer > 0)).fillna(0.0)
        greedy = greedy.assign(
            a=a.where(greedy["candidate_answered"].to_numpy(dtype=bool), 0.0),
            skipped=~greedy["candidate_answered"].to_numpy(dtype=bool),
        )
        ga = greedy.groupby("evaluation_id").agg(mean=("a", "mean"), size=("a", "size"), skipped=("skipped", "sum"))
        pos = ga.index.get_indexer(uniques)[codes]
        found = pos >= 0
        stat[found] = ga["mean"].to_numpy()[pos[found]]
        size = ga["size"].to_numpy()[pos[found]]
        unanswered[found] = ga["skipped"].to_numpy()[pos[found]]
    no_floor = pd.isna(floor)
    ok = stat >= floor_f
    verdict = np.select(
        [~found, no_floor | ok],
        [frames.objects(n, "not measured"), frames.objects(n, "pass")],
        frames.objects(n, "fail"),
    )
    detail = frames.objects(n, "no greedy probe prompt answered by the stock engine")
    if found.any():
        skipped = unanswered[found]
        detail[found] = [
            (
                f"{k} prompts; no floor in this task"
                if nf
                else f"{k} prompts; mean agreement {'>=' if o else '<'} floor {f}"
            )
            + (f"; {u} left unanswered by the candidate, counted as 0" if u else "")
            for k, nf, o, f, u in zip(size, no_floor[found], ok[found], floor[found], skipped)
        ]
    return _gate(n, floor_f, verdict, detail, statistic=stat)


def _gates_replies(scored: pd.DataFrame, uniques: pd.Index, codes: np.ndarray, lim_e: pd.DataFrame) -> list:
    """Sampled likelihood and first-choice share: candidate minus stock, replies as clusters."""
    n = len(codes)
    stats = {}
    if len(scored):
        s = scored.astype({"s": float, "x": float, "n": float})
        s = s.assign(ss=s.s * s.s, sn=s.s * s.n, nn=s.n * s.n, xx=s.x * s.x, xn=s.x * s.n)
        g = s.groupby(["evaluation_id", "reply_engine"])
        agg = g[["s", "x", "n", "ss", "sn", "nn", "xx", "xn"]].sum().assign(R=g.size())
        L, seL = cluster_ratio(agg.s, agg.n, agg.ss, agg.sn, agg.nn, agg.R)
        F, seF = cluster_ratio(agg.x, agg.n, agg.xx, agg.xn, agg.nn, agg.R)
        agg = agg.assign(L=L, seL=seL, F=F, seF=seF)
        stats = {k: agg.xs(k, level="reply_engine") for k in ENGINES if k in agg.index.get_level_values(1)}
    z = lim_e["z"].to_numpy()
    blocks = []
    for est, se_col, bound_col in (("L", "seL", "likelihood_bound"), ("F", "seF", "first_choice_bound")):
        bound = lim_e[bound_col].to_numpy()
        both = np.zeros(n, dtype=bool)
        if "candidate" in stats and "stock" in stats:
            pc = stats["candidate"].index.get_indexer(uniques)[codes]
            ps = stats["stock"].index.get_indexer(uniques)[codes]
            both = (pc >= 0) & (ps >= 0)
        stat, se, low, high = (np.full(n, np.nan) for _ in range(4))
        verdict = frames.objects(n, "not measured")
        detail = frames.objects(n, "the stock engine has fewer than 2 scored replies")
        # the stock engine scored enough of its own replies: too few of the candidate's is the
        # candidate's failure (it failed or emptied its timed replies), never an unmeasured gate
        stock_r = np.zeros(n)
        if "stock" in stats:
            ps_all = stats["stock"].index.get_indexer(uniques)[codes]
            stock_r[ps_all >= 0] = stats["stock"]["R"].to_numpy()[ps_all[ps_all >= 0]]
        cand_short = stock_r >= 2
        verdict[cand_short] = "fail"
        detail[cand_short] = (
            "the candidate has fewer than 2 scored replies with tokens (its timed replies failed or were empty)"
        )
        if both.any():
            c, st = stats["candidate"], stats["stock"]
            c_est, s_est = c[est].to_numpy()[pc[both]], st[est].to_numpy()[ps[both]]
            c_r, s_r = c["R"].to_numpy()[pc[both]], st["R"].to_numpy()[ps[both]]
            d = c_est - s_est
            e = np.hypot(c[se_col].to_numpy()[pc[both]], st[se_col].to_numpy()[ps[both]])
            fails, lo, hi = two_sided_fails(d, e, bound[both], z[both])
            measured = ~np.isnan(e)
            stat[both] = d
            se[both] = np.where(measured, e, np.nan)
            low[both] = np.where(measured, lo, np.nan)
            high[both] = np.where(measured, hi, np.nan)
            s_ok = ~np.isnan(st[se_col].to_numpy()[ps[both]])
            verdict[both] = np.where(
                measured, np.where(fails, "fail", "pass"), np.where(s_ok, "fail", "not measured")
            ).astype(object)
            detail[both] = [
                f"candidate {ce:.5f} ({int(cr)} replies), stock {se_:.5f} ({int(sr)} replies); "
                f"fails when CI lies beyond +-{b}"
                if m
                else (
                    "the candidate has fewer than 2 scored replies with tokens"
                    if so
                    else "the stock engine has fewer than 2 scored replies with tokens"
                )
                for ce, cr, se_, sr, b, m, so in zip(c_est, c_r, s_est, s_r, bound[both], measured, s_ok)
            ]
        blocks.append(_gate(n, frames.floats(lim_e[bound_col]), verdict, detail, stat, se, low, high))
    return blocks


def _gate_fidelity(fidelity: pd.DataFrame, uniques: pd.Index, codes: np.ndarray, lim_e: pd.DataFrame) -> dict:
    """Target fidelity: mean absolute log-probability difference over the fixed texts' tokens the
    stock engine scored. From protocol v2 on a text the candidate left unanswered (or answered on
    other token positions than the arena's) counts its tokens at the largest per-token difference
    any answered text showed, and at least `unanswered_min_nats` (SCORING.md); under v1 such texts
    were left out and texts tokenized differently left the gate not measured."""
    n = len(codes)
    ceil = frames.floats(lim_e["fidelity_ceiling"])
    stat = np.full(n, np.nan)
    verdict = frames.objects(n, "not measured")
    detail = frames.objects(n, "no fixed text scored by the stock engine")
    if not len(fidelity):
        return _gate(n, ceil, verdict, detail, statistic=stat)
    ids = uniques[codes]
    worst_rule = _per_row(ids, lim_e["unanswered_worst"].to_numpy(dtype=bool), fidelity["evaluation_id"]).astype(bool)
    min_nats = _per_row(ids, lim_e["unanswered_min_nats"].to_numpy(dtype=float), fidelity["evaluation_id"])
    good = fidelity["candidate_answered"].to_numpy(dtype=bool) & fidelity["aligned"].fillna(False).to_numpy(dtype=bool)
    f = fidelity.assign(good=good, worst_rule=worst_rule, min_nats=min_nats)
    f = f[good | worst_rule | fidelity["candidate_answered"].to_numpy(dtype=bool)]
    f = f.assign(
        good_diff=f["abs_diff"].where(f["good"], 0.0),
        good_max=f["max_diff"].where(f["good"]),
        bad_n=f["n"].where(~f["good"], 0),
        good_n=f["n"].where(f["good"], 0),
        misaligned=(~f["good"] & ~f["worst_rule"]).astype(int),
        skipped=(~f["good"]).astype(int),
    )
    fa = f.groupby("evaluation_id").agg(
        abs_diff=("good_diff", "sum"),
        worst_seen=("good_max", "max"),
        bad_n=("bad_n", "sum"),
        n=("n", "sum"),
        texts=("n", "size"),
        misaligned=("misaligned", "sum"),
        skipped=("skipped", "sum"),
        worst_rule=("worst_rule", "first"),
        min_nats=("min_nats", "first"),
    )
    worst = np.fmax(fa["worst_seen"].fillna(0.0).to_numpy(), fa["min_nats"].to_numpy())
    value = (fa["abs_diff"].to_numpy() + fa["bad_n"].to_numpy() * np.where(fa["worst_rule"], worst, 0.0)) / fa[
        "n"
    ].where(fa["n"] > 0).to_numpy()
    pos = fa.index.get_indexer(uniques)[codes]
    rows = np.flatnonzero(pos >= 0)
    p = pos[rows]
    measured = (fa["misaligned"].to_numpy()[p] == 0) & ~np.isnan(value[p])
    stat[rows[measured]] = value[p][measured]
    verdict[rows[measured]] = np.where(value[p][measured] <= ceil[rows[measured]], "pass", "fail").astype(object)
    detail[rows] = [
        (
            f"{int(k)} tokens of {int(t)} texts"
            + (f"; {int(u)} unanswered by the candidate, scored at {w:.4g} nats per token" if u else "")
        )
        if m
        else (f"{int(b)} texts tokenized differently by the two engines" if b else "no tokens to score")
        for k, t, u, w, m, b in zip(
            fa["n"].to_numpy()[p],
            fa["texts"].to_numpy()[p],
            fa["skipped"].to_numpy()[p],
            worst[p],
            measured,
            fa["misaligned"].to_numpy()[p],
        )
    ]
    return _gate(n, ceil, verdict, detail, statistic=stat)


def _gate_length(
    length: pd.DataFrame, uniques: pd.Index, codes: np.ndarray, lim_e: pd.DataFrame, incomplete: np.ndarray
) -> dict:
    """Length: candidate over stock reply length minus 1 (delta method, pairs as clusters); only
    on complete evaluations (the others' rows are never read)."""
    n = len(codes)
    bound, z = lim_e["length_bound"].to_numpy(), lim_e["z"].to_numpy()
    complete = pd.isna(incomplete)
    stat, se, low, high = (np.full(n, np.nan) for _ in range(4))
    verdict = frames.objects(n, "not measured")
    detail = np.where(complete, "fewer than 2 paired requests", incomplete).astype(object)
    if len(length):
        length = length[length["evaluation_id"].isin(uniques[codes[complete]])]
    pos = frames.positions(length, ["evaluation_id"], (uniques,))[codes]
    rows = np.flatnonzero(complete & (pos >= 0))
    if len(rows):
        r = length.iloc[pos[rows]]
        enough = ~(r["pairs"].to_numpy() < 2) & ~(r["sum_s"].to_numpy() <= 0)
        # the stock engine counted enough requests: too few pairs is the candidate's failure
        short = ~enough & (r["stock_counted"].to_numpy() >= 2)
        verdict[rows[short]] = "fail"
        detail[rows[short]] = [
            f"the candidate answered and counted {int(p)} of the stock engine's {int(k)} counted requests"
            for p, k in zip(r["pairs"].to_numpy()[short], r["stock_counted"].to_numpy()[short])
        ]
        rows, r = rows[enough], r[enough]
    if len(rows):
        ratio, e = cluster_ratio(r.sum_c, r.sum_s, r.sum_cc, r.sum_cs, r.sum_ss, r.pairs)
        delta = ratio - 1.0
        fails, lo, hi = two_sided_fails(delta, e, bound[rows], z[rows])
        stat[rows], se[rows], low[rows], high[rows] = delta, e, lo, hi
        verdict[rows] = np.where(fails, "fail", "pass").astype(object)
        detail[rows] = [f"{int(p)} pairs; mean length ratio {q:.4f}" for p, q in zip(r["pairs"].to_numpy(), ratio)]
    return _gate(n, frames.floats(lim_e["length_bound"]), verdict, detail, stat, se, low, high)


def _gate_memory(memory: pd.DataFrame, mem_pos: np.ndarray, lim_e: pd.DataFrame, public: np.ndarray) -> dict:
    """Memory: the candidate's peak against utilization x device total + slack (the stock
    engine's peak is a figure). `mem_pos`: each row's memory row per engine (-1 where none).

    From protocol v2 on the samples must cover the timed passes: a failed read, or a gap between
    samples (or a pass's ends) over `max_sample_gap_seconds`, leaves a gate that would pass "not
    measured" with the reason; a peak already over the budget fails whatever the coverage."""
    n = len(mem_pos)
    util, slack = lim_e["gpu_memory_utilization"].to_numpy(), lim_e["memory_slack_bytes"].to_numpy()
    max_gap = lim_e["max_sample_gap_seconds"].to_numpy(dtype=float)
    stat, limit = np.full(n, np.nan), np.full(n, np.nan)
    verdict = frames.objects(n, "not measured")
    detail = frames.objects(n, "no device memory samples (no GPU to sample)")
    detail[~public] = "no device memory samples (no GPU to sample); does not block on this non-public task"
    rows = np.flatnonzero(mem_pos[:, 0] >= 0)
    if len(rows):
        m = memory.iloc[mem_pos[rows, 0]]
        peak, total = m["peak_bytes"].to_numpy(dtype=float), m["total_bytes"].to_numpy(dtype=float)
        u, s = util[rows], slack[rows]
        allowed = memory_budget_bytes(total, u, s)
        stat[rows], limit[rows] = peak, allowed
        over = peak > allowed
        failed = m["failed_reads"].fillna(0).to_numpy()
        gap = m["max_gap"].to_numpy(dtype=float)
        judged = ~np.isnan(max_gap[rows])
        uncovered = judged & ((failed > 0) | ~(gap <= max_gap[rows]))
        verdict[rows] = np.where(over, "fail", np.where(uncovered | np.isnan(peak), "not measured", "pass")).astype(
            object
        )
        detail[rows] = [
            f"peak {p / 2**30:.2f} GiB of {a / 2**30:.2f} GiB allowed ({uu} x {t / 2**30:.2f} GiB + "
            f"{ss / 2**30:.1f} GiB)"
            + (
                f"; samples do not cover the timed passes ({int(fr)} failed reads, largest gap {g:.2f} s over {mg:g} s)"
                if unc and not o
                else ""
            )
            for p, a, uu, t, ss, unc, o, fr, g, mg in zip(
                peak, allowed, u, total, s, uncovered, over, failed, gap, max_gap[rows]
            )
        ]
    return _gate(n, limit, verdict, detail, statistic=stat)


def _gate_answering(answering: pd.DataFrame, eids: pd.Series, lim_e: pd.DataFrame) -> tuple[dict, np.ndarray]:
    """Share of probe requests left unanswered: the candidate's decides the gate; the stock
    engine's voids the evaluation. Returns the gate and per row the stock engine's void text."""
    n = len(eids)
    mx = lim_e["max_unanswered_share"].to_numpy()
    stat = np.full(n, np.nan)
    verdict = frames.objects(n, "not measured")
    detail = frames.objects(n, "no probe check rows")
    stock_text = frames.objects(n)
    if len(answering):
        ans = answering.assign(share=answering["unanswered"] / answering["requests"].where(answering["requests"] > 0))
        # each evaluation row with its answering rows, in their order
        m = pd.DataFrame({"evaluation_id": eids.to_numpy(), "_row": np.arange(n)}).merge(
            ans.assign(_order=np.arange(len(ans))), on="evaluation_id"
        )
        m = m.iloc[np.lexsort((m["_order"].to_numpy(), m["_row"].to_numpy()))]
        row, engine, share = m["_row"].to_numpy(), m["engine"].to_numpy(), m["share"].to_numpy(dtype=float)
        checks = m["probe_check"].to_numpy()
        parts = [f"{u}/{q} of {c}" for u, q, c in zip(m["unanswered"].to_numpy(), m["requests"].to_numpy(), checks)]
        over = over_limit(m["unanswered"].to_numpy(), m["requests"].to_numpy(), mx[row])
        stock, cand = engine == "stock", engine == "candidate"
        bad = np.flatnonzero(stock & over)
        stock_text = frames.texts_by_row(
            n,
            frames.by_row(row[bad], [parts[i] for i in bad]),
            lambda ps: "stock engine left " + ", ".join(ps) + " unanswered",
        )
        bad = np.flatnonzero(cand & over)
        cand_text = frames.texts_by_row(
            n,
            frames.by_row(row[bad], [parts[i] for i in bad]),
            lambda ps: "candidate left " + ", ".join(ps) + " unanswered",
        )
        seen_text = frames.texts_by_row(
            n,
            frames.by_row(row[cand], checks[cand]),
            lambda cs: "worst candidate share unanswered over " + ", ".join(sorted(set(cs))),
        )
        np.fmax.at(stat, row[cand], share[cand])  # the worst share; NaN where no candidate row
        has_rows, failed, asked = np.bincount(row, minlength=n) > 0, pd.notna(cand_text), pd.notna(seen_text)
        verdict = np.select(
            [~has_rows, failed, ~asked], [verdict, frames.objects(n, "fail"), verdict], frames.objects(n, "pass")
        )
        detail = np.select(
            [~has_rows, failed, ~asked],
            [detail, cand_text, frames.objects(n, "no probe check asked the candidate")],
            seen_text,
        )
    return _gate(n, frames.floats(lim_e["max_unanswered_share"]), verdict, detail, statistic=stat), stock_text


def _start_flags(starts: pd.DataFrame, pos: np.ndarray, col: str) -> np.ndarray:
    """A start flag of the candidate per row: False where it has no start row or the flag is blank."""
    out = np.zeros(len(pos), dtype=bool)
    found = pos >= 0
    if found.any():
        values = starts[col].to_numpy(dtype=object)[pos[found]]
        blank = starts[col].isna().to_numpy()[pos[found]]
        out[found] = [not b and bool(v) for v, b in zip(values, blank)]
    return out


def _prefixed(prefix: str, texts: np.ndarray) -> np.ndarray:
    """`prefix + text` where a text is given, None elsewhere."""
    out = frames.objects(len(texts))
    has = pd.notna(texts)
    out[has] = [prefix + t for t in texts[has]]
    return out


def assemble(
    proto,
    digest,
    limits,
    ev,
    passes,
    greedy,
    scored,
    fidelity,
    length,
    memory,
    answering,
    starts,
    fig_req,
    fig_wall,
    fig_acc,
    engine_passes,
    contention,
    timed_passes,
) -> Scores:
    """The query results made into the scorer's frames, every evaluation at once.

    Why whole frames: this runs on the web page's first render (a 2-second budget); the former
    per-evaluation loops took seconds for ~1,000 evaluations. Row order, dtypes and texts are those
    of that per-row code (docs/scoring.md; the module docstring gives the SpecScore precedence).
    """
    lim = limits.set_index("task_id")
    ev = ev.copy()
    ev["run_protocol_version"] = ev["protocol_version"]
    ev["protocol_version"] = proto.version
    ev["in_protocol"] = ev["task_id"].isin(lim.index)
    lim_e = lim.reindex(ev["task_id"]).reset_index(drop=True)
    lim_e.index = ev.index
    n = len(ev)
    codes, uniques, first, last = frames.eval_keys(ev["evaluation_id"])

    # ---- completeness, workload ratios -------------------------------------------------------
    passes = passes.copy()
    incomplete_reason = _incomplete_reasons(ev, passes, proto.version)
    ev["complete"] = incomplete_reason.isna()
    incomplete = incomplete_reason.to_numpy()
    _workload_ratios(ev, passes)

    # ---- gates (one block of rows per gate, in GATES order) -----------------------------------
    in_protocol = ev["in_protocol"].to_numpy()
    public = np.array([bool(x) for x in lim_e["public"].to_numpy()], dtype=bool)
    mem_pos = frames.positions(memory, ["evaluation_id", "engine"], (uniques, ENGINES))[codes]
    answering_gate, stock_text = _gate_answering(answering, ev["evaluation_id"], lim_e)
    blocks = [
        _gate_greedy(greedy, uniques, codes, lim_e),
        *_gates_replies(scored, uniques, codes, lim_e),
        _gate_fidelity(fidelity, uniques, codes, lim_e),
        _gate_length(length, uniques, codes, lim_e, incomplete),
        _gate_memory(memory, mem_pos, lim_e, public),
        answering_gate,
    ]
    gates_df = _gates_frame(ev["evaluation_id"], blocks)

    # ---- void, candidate failures, SpecScore ----------------------------------------------------
    verdicts = np.stack([b["verdict"] for b in blocks])[:, first]  # a repeated id: its first row's
    fails, unmeasured = verdicts == "fail", verdicts == "not measured"
    blocking = unmeasured.copy()
    blocking[GATES.index("memory")] &= public | ~in_protocol
    start_pos = frames.positions(starts, ["evaluation_id", "engine"], (uniques, ("candidate",)))[codes, 0]
    host = contention_void_reasons(ev, contention, timed_passes, lim_e, _run_records_contention(ev))
    void_reason = _void_reasons(
        ev,
        codes,
        stock_text,
        _start_flags(starts, start_pos, "device_not_idle"),
        host,
        _stock_without_speed(ev, passes),
    )
    cand_fail = _candidate_failures(ev, starts, start_pos)

    # the precedence of the module docstring: the first case that applies decides
    rs = np.stack([ev[f"r_{w}"].to_numpy(dtype=float) for w in WORKLOADS])
    ratio_blank = np.isnan(rs).any(axis=0)
    void, failed, unfinished, gate_failed, gate_unmeasured, ratio_unmeasured, scored = range(7)
    case = np.select(
        [
            pd.notna(void_reason),
            pd.notna(cand_fail),
            pd.notna(incomplete),
            fails.any(axis=0),
            blocking.any(axis=0),
            ratio_blank,
        ],
        [void, failed, unfinished, gate_failed, gate_unmeasured, ratio_unmeasured],
        scored,
    )
    specscore = np.where((case == failed) | (case == gate_failed), 0.0, np.nan)
    scoring = np.flatnonzero(case == scored)
    specscore[scoring] = [float(p) ** (1.0 / 3.0) for p in np.prod(rs, axis=0)[scoring]]  # Python's pow, as before
    # A measured evaluation never ends blank (SCORING.md "Outcomes"): what is left unmeasured once
    # the candidate's failures are scored 0 is the arena's side, so the evaluation is void.
    ratio_text = frames.objects(n)
    blank_rows = np.flatnonzero(case == ratio_unmeasured)
    if len(blank_rows):
        why = np.stack([ev[f"r_{w}_reason"].to_numpy(dtype=object) for w in WORKLOADS])
        ratio_text[blank_rows] = [
            "ratios not measured: "
            + "; ".join(f"r_{w}: {why[k, i]}" for k, w in enumerate(WORKLOADS) if np.isnan(rs[k, i]))
            for i in blank_rows
        ]
    unmeasured_text = _prefixed(
        "gate not measured: ", np.array(frames.joined_names(blocking, GATES, ", "), dtype=object)
    )
    void_reason = np.select(
        [case == void, case == gate_unmeasured, case == ratio_unmeasured],
        [void_reason, unmeasured_text, ratio_text],
        None,
    )
    reason = np.select(
        [case == k for k in (failed, unfinished, gate_failed)],
        [
            _prefixed("candidate failed: ", cand_fail),
            incomplete,
            _prefixed("gate failed: ", np.array(frames.joined_names(fails, GATES, ", "), dtype=object)),
        ],
        _prefixed("void: ", void_reason),
    )
    ev["void"] = pd.notna(void_reason).tolist()
    ev["void_reason"] = [x if x is not None else y for x, y in zip(void_reason, ev["void_reason"].to_numpy())]
    ev["specscore"] = pd.array(specscore, dtype=float)
    ev["specscore_reason"] = reason.tolist()
    ev["gates_pass"] = pd.arrays.BooleanArray(case == scored, ~np.isin(case, (gate_failed, scored)))
    ev["failed_gates"] = frames.joined_names(fails, GATES, ",")
    ev["not_measured_gates"] = frames.joined_names(unmeasured, GATES, ",")

    shown = figures.figures_frame(ev, incomplete_reason, fig_req, fig_wall, fig_acc, engine_passes, memory, lim_e)
    figures.key_figures(ev, shown)
    gap_flags(ev, lim_e)

    passes = passes.drop(columns=["task_id"]).reset_index(drop=True)
    return Scores(proto.version, digest, ev.reset_index(drop=True), passes, gates_df, shown)


def _gates_frame(eids: pd.Series, blocks: list) -> pd.DataFrame:
    """The gates frame: one row per gate and evaluation row, gate by gate."""
    columns = ["evaluation_id", "gate", "statistic", "se", "ci_low", "ci_high", "limit", "verdict", "detail"]
    n = len(eids)
    if n == 0:
        gates_df = pd.DataFrame([], columns=columns)
        for col in ("statistic", "se", "ci_low", "ci_high", "limit"):
            gates_df[col] = pd.to_numeric(gates_df[col], errors="coerce")
        return gates_df
    data = {
        "evaluation_id": frames.inferred(eids.to_numpy()).take(np.tile(np.arange(n), len(blocks))),
        "gate": frames.inferred(GATES).take(np.repeat(np.arange(len(blocks)), n)),
    }
    for col in ("statistic", "se", "ci_low", "ci_high", "limit"):
        data[col] = np.concatenate([np.asarray(b[col], dtype=float) for b in blocks])
    for col in ("verdict", "detail"):
        data[col] = frames.inferred(np.concatenate([b[col] for b in blocks]))
    return pd.DataFrame(data)


def _run_records_contention(ev: pd.DataFrame) -> np.ndarray:
    """Per row: whether the protocol version the evaluation ran under recorded host contention."""
    from speculator_arena.protocol import load_protocol

    known: dict = {}
    for v in ev["run_protocol_version"].dropna().unique():
        try:
            known[v] = load_protocol(int(v)).contention is not None
        except (KeyError, ValueError):  # a staged version no longer present: not judged on absence
            known[v] = False
    return np.array([known.get(v, False) for v in ev["run_protocol_version"].to_numpy()], dtype=bool)


def _stock_without_speed(ev: pd.DataFrame, passes: pd.DataFrame) -> np.ndarray:
    """Per row: the timed passes on which the stock engine had no speed (it counted no tokens in
    its window), which voids the evaluation (the arena's side); None where there is none."""
    out = frames.objects(len(ev))
    if not len(passes):
        return out
    bad = (
        passes["missing_reason"].isna()
        & ~passes["zeroed_by_failure_rule"].fillna(False).astype(bool)
        & ~(passes["stock_speed"] > 0)
    )
    listed = passes[bad].groupby("evaluation_id")["pass_id"].apply(lambda s: ", ".join(s))
    hit = ev["evaluation_id"].map(listed).to_numpy(dtype=object)
    has = pd.notna(hit)
    out[has] = [f"the stock engine counted no tokens in its window on {p}" for p in hit[has]]
    return out


def _void_reasons(
    ev: pd.DataFrame,
    codes: np.ndarray,
    stock_text: np.ndarray,
    not_idle: np.ndarray,
    host: np.ndarray,
    stock_speed: np.ndarray,
) -> np.ndarray:
    """Why each evaluation is void (None where it is not): the runner voided it, the stock engine
    left probe requests unanswered (the last row of a repeated id that did decides), the device
    did not come back idle before the stock engine, the host was contended, or the stock engine
    had no speed on a timed pass."""
    n = len(ev)
    runner = (ev["status"] == "void").to_numpy(dtype=bool, na_value=False)
    given = ev["void_reason"].to_numpy()
    runner_text = frames.objects(n)
    runner_text[runner] = [x if isinstance(x, str) and x else "voided by the runner" for x in given[runner]]
    by_id = {int(codes[i]): stock_text[i] for i in np.flatnonzero(pd.notna(stock_text))}
    stock = np.array([by_id.get(c) for c in codes.tolist()], dtype=object) if by_id else frames.objects(n)
    return np.select(
        [runner, pd.notna(stock), not_idle, pd.notna(host), pd.notna(stock_speed)],
        [
            runner_text,
            stock,
            frames.objects(n, "device did not come back idle before the stock engine"),
            host,
            stock_speed,
        ],
        None,
    )


def _candidate_failures(ev: pd.DataFrame, starts: pd.DataFrame, start_pos: np.ndarray) -> np.ndarray:
    """Why the candidate failed (None where it did not): the runner's failure_reason, its engine
    died, or its start-up log shows an offload."""
    n = len(ev)
    given = ev["failure_reason"].to_numpy(dtype=object) if "failure_reason" in ev.columns else frames.objects(n)
    stated = np.array([isinstance(x, str) for x in given], dtype=bool)
    offload = _start_flags(starts, start_pos, "offload")
    offload_text = frames.objects(n)
    if offload.any():
        evidence = starts["offload_evidence"].to_numpy(dtype=object)[start_pos[offload]]
        offload_text[offload] = ["offload in the candidate's start-up log (" + str(x) + ")" for x in evidence]
    return np.select(
        [stated, _start_flags(starts, start_pos, "died"), offload],
        [given, frames.objects(n, "candidate engine died"), offload_text],
        None,
    )


def gap_flags(ev: pd.DataFrame, lim_e: pd.DataFrame) -> None:
    """Per task and account: last scored test SpecScore < (1 - gap) x last scored dev SpecScore.

    Sets `gap_flag` and `gap_detail` on every evaluation of a task and account that has both a
    scored dev and a scored test evaluation (blank elsewhere); `lim_e`: each row's task limits,
    row for row with `ev`. Ties in created_at are broken by the rows' order (a stable sort).
    """
    ev["gap_flag"] = pd.array([pd.NA] * len(ev), dtype="boolean")
    ev["gap_detail"] = None
    rows = np.flatnonzero(ev["specscore"].notna() & ev["task_id"].notna() & ev["account_id"].notna())
    if not len(rows):
        return
    scored = ev.iloc[rows]
    group = scored.groupby(["task_id", "account_id"], sort=False).ngroup().to_numpy()
    first = np.unique(group, return_index=True)[1]  # each group's first scored row
    keys, first_row = scored[["task_id", "account_id"]].iloc[first], rows[first]
    dev, test = (_last_scores(scored, group, split) for split in ("dev", "test"))
    both = np.flatnonzero(pd.notna(dev) & pd.notna(test))
    if not len(both):
        return
    gap = lim_e["dev_test_gap"].to_numpy(dtype=float)[first_row[both]]
    flags, details = [], []
    for g, d, t in zip(gap.tolist(), dev[both].tolist(), test[both].tolist()):
        flags.append(t < (1.0 - g) * d)
        details.append(f"last test {t:.4f} vs last dev {d:.4f} (flag below {(1 - g) * d:.4f})")
    flagged = pd.MultiIndex.from_frame(keys.iloc[both])
    hit = flagged.get_indexer(pd.MultiIndex.from_frame(ev[["task_id", "account_id"]]))
    on = hit >= 0
    if on.any():
        ev.loc[on, "gap_flag"] = np.array(flags, dtype=bool)[hit[on]]
        ev.loc[on, "gap_detail"] = np.array(details, dtype=object)[hit[on]]


def _last_scores(scored: pd.DataFrame, group: np.ndarray, split: str) -> np.ndarray:
    """Per group, the SpecScore of its last `split` evaluation by created_at (NaN where it has none).

    A group whose latest created_at is unique and never blank takes that row; the others (ties,
    blanks) are sorted stably by created_at (blanks last) and the last row is taken."""
    out = np.full(group.max() + 1, np.nan)
    sel = (scored["split"] == split).to_numpy(dtype=bool, na_value=False)
    if not sel.any():
        return out
    sub, g = scored[sel], group[sel]
    created = sub["created_at"]
    latest = created.groupby(g).transform("max")
    at_latest = (created == latest).to_numpy()
    clear = (pd.Series(at_latest).groupby(g).transform("sum").to_numpy() == 1) & ~created.isna().groupby(g).transform(
        "any"
    ).to_numpy()
    take = clear & at_latest
    out[g[take]] = sub["specscore"].to_numpy(dtype=float)[take]
    for k in np.unique(g[~clear]):
        out[k] = float(sub[g == k].sort_values("created_at", kind="stable")["specscore"].iloc[-1])
    return out
