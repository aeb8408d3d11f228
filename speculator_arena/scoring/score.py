"""Score every stored evaluation under one protocol version, from the raw rows only.

Speeds, pass ratios and the failure rule come from the SQL views and queries of sql/; the
cluster statistics of the gates are computed here with numpy on sums pulled from DuckDB,
for all evaluations at once (docs/scoring.md gives each formula). Nothing is stored: the
result is recomputed whenever it is asked for, under whichever version is asked for.

Order of precedence for SpecScore (the first that applies decides):
1. void (the runner's void_reason, the stock engine unanswered in a probe check, or the
   device not idle before the stock engine) -> blank, "void: ...";
2. the candidate did not start, died, or offloaded -> 0;
3. still running, or a pass of either engine missing or aborted -> blank, "incomplete: ...";
4. a gate fails -> 0;
5. a gate not measured -> blank, except the memory gate on a task that is not public (the
   local CPU task has no device to sample): it is shown "not measured" and does not block;
6. otherwise (r_solo * r_team * r_busy) ** (1/3).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from speculator_arena.protocol import load_protocol
from speculator_arena.protocol.model import WORKLOADS, protocol_digest
from speculator_arena.scoring.busy import busy_windows
from speculator_arena.scoring.busy_scan import busy_windows_from_parquet
from speculator_arena.scoring.limits import protocol_limits, protocol_workloads
from speculator_arena.scoring.statistics import cluster_ratio, two_sided_fails
from speculator_arena.warehouse.schema import TABLES
from speculator_arena.warehouse.store import Warehouse, sql_statements, sql_text

GATES = ("greedy_agreement", "sampled_likelihood", "first_choice", "target_fidelity", "length", "memory",
         "answering")
PROBE_CHECKS = ("greedy_agreement", "sampled_likelihood", "target_fidelity")
ENGINES = ("candidate", "stock")
FINISHED = ("measured", "failed", "void")
KEY_FIGURES = ("ttft_p50", "ttft_p90", "ttft_p99", "tpot_p50", "tpot_p90", "tpot_p99", "cache_hit_tokens",
               "cache_hit_mean", "mean_acceptance_length", "draft_acceptance_rate", "output_tokens_per_second")


@dataclass
class Scores:
    """What score_warehouse returns (columns in docs/scoring.md)."""

    protocol_version: int
    protocol_digest: str
    evaluations: pd.DataFrame
    passes: pd.DataFrame
    gates: pd.DataFrame
    figures: pd.DataFrame
    notes: list[str] = field(default_factory=list)


_TIMING = bool(os.environ.get("ARENA_SCORE_TIMING"))


def _tick(label: str, t0: list) -> None:
    """With ARENA_SCORE_TIMING=1, print how long each step took (the benchmark's breakdown)."""
    if _TIMING:
        import sys
        import time

        now = time.perf_counter()
        if t0:
            print(f"  score step {label}: {now - t0[0]:.2f} s", file=sys.stderr, flush=True)
        t0[:] = [now]


def _q(con, name: str, ids, t0=None) -> pd.DataFrame:
    df = con.execute(sql_text(name), {"ids": ids}).df()
    if t0 is not None:
        _tick(name, t0)
    return df


# Read once per scoring into memory: each raw_* view otherwise re-reads the footer of every
# evaluation's Parquet part at every query (union_by_name), which at 1,000 evaluations costs
# more than the queries themselves. `replies` (text) is never read; `requests` is read once, by
# the Parquet scan of scoring/busy_scan.py, which returns both the busy windows and the scalar
# columns of the staged requests every query reads (sql/staged_requests_cached.sql is the same
# rows from the view, used for the evaluations the scan hands back).
_CACHED = ("passes", "evaluations", "metrics", "memory", "probe_greedy", "probe_scored", "probe_fidelity",
           "engine_starts")


def _open(wh: Warehouse, after_passes=None):
    """An in-memory DuckDB with the warehouse's views, the small raw tables read into memory.

    The same views as `wh.connect(read_only=True)` (temporary ones), except that raw_<table>
    of the small tables is a view over an in-memory copy read once: binding a union_by_name view
    over the Parquet reads every footer, and a copy made from such a view reads them again.
    `after_passes(con)` runs as soon as the pass rows are in (the busy scan starts there).
    """
    import duckdb

    con = duckdb.connect(":memory:")
    con.execute("SET parquet_metadata_cache = true")
    con.execute("SET enable_progress_bar = false")
    threads = os.environ.get("ARENA_DUCKDB_THREADS")
    if threads:
        con.execute("SET threads = " + str(int(threads)))
    for table in TABLES:
        if table in _CACHED:
            # identifiers from our own schema list, never user input
            con.execute(f"CREATE OR REPLACE TEMP TABLE cached_{table} AS {wh.raw_select(table)}")
            con.execute(f"CREATE OR REPLACE TEMP VIEW raw_{table} AS SELECT * FROM cached_{table}")
            if table == "passes" and after_passes is not None:
                after_passes(con)
    for table in TABLES:
        if table not in _CACHED:
            con.execute(f"CREATE OR REPLACE TEMP VIEW raw_{table} AS {wh.raw_select(table)}")
    for stmt in sql_statements():
        con.execute(stmt.replace("CREATE OR REPLACE VIEW", "CREATE OR REPLACE TEMPORARY VIEW"))
    return con


def _threads(con) -> int:
    # fetchall, not fetchone: an unfinished result would block the connection's next statement
    return max(1, int(con.execute("SELECT current_setting('threads')").fetchall()[0][0]))


def _request_partitions(wh: Warehouse, ids) -> dict:
    """{evaluation_id: its request Parquet parts} (the files the view raw_requests reads)."""
    root = wh.raw / "requests"
    wanted = None if ids is None else set(ids)
    partitions = {}
    if root.exists():
        for d in os.scandir(root):
            if not (d.is_dir() and d.name.startswith("evaluation_id=")):
                continue
            eid = d.name.split("=", 1)[1]
            if wanted is not None and eid not in wanted:
                continue
            files = sorted(f.path for f in os.scandir(d.path)
                           if f.name.endswith(".parquet") and not f.name.startswith(".tmp-"))
            if files:
                partitions[eid] = files
    return partitions


def _busy_start(con, wh: Warehouse, ids, pool: ThreadPoolExecutor):
    """Start the Parquet scan of the busy windows in `pool`; DuckDB runs the other queries
    meanwhile (both release the GIL), and `_busy_finish` collects it."""
    passes = con.sql("SELECT evaluation_id, pass_id, engine, lanes, ends_at, grace_ends_at FROM raw_passes").to_arrow_table()
    partitions, threads = _request_partitions(wh, ids), _threads(con)

    def scan():
        import time

        t = time.perf_counter()
        out = busy_windows_from_parquet(partitions, passes, threads, staged=True)
        if _TIMING:
            import sys

            print(f"  score step (in its thread) busy-window Parquet scan of {len(partitions)} evaluations: "
                  f"{time.perf_counter() - t:.2f} s", file=sys.stderr, flush=True)
        return out

    return pool.submit(scan)


def _busy_finish(con, future):
    """(busy windows, staged requests of the scanned evaluations, evaluations handed back):
    the scan's results, plus the SQL path's windows for the evaluations it handed back."""
    fast, to_sql, staged = future.result()
    if not to_sql:
        return fast, staged, to_sql
    slow = busy_windows(con.sql(sql_text("busy_inputs.sql"), params={"ids": to_sql}).to_arrow_table())
    return (pd.concat([fast, slow], ignore_index=True) if len(fast) else slow), staged, to_sql


def _busy(con, wh: Warehouse, ids) -> pd.DataFrame:  # (tests call it on an open connection)
    """Busy windows of the evaluations `ids` (all: None), as the scorer computes them."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return _busy_finish(con, _busy_start(con, wh, ids, pool))[0]


def _stage_requests(con, staged, to_sql) -> None:
    """`staged_requests` for every query that follows: the scan's rows (an Arrow table DuckDB
    reads in place, no copy), plus the SQL view's rows (sql/staged_requests_cached.sql) of the
    evaluations it handed back."""
    parts = []
    if to_sql or staged is None:
        con.execute(sql_text("staged_requests_cached.sql"), {"ids": to_sql})
        parts.append("SELECT * FROM cached_staged_requests")
    if staged is not None:
        con.register("staged_scan", staged)
        parts.append("SELECT * FROM staged_scan")
    con.execute("CREATE OR REPLACE TEMP VIEW staged_requests AS " + " UNION ALL ".join(parts))


def score_warehouse(warehouse, protocol_version: int | None = None, evaluation_ids=None) -> Scores:
    """Score the stored evaluations (all, or `evaluation_ids`) under `protocol_version` (latest)."""
    wh = warehouse if isinstance(warehouse, Warehouse) else Warehouse(warehouse)
    proto = load_protocol(protocol_version)
    digest = protocol_digest(proto.version)
    ids = None if evaluation_ids is None else [str(i) for i in evaluation_ids]
    t0: list = []
    _tick("start", t0)
    pool = ThreadPoolExecutor(max_workers=1)
    started = []
    try:
        con = _open(wh, after_passes=lambda c: started.append(_busy_start(c, wh, ids, pool)))
    except BaseException:
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    _tick("read small tables (busy scan starts after the passes)", t0)
    busy_future = started[0]
    try:
        limits = protocol_limits(proto)
        con.register("protocol_limits", limits)
        con.register("protocol_workloads", protocol_workloads(proto))
        ev = con.execute(
            "SELECT * FROM raw_evaluations WHERE $ids IS NULL OR list_contains($ids, evaluation_id) "
            "ORDER BY created_at, evaluation_id", {"ids": ids}).df()
        ev = ev.drop_duplicates("evaluation_id", keep="last").reset_index(drop=True)
        greedy = _q(con, "gate_greedy.sql", ids, t0)
        scored = _q(con, "gate_scored.sql", ids, t0)
        fidelity = _q(con, "gate_fidelity.sql", ids, t0)
        memory = _q(con, "gate_memory.sql", ids, t0)
        answering = _q(con, "gate_answering.sql", ids, t0)
        starts = _q(con, "engine_starts_summary.sql", ids, t0)
        fig_wall = _q(con, "figures_wall.sql", ids, t0)
        fig_acc = _q(con, "figures_acceptance.sql", ids, t0)
        engine_passes = con.execute(
            "SELECT evaluation_id, engine, workload, count(*) FILTER (WHERE status = 'complete') AS complete "
            "FROM raw_passes WHERE pass_id NOT LIKE 'warmup%' AND ($ids IS NULL OR list_contains($ids, evaluation_id)) "
            "GROUP BY ALL", {"ids": ids}).df()
        _tick("remaining queries", t0)
        busy, staged, to_sql = _busy_finish(con, busy_future)
        _tick("waiting for the Parquet scan (busy windows, staged requests)", t0)
        _stage_requests(con, staged, to_sql)
        _tick("staged requests registered", t0)
        length = _q(con, "gate_length.sql", ids, t0)
        fig_req = _q(con, "figures_requests.sql", ids, t0)
        con.register("busy_windows", busy)
        passes = _q(con, "pass_ratios.sql", ids, t0)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        con.close()
    out = _assemble(proto, digest, limits, ev, passes, greedy, scored, fidelity, length, memory, answering, starts,
                    fig_req, fig_wall, fig_acc, engine_passes)
    _tick("gates, figures, SpecScore (pandas)", t0)
    return out


class _At:
    """`df.at[row, col]` for many scalar reads: per-column numpy arrays and a dict of row positions.

    Why: pandas' `.at` costs about 25 us a call, and assembling 1,000 evaluations makes tens of
    thousands of them. The values are the ones `.at` returns (what the column's `to_numpy()`
    holds); a frame with a repeated index is read through `.at` itself.
    """

    def __init__(self, df: pd.DataFrame):
        self._df = df
        self._pos = {k: i for i, k in enumerate(df.index)} if df.index.is_unique else None
        self._cols: dict = {}

    def __getitem__(self, key):
        row, col = key
        if self._pos is None:
            return self._df.at[row, col]
        arr = self._cols.get(col)
        if arr is None:
            arr = self._cols[col] = self._df[col].to_numpy()
        return arr[self._pos[row]]


def _assemble(proto, digest, limits, ev, passes, greedy, scored, fidelity, length, memory, answering, starts,
              fig_req, fig_wall, fig_acc, engine_passes) -> Scores:
    lim = limits.set_index("task_id")
    ev = ev.copy()
    ev["run_protocol_version"] = ev["protocol_version"]
    ev["protocol_version"] = proto.version
    ev["in_protocol"] = ev["task_id"].isin(lim.index)
    lim_e = lim.reindex(ev["task_id"]).reset_index(drop=True)
    lim_e.index = ev.index
    lim_at = _At(lim_e)
    eidx = pd.Index(ev["evaluation_id"])

    # ---- completeness ------------------------------------------------------------------
    passes = passes.copy()
    missing = passes[passes["missing_reason"].notna()]
    missing_by_eval = missing.groupby("evaluation_id")["pass_id"].apply(lambda s: ", ".join(s))
    running = ~ev["status"].isin(FINISHED)
    reasons = []
    for eid, status, is_running, known in zip(ev["evaluation_id"], ev["status"], running, ev["in_protocol"]):
        if not known:
            reasons.append(f"task not in protocol v{proto.version}")
        elif is_running:
            reasons.append(f"incomplete: evaluation is {status}")
        elif eid in missing_by_eval.index:
            reasons.append(f"incomplete: passes missing or aborted ({missing_by_eval[eid]})")
        else:
            reasons.append(None)
    incomplete_reason = pd.Series(reasons, index=ev.index, dtype=object)
    ev["complete"] = incomplete_reason.isna()

    # ---- workload ratios: median over passes; blank when any pass is blank ----------------
    if len(passes):
        g = passes.groupby(["evaluation_id", "workload"])
        wr = pd.DataFrame({
            "median": g["ratio"].median(),
            "n": g["ratio"].size(),
            "valid": g["ratio"].count(),
            "reason": g["ratio_reason"].agg(lambda s: "; ".join(sorted({x for x in s if isinstance(x, str)}))),
        })
    else:
        wr = pd.DataFrame(columns=["median", "n", "valid", "reason"],
                          index=pd.MultiIndex.from_tuples([], names=["evaluation_id", "workload"]))
    for w in WORKLOADS:
        sub = wr.xs(w, level="workload") if len(wr) else wr.iloc[:0]
        ok = sub["valid"] == sub["n"]
        ev[f"r_{w}"] = ev["evaluation_id"].map(sub["median"].where(ok))
        reason = sub["reason"].where(~ok)
        ev[f"r_{w}_reason"] = ev["evaluation_id"].map(reason)
        ev.loc[ev[f"r_{w}"].isna() & ev[f"r_{w}_reason"].isna(), f"r_{w}_reason"] = "no pass rows"

    # ---- gates ---------------------------------------------------------------------------
    gates = []
    incomplete_by_id = pd.Series(incomplete_reason.values, index=eidx)

    def add(eid, gate, stat, se, low, high, limit, verdict, detail):
        gates.append((eid, gate, stat, se, low, high, limit, verdict, detail))

    # 1. greedy agreement
    if len(greedy):
        greedy = greedy.assign(a=greedy["common_prefix"] / np.maximum(greedy["len_candidate"], greedy["len_stock"]))
        ga = greedy.groupby("evaluation_id")["a"].agg(["mean", "size"])
    else:
        ga = pd.DataFrame(columns=["mean", "size"])
    for i, row in ev.iterrows():
        eid = row["evaluation_id"]
        floor = lim_at[i, "greedy_floor"]
        if eid not in ga.index:
            add(eid, "greedy_agreement", np.nan, np.nan, np.nan, np.nan, floor, "not measured",
                "no greedy probe prompt answered by both engines")
            continue
        m, n = ga.at[eid, "mean"], ga.at[eid, "size"]
        if floor is None or pd.isna(floor):
            add(eid, "greedy_agreement", m, np.nan, np.nan, np.nan, np.nan, "pass", f"{n} prompts; no floor in this task")
        else:
            add(eid, "greedy_agreement", m, np.nan, np.nan, np.nan, floor, "pass" if m >= floor else "fail",
                f"{n} prompts; mean agreement {'>=' if m >= floor else '<'} floor {floor}")

    # 2-3. sampled likelihood and first-choice share (replies as clusters)
    stats, stats_at = {}, {}
    if len(scored):
        s = scored.astype({"s": float, "x": float, "n": float})
        s = s.assign(ss=s.s * s.s, sn=s.s * s.n, nn=s.n * s.n, xx=s.x * s.x, xn=s.x * s.n)
        agg = s.groupby(["evaluation_id", "reply_engine"]).agg(
            s=("s", "sum"), x=("x", "sum"), n=("n", "sum"), ss=("ss", "sum"), sn=("sn", "sum"),
            nn=("nn", "sum"), xx=("xx", "sum"), xn=("xn", "sum"), R=("n", "size"))
        L, seL = cluster_ratio(agg.s, agg.n, agg.ss, agg.sn, agg.nn, agg.R)
        F, seF = cluster_ratio(agg.x, agg.n, agg.xx, agg.xn, agg.nn, agg.R)
        agg = agg.assign(L=L, seL=seL, F=F, seF=seF)
        stats = {k: agg.xs(k, level="reply_engine") for k in ENGINES if k in agg.index.get_level_values(1)}
    stats_at = {k: _At(v) for k, v in stats.items()}
    for gate, est, se_col, bound_col in (("sampled_likelihood", "L", "seL", "likelihood_bound"),
                                         ("first_choice", "F", "seF", "first_choice_bound")):
        c, st = stats.get("candidate"), stats.get("stock")
        c_at, st_at = stats_at.get("candidate"), stats_at.get("stock")
        for i, row in ev.iterrows():
            eid = row["evaluation_id"]
            bound, z = lim_at[i, bound_col], lim_at[i, "z"]
            if c is None or st is None or eid not in c.index or eid not in st.index:
                add(eid, gate, np.nan, np.nan, np.nan, np.nan, bound, "not measured",
                    "scored replies of both engines are needed")
                continue
            d = c_at[eid, est] - st_at[eid, est]
            se = float(np.hypot(c_at[eid, se_col], st_at[eid, se_col]))
            if np.isnan(se):
                add(eid, gate, d, np.nan, np.nan, np.nan, bound, "not measured", "fewer than 2 scored replies per engine")
                continue
            fails, low, high = two_sided_fails(d, se, bound, z)
            add(eid, gate, d, se, low, high, bound, "fail" if fails else "pass",
                f"candidate {c_at[eid, est]:.5f} ({int(c_at[eid, 'R'])} replies), stock {st_at[eid, est]:.5f} "
                f"({int(st_at[eid, 'R'])} replies); fails when CI lies beyond +-{bound}")

    # 4. target fidelity
    if len(fidelity):
        fa = fidelity.groupby("evaluation_id").agg(abs_diff=("abs_diff", "sum"), n=("n", "sum"),
                                                    texts=("n", "size"), misaligned=("aligned", lambda a: int((~a.astype(bool)).sum())))
    else:
        fa = pd.DataFrame(columns=["abs_diff", "n", "texts", "misaligned"])
    fa_at = _At(fa)
    for i, row in ev.iterrows():
        eid = row["evaluation_id"]
        ceil = lim_at[i, "fidelity_ceiling"]
        if eid not in fa.index or fa_at[eid, "n"] == 0:
            add(eid, "target_fidelity", np.nan, np.nan, np.nan, np.nan, ceil, "not measured",
                "no fixed text scored by both engines")
        elif fa_at[eid, "misaligned"]:
            add(eid, "target_fidelity", np.nan, np.nan, np.nan, np.nan, ceil, "not measured",
                f"{fa_at[eid, 'misaligned']} texts tokenized differently by the two engines")
        else:
            v = fa_at[eid, "abs_diff"] / fa_at[eid, "n"]
            add(eid, "target_fidelity", v, np.nan, np.nan, np.nan, ceil, "pass" if v <= ceil else "fail",
                f"{int(fa_at[eid, 'n'])} tokens of {int(fa_at[eid, 'texts'])} texts")

    # 5. length (delta method, pairs as clusters)
    la = length.set_index("evaluation_id") if len(length) else pd.DataFrame(
        columns=["pairs", "sum_c", "sum_s", "sum_cc", "sum_ss", "sum_cs"])
    la_at = _At(la)
    for i, row in ev.iterrows():
        eid = row["evaluation_id"]
        bound, z = lim_at[i, "length_bound"], lim_at[i, "z"]
        if not ev.at[i, "complete"]:
            add(eid, "length", np.nan, np.nan, np.nan, np.nan, bound, "not measured", incomplete_reason[i])
            continue
        if eid not in la.index or la_at[eid, "pairs"] < 2 or la_at[eid, "sum_s"] <= 0:
            add(eid, "length", np.nan, np.nan, np.nan, np.nan, bound, "not measured", "fewer than 2 paired requests")
            continue
        r = la.loc[eid]
        ratio, se = cluster_ratio(r.sum_c, r.sum_s, r.sum_cc, r.sum_cs, r.sum_ss, r.pairs)
        delta = float(ratio) - 1.0
        fails, low, high = two_sided_fails(delta, float(se), bound, z)
        add(eid, "length", delta, float(se), low, high, bound, "fail" if fails else "pass",
            f"{int(r.pairs)} pairs; mean length ratio {float(ratio):.4f}")

    # 6. memory (the candidate's peak; the stock engine's is a figure)
    mem = memory.set_index(["evaluation_id", "engine"]) if len(memory) else pd.DataFrame()
    mem_at = _At(mem)
    for i, row in ev.iterrows():
        eid = row["evaluation_id"]
        util, slack = lim_at[i, "gpu_memory_utilization"], lim_at[i, "memory_slack_bytes"]
        if len(mem) == 0 or (eid, "candidate") not in mem.index:
            add(eid, "memory", np.nan, np.nan, np.nan, np.nan, np.nan, "not measured",
                "no device memory samples (no GPU to sample)"
                + ("" if bool(lim_at[i, "public"]) else "; does not block on this non-public task"))
            continue
        peak, total = mem_at[(eid, "candidate"), "peak_bytes"], mem_at[(eid, "candidate"), "total_bytes"]
        allowed = util * total + slack
        add(eid, "memory", float(peak), np.nan, np.nan, np.nan, float(allowed), "pass" if peak <= allowed else "fail",
            f"peak {peak / 2**30:.2f} GiB of {allowed / 2**30:.2f} GiB allowed ({util} x {total / 2**30:.2f} GiB + "
            f"{slack / 2**30:.1f} GiB)")

    # 7. answering; the stock engine's share decides void
    stock_void: dict[str, str] = {}
    ans = answering.assign(share=answering["unanswered"] / answering["requests"].where(answering["requests"] > 0)) \
        if len(answering) else pd.DataFrame(columns=["evaluation_id", "probe_check", "engine", "requests", "unanswered", "share"])
    # each evaluation's rows, in their order (what ans[ans.evaluation_id == eid] selects)
    ans_by_eval = {k: g for k, g in ans.groupby("evaluation_id", sort=False)} if len(ans) else {}
    ans_none = ans.iloc[:0]
    for i, row in ev.iterrows():
        eid = row["evaluation_id"]
        mx = lim_at[i, "max_unanswered_share"]
        a = ans_by_eval.get(eid, ans_none) if len(ans) else ans
        if len(a) == 0:
            add(eid, "answering", np.nan, np.nan, np.nan, np.nan, mx, "not measured", "no probe check rows")
            continue
        st = a[(a["engine"] == "stock") & (a["share"] > mx)]
        if len(st):
            stock_void[eid] = "stock engine left " + ", ".join(
                f"{r.unanswered}/{r.requests} of {r.probe_check}" for r in st.itertuples()) + " unanswered"
        c = a[a["engine"] == "candidate"]
        worst = float(c["share"].max()) if len(c) else np.nan
        bad = c[c["share"] > mx]
        checks_seen = set(c["probe_check"])
        if len(bad):
            add(eid, "answering", worst, np.nan, np.nan, np.nan, mx, "fail",
                "candidate left " + ", ".join(f"{r.unanswered}/{r.requests} of {r.probe_check}" for r in bad.itertuples())
                + " unanswered")
        elif not checks_seen:
            add(eid, "answering", np.nan, np.nan, np.nan, np.nan, mx, "not measured", "no probe check asked the candidate")
        else:
            add(eid, "answering", worst, np.nan, np.nan, np.nan, mx, "pass",
                "worst candidate share unanswered over " + ", ".join(sorted(checks_seen)))

    gates_df = pd.DataFrame(gates, columns=["evaluation_id", "gate", "statistic", "se", "ci_low", "ci_high", "limit",
                                            "verdict", "detail"])
    for col in ("statistic", "se", "ci_low", "ci_high", "limit"):
        gates_df[col] = pd.to_numeric(gates_df[col], errors="coerce")

    # ---- void, candidate failures, SpecScore ---------------------------------------------
    st_idx = starts.set_index(["evaluation_id", "engine"]) if len(starts) else pd.DataFrame()
    starts_at = _At(st_idx)

    def start_flag(eid, engine, col):
        if len(st_idx) == 0 or (eid, engine) not in st_idx.index:
            return False
        v = starts_at[(eid, engine), col]
        return False if pd.isna(v) else bool(v)

    verdicts = gates_df.pivot_table(index="evaluation_id", columns="gate", values="verdict", aggfunc="first") \
        if len(gates_df) else pd.DataFrame()
    specscore, reason, void_r, failed_g, nm_g, gp = [], [], [], [], [], []
    for i, row in ev.iterrows():
        eid = row["evaluation_id"]
        v = verdicts.loc[eid] if eid in verdicts.index else pd.Series(dtype=object)
        fails = [gname for gname in GATES if v.get(gname) == "fail"]
        public = bool(lim_at[i, "public"]) if ev.at[i, "in_protocol"] else True
        nm = [gname for gname in GATES if v.get(gname) == "not measured"
              and not (gname == "memory" and not public)]
        failed_g.append(",".join(fails))
        nm_g.append(",".join(gname for gname in GATES if v.get(gname) == "not measured"))
        vr = None
        if row["status"] == "void":
            vr = row["void_reason"] if isinstance(row["void_reason"], str) and row["void_reason"] else "voided by the runner"
        elif stock_void.get(eid):
            vr = stock_void[eid]
        elif start_flag(eid, "candidate", "device_not_idle"):
            vr = "device did not come back idle before the stock engine"
        void_r.append(vr)
        cand_fail = row.get("failure_reason") if isinstance(row.get("failure_reason"), str) else None
        if cand_fail is None and start_flag(eid, "candidate", "died"):
            cand_fail = "candidate engine died"
        if cand_fail is None and start_flag(eid, "candidate", "offload"):
            cand_fail = "offload in the candidate's start-up log (" + str(starts_at[(eid, "candidate"), "offload_evidence"]) + ")"
        if vr is not None:
            specscore.append(np.nan); reason.append("void: " + vr); gp.append(None)
        elif cand_fail is not None:
            specscore.append(0.0); reason.append("candidate failed: " + cand_fail); gp.append(None)
        elif incomplete_reason[i] is not None:
            specscore.append(np.nan); reason.append(incomplete_reason[i]); gp.append(None)
        elif fails:
            specscore.append(0.0); reason.append("gate failed: " + ", ".join(fails)); gp.append(False)
        elif nm:
            specscore.append(np.nan); reason.append("gate not measured: " + ", ".join(nm)); gp.append(None)
        else:
            rs = [row_r for row_r in (ev.at[i, f"r_{w}"] for w in WORKLOADS)]
            if any(pd.isna(x) for x in rs):
                specscore.append(np.nan)
                reason.append("; ".join(f"r_{w}: {ev.at[i, f'r_{w}_reason']}" for w in WORKLOADS if pd.isna(ev.at[i, f"r_{w}"])))
            else:
                specscore.append(float(np.prod(rs)) ** (1.0 / 3.0)); reason.append(None)
            gp.append(True)
    ev["void"] = [x is not None for x in void_r]
    ev["void_reason"] = [x if x is not None else ev.at[i, "void_reason"] for i, x in zip(ev.index, void_r)]
    ev["specscore"] = pd.array(specscore, dtype=float)
    ev["specscore_reason"] = reason
    ev["gates_pass"] = pd.array(gp, dtype="boolean")
    ev["failed_gates"] = failed_g
    ev["not_measured_gates"] = nm_g

    figures = _figures(ev, incomplete_reason, fig_req, fig_wall, fig_acc, engine_passes, memory, lim_e)
    _key_figures(ev, figures)
    _gap_flags(ev, lim_e)

    passes = passes.drop(columns=["task_id"]).reset_index(drop=True)
    return Scores(proto.version, digest, ev.reset_index(drop=True), passes, gates_df, figures)


def _figures(ev, incomplete_reason, fig_req, fig_wall, fig_acc, engine_passes, memory, lim_e) -> pd.DataFrame:
    """Shown figures, long format; a figure without every row it needs is NaN with its reason."""
    out = []
    inc = {e: (r if isinstance(r, str) else None) for e, r in zip(ev["evaluation_id"], incomplete_reason)}
    expected_passes = dict(zip(ev["evaluation_id"], lim_e["passes"]))
    ep = engine_passes.set_index(["evaluation_id", "engine", "workload"])["complete"] if len(engine_passes) else {}
    if len(engine_passes) and ep.index.is_unique:
        ep = dict(zip(ep.index, ep.to_numpy()))     # the same values, without pandas' lookup per call
    req = fig_req.set_index(["evaluation_id", "engine", "workload"]) if len(fig_req) else pd.DataFrame()
    wall = fig_wall.set_index(["evaluation_id", "engine"]) if len(fig_wall) else pd.DataFrame()
    names = ("ttft_p50", "ttft_p90", "ttft_p99", "tpot_p50", "tpot_p90", "tpot_p99", "latency_mean", "latency_p50",
             "latency_p95", "generated_tokens", "cache_hit_tokens", "cache_hit_mean", "tokens_per_chunk")
    acc = {}
    for r in fig_acc.itertuples():
        key = (r.evaluation_id, r.engine)
        for short in ("num_drafts", "num_draft_tokens", "num_accepted_tokens"):
            if r.name.startswith(f"vllm:spec_decode_{short}"):
                d = acc.setdefault(key, {})
                d[short] = (d.get(short, (0.0, 0, 0))[0] + (r.delta if pd.notna(r.delta) else 0.0),
                            d.get(short, (0.0, 0, 0))[1] + int(r.passes), d.get(short, (0.0, 0, 0))[2] + int(r.passes_missing_side))
    mem = memory.set_index(["evaluation_id", "engine"]) if len(memory) else pd.DataFrame()
    mem_at, req_at, wall_at = _At(mem), _At(req), _At(wall)
    req_keys = set(req.index) if len(req) else set()
    wall_keys = set(wall.index) if len(wall) else set()
    for eid in ev["evaluation_id"]:
        n_exp = expected_passes.get(eid)
        for engine in ENGINES:
            eng_missing = None
            for workload in (*WORKLOADS, "all"):
                if workload == "all":
                    miss = [w for w in WORKLOADS if _complete(ep, eid, engine, w) < (n_exp or 0)]
                else:
                    miss = [workload] if _complete(ep, eid, engine, workload) < (n_exp or 0) else []
                why = inc[eid] if (inc[eid] and inc[eid].startswith("incomplete: evaluation")) else None
                if why is None and miss:
                    why = f"{engine} passes missing or aborted in {', '.join(miss)}"
                if inc[eid] and inc[eid].startswith("task not"):
                    why = inc[eid]
                if workload == "all":
                    eng_missing = why
                row = _Row(req_at, (eid, engine, workload)) if (eid, engine, workload) in req_keys else None
                for name in names:
                    if why:
                        out.append((eid, engine, workload, name, np.nan, why)); continue
                    if row is None:
                        out.append((eid, engine, workload, name, np.nan, "no counted requests")); continue
                    r_why = None
                    if name.startswith(("ttft", "tpot", "latency")) and row["timing_missing"] > 0:
                        r_why = f"{int(row['timing_missing'])} counted requests lack chunk times"
                    if name.startswith("cache") and row["usage_missing"] > 0:
                        r_why = f"{int(row['usage_missing'])} counted requests lack usage"
                    val = row[name]
                    if r_why is None and pd.isna(val):
                        r_why = "no request with the inputs of this figure"
                    out.append((eid, engine, workload, name, np.nan if r_why else float(val), r_why))
            # engine-level figures (workload 'all')
            why = eng_missing
            w = _Row(wall_at, (eid, engine)) if (eid, engine) in wall_keys else None
            gen = req_at[(eid, engine, "all"), "generated_tokens"] if (eid, engine, "all") in req_keys else np.nan
            if why:
                out.append((eid, engine, "all", "wall_seconds", np.nan, why))
                out.append((eid, engine, "all", "output_tokens_per_second", np.nan, why))
            elif w is None or w["passes_incomplete"] > 0:
                out.append((eid, engine, "all", "wall_seconds", np.nan, "a pass lacks its finish time"))
                out.append((eid, engine, "all", "output_tokens_per_second", np.nan, "a pass lacks its finish time"))
            else:
                out.append((eid, engine, "all", "wall_seconds", float(w["wall_seconds"]), None))
                tps = float(gen) / float(w["wall_seconds"]) if pd.notna(gen) and w["wall_seconds"] > 0 else np.nan
                out.append((eid, engine, "all", "output_tokens_per_second", tps,
                            None if pd.notna(tps) else "no counted tokens"))
            a = acc.get((eid, engine))
            total_passes = len(WORKLOADS) * (n_exp or 0)
            if why:
                a_why = why
            elif not a or "num_drafts" not in a or "num_accepted_tokens" not in a:
                a_why = "the engine reports no vllm:spec_decode_* counters"
            elif a["num_drafts"][2] > 0 or a["num_drafts"][1] < total_passes or a["num_accepted_tokens"][1] < total_passes:
                a_why = "counters not read before and after every pass"
            elif a["num_drafts"][0] <= 0:
                a_why = "no drafts were proposed"
            else:
                a_why = None
            if a_why:
                out.append((eid, engine, "all", "mean_acceptance_length", np.nan, a_why))
            else:
                out.append((eid, engine, "all", "mean_acceptance_length", 1.0 + a["num_accepted_tokens"][0] / a["num_drafts"][0], None))
            if a_why is None and "num_draft_tokens" in a and a["num_draft_tokens"][0] > 0:
                out.append((eid, engine, "all", "draft_acceptance_rate",
                            a["num_accepted_tokens"][0] / a["num_draft_tokens"][0], None))
            else:
                out.append((eid, engine, "all", "draft_acceptance_rate", np.nan, a_why or "no draft-token counter"))
            if len(mem) and (eid, engine) in mem.index:
                out.append((eid, engine, "all", "memory_peak_bytes", float(mem_at[(eid, engine), "peak_bytes"]), None))
            else:
                out.append((eid, engine, "all", "memory_peak_bytes", np.nan, "no device memory samples"))
    return pd.DataFrame(out, columns=["evaluation_id", "engine", "workload", "figure", "value", "reason"])


class _Row:
    """One row of a frame read cell by cell through `_At` (instead of building a Series per row)."""

    __slots__ = ("_at", "_key")

    def __init__(self, at: _At, key):
        self._at, self._key = at, key

    def __getitem__(self, col):
        return self._at[self._key, col]


def _complete(ep, eid, engine, workload) -> int:
    try:
        return int(ep[(eid, engine, workload)])
    except (KeyError, TypeError):
        return 0


def _key_figures(ev: pd.DataFrame, figures: pd.DataFrame) -> None:
    """Engine-level key figures as columns of the evaluations frame (`candidate_ttft_p50`, ...)."""
    f = figures[(figures["workload"] == "all") & figures["figure"].isin(KEY_FIGURES)]
    wide = f.pivot_table(index="evaluation_id", columns=["engine", "figure"], values="value", aggfunc="first", dropna=False)
    for engine in ENGINES:
        for name in KEY_FIGURES:
            col = (engine, name)
            ev[f"{engine}_{name}"] = ev["evaluation_id"].map(wide[col]) if col in wide.columns else np.nan


def _gap_flags(ev: pd.DataFrame, lim_e: pd.DataFrame) -> None:
    """Per task and account: last scored test SpecScore < (1 - gap) x last scored dev SpecScore."""
    ev["gap_flag"] = pd.array([pd.NA] * len(ev), dtype="boolean")
    ev["gap_detail"] = None
    scored = ev[ev["specscore"].notna()]
    for (task, acct), grp in scored.groupby(["task_id", "account_id"]):
        dev = grp[grp["split"] == "dev"].sort_values("created_at")
        test = grp[grp["split"] == "test"].sort_values("created_at")
        if dev.empty or test.empty:
            continue
        gap = float(lim_e.loc[grp.index[0], "dev_test_gap"])
        d, t = float(dev["specscore"].iloc[-1]), float(test["specscore"].iloc[-1])
        flag = t < (1.0 - gap) * d
        sel = (ev["task_id"] == task) & (ev["account_id"] == acct)
        ev.loc[sel, "gap_flag"] = flag
        ev.loc[sel, "gap_detail"] = f"last test {t:.4f} vs last dev {d:.4f} (flag below {(1 - gap) * d:.4f})"
