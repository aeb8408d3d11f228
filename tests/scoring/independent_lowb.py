"""An independent recomputation of LowBArena scores from the raw Parquet files and the YAML alone.

Why it exists: the scorer (speculator_arena.scoring.lowb) is SQL over an in-memory copy plus a
vectorized KL; testing it against itself proves nothing. This module reads what an outside analyst
has: the Parquet parts under `$ARENA_HOME/raw/<table>/evaluation_id=<id>/` and the LowBArena
protocol version's YAML as plain data. It imports nothing of `speculator_arena`, and computes each
figure the plain way: request by request, position by position, a dictionary per distribution,
running-at-once counted at every start instant rather than by a sweep, tensors classified by name
one at a time. The definitions are the ones the scorer's docstrings state (the arena's reading of
../shared/spec/lowbarena-rules-protocol-28.txt).
"""

from __future__ import annotations

import json
import math
import os
import re
import statistics
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import yaml

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "speculator_arena" / "protocol" / "lowb_versions"


# ---- inputs ---------------------------------------------------------------------------------


def read_raw(home: Path, table: str, evaluation_id: str | None = None) -> pd.DataFrame:
    """Every stored part of a table (of one evaluation when given): an empty frame when none."""
    root = Path(home) / "raw" / table
    pattern = f"evaluation_id={evaluation_id}/*.parquet" if evaluation_id else "*/*.parquet"
    files = sorted(f for f in root.glob(pattern) if not f.name.startswith("."))
    if not files:
        return pd.DataFrame()
    frames = []
    for f in files:
        t = pq.read_table(f, partitioning=None).to_pandas()
        t["evaluation_id"] = f.parent.name.split("=", 1)[1]
        frames.append(t)
    return pd.concat(frames, ignore_index=True)


def document(version: int, home: Path) -> dict:
    """LowBArena's pN.yaml: shipped, published under the home, or staged (lowb-pN.yaml)."""
    places = [SHIPPED / f"p{version}.yaml", Path(home) / "protocol" / "lowb_versions" / f"p{version}.yaml"]
    if os.environ.get("ARENA_PROTOCOL_DIR"):
        places.append(Path(os.environ["ARENA_PROTOCOL_DIR"]) / f"lowb-p{version}.yaml")
    for f in places:
        if f.is_file():
            return yaml.safe_load(f.read_text())
    raise FileNotFoundError(f"LowBArena p{version} not in {places}")


def all_task_ids(home: Path) -> set[str]:
    dirs = [(SHIPPED, r"p(\d+)\.yaml"), (Path(home) / "protocol" / "lowb_versions", r"p(\d+)\.yaml")]
    if os.environ.get("ARENA_PROTOCOL_DIR"):
        dirs.append((Path(os.environ["ARENA_PROTOCOL_DIR"]), r"lowb-p(\d+)\.yaml"))
    tasks = set()
    for d, pattern in dirs:
        for f in d.glob("*.yaml") if d.is_dir() else []:
            if re.fullmatch(pattern, f.name):
                tasks |= set(yaml.safe_load(f.read_text())["tasks"])
    return tasks


# ---- figures --------------------------------------------------------------------------------


def speedup(req: pd.DataFrame, workload: str, single: bool) -> float:
    rows = {e: req[(req.engine == e) & (req.workload == workload)] for e in ("candidate", "stock")}
    if any(r.empty for r in rows.values()):
        return math.nan
    if (~rows["candidate"]["ok"].fillna(False).astype(bool)).any():
        return 0.0
    rate = {}
    for e, r in rows.items():
        ok = r[r["ok"].fillna(False).astype(bool)]
        if single:
            secs = sum(float(x.finished_at) - float(x.first_token_at) for x in ok.itertuples())
            toks = sum(int(x.output_tokens) - 1 for x in ok.itertuples())
            if toks <= 0 or secs <= 0:
                return math.nan
            rate[e] = secs / toks
        else:
            secs = 0.0
            for _, p in r.groupby("pass_index"):
                secs += float(p["finished_at"].max()) - float(p["sent_at"].min())
            toks = sum(int(x) for x in ok["output_tokens"])
            if toks <= 0 or secs <= 0:
                return math.nan
            rate[e] = toks / secs
    return rate["stock"] / rate["candidate"] if single else rate["candidate"] / rate["stock"]


def most_running(req: pd.DataFrame, engine: str, workload: str) -> float:
    """The most requests running at once: at each start instant, count [first_token_at, finished_at) holding it."""
    best = math.nan
    r = req[(req.engine == engine) & (req.workload == workload)]
    for _, p in r.groupby("pass_index"):
        spans = [(float(a), float(b)) for a, b in zip(p.first_token_at, p.finished_at) if pd.notna(a) and pd.notna(b)]
        for t, _ in spans:
            n = sum(1 for a, b in spans if a <= t < b)
            best = n if math.isnan(best) else max(best, n)
    return best


def capacity(mem: pd.DataFrame, req: pd.DataFrame, workload: str) -> tuple[float, float]:
    """(c_candidate, c_stock) on one workload."""
    good = mem[mem["bytes"].notna()] if not mem.empty else mem

    def idle(e):
        v = [float(b) for b in good[(good.engine == e) & (good.phase == "idle")]["bytes"]] if not good.empty else []
        return statistics.median(v) if v else math.nan

    def peak(e):
        v = (
            good[(good.engine == e) & (good.phase == "pass") & (good.workload == workload)]["bytes"]
            if not good.empty
            else []
        )
        return float(max(v)) if len(v) else math.nan

    reserved = peak("stock")
    out = []
    for e in ("candidate", "stock"):
        running = most_running(req, e, workload) if not req.empty else math.nan
        i, pk = idle(e), peak(e)
        if any(math.isnan(x) for x in (reserved, i, pk, running)) or running <= 0 or (pk - i) / running <= 0:
            out.append(math.nan)
        else:
            out.append((reserved - i) / ((pk - i) / running))
    return out[0], out[1]


def gmean(values: list[float]) -> float:
    if any(math.isnan(v) for v in values):
        return math.nan
    if any(v <= 0 for v in values):
        return 0.0
    prod = 1.0
    for v in values:
        prod *= v
    return prod ** (1 / len(values))


def kl_position(p_ids, p_lps, token, p_tok_lp, q_ids, q_lps, q_tok_lp, floor) -> float:
    """One position's completed KL, with dictionaries (see the scorer's kl_topk for the definition)."""
    p = {int(i): math.exp(lp) for i, lp in zip(p_ids, p_lps)}
    q_top = {int(i): math.exp(lp) for i, lp in zip(q_ids, q_lps)}
    token = int(token)
    p[token] = math.exp(p_tok_lp)
    q_tok = math.exp(q_tok_lp)
    left = max(1 - sum(q_top.values()) - (0.0 if token in q_top else q_tok), 0.0)
    missing = [i for i in p if i not in q_top and i != token]
    fill = min(min(q_top.values()), left / len(missing)) if missing else 0.0
    q = {}
    for i in p:
        q[i] = q_tok if i == token else (q_top[i] if i in q_top else fill)
        q[i] = max(q[i], floor)
    kl = sum(pi * math.log(pi / q[i]) for i, pi in p.items() if pi > 0)
    p_t, q_t = max(1 - sum(p.values()), 0.0), max(1 - sum(q.values()), floor)
    return kl + (p_t * math.log(p_t / q_t) if p_t > 0 else 0.0)


def kl_and_perplexity(home, eid, floor) -> tuple[float, float]:
    prompts = read_raw(home, "lowb_kl_prompts", eid)
    lp = read_raw(home, "lowb_logprobs", eid)
    if prompts.empty or lp.empty:
        return math.nan, math.nan
    answered = {
        pid
        for pid, g in prompts.groupby("prompt_id")
        if (g[g.engine == "stock"]["answered"] == True).any() and (g[g.engine == "candidate"]["answered"] == True).any()  # noqa: E712
    }
    cand = {(r.prompt_id, r.position): r for r in lp[lp.engine == "candidate"].itertuples()}
    kls, p_nll, q_nll = [], [], []
    for s in lp[lp.engine == "stock"].itertuples():
        c = cand.get((s.prompt_id, s.position))
        if c is None or s.prompt_id not in answered:
            continue
        kls.append(
            kl_position(
                s.top_ids,
                s.top_logprobs,
                s.token_id,
                s.token_logprob,
                c.top_ids,
                c.top_logprobs,
                c.token_logprob,
                floor,
            )
        )
        p_nll.append(-s.token_logprob)
        q_nll.append(-c.token_logprob)
    if not kls:
        return math.nan, math.nan
    return sum(kls) / len(kls), math.exp(sum(q_nll) / len(q_nll)) / math.exp(sum(p_nll) / len(p_nll))


def items(home, eid, domains_doc, z) -> tuple[dict, float]:
    """Per domain (n, mean, upper, gated), and dL."""
    it = read_raw(home, "lowb_items", eid)
    if it.empty:
        return {}, math.nan
    cand = {(r.run_index, r.item_id): r for r in it[it.engine == "candidate"].itertuples()}
    per: dict[str, list[float]] = {}
    ct = st = 0
    n_len = 0
    for s in it[it.engine == "stock"].itertuples():
        c = cand.get((s.run_index, s.item_id))
        if c is None:
            continue
        if pd.notna(s.score):
            per.setdefault(s.domain, []).append(100 * (s.score - (c.score if pd.notna(c.score) else 0.0)))
        if pd.notna(s.output_tokens) and pd.notna(c.output_tokens):
            ct += int(c.output_tokens)
            st += int(s.output_tokens)
            n_len += 1
    out = {}
    for d, v in per.items():
        n = len(v)
        m = sum(v) / n
        sd = statistics.stdev(v) if n >= 2 else math.nan
        gated = bool(domains_doc.get(d, {}).get("gated", False))
        out[d] = {"n": n, "drop": m, "upper": m + z * sd / math.sqrt(n) if n >= 2 else math.nan, "gated": gated}
    return out, ((ct - st) / st if n_len and st > 0 else math.nan)


def contract_checks(home, eid, doc, exempt: bool) -> dict[str, str]:
    rule = doc["gates"]["contract"]
    ts = read_raw(home, "lowb_tensors", eid)
    ck = read_raw(home, "lowb_checkpoints", eid)
    if ts.empty or ts[ts.engine == "stock"].empty or ts[ts.engine == "candidate"].empty:
        return {"tensors": "blank"}
    target = {r.tensor: r for r in ts[ts.engine == "stock"].itertuples()}
    cand = list(ts[ts.engine == "candidate"].itertuples())
    own_bytes = other_bytes = 0
    represented = set()
    quantized = 0
    for r in cand:
        base = None
        for suffix in rule["companion_suffixes"]:
            if r.tensor.endswith("." + suffix):
                base = r.tensor[: -len(suffix) - 1] + ".weight"
                break
        mine = r.tensor in target or (base is not None and base in target)
        represented.add(r.tensor)
        if base:
            represented.add(base)
        if mine:
            own_bytes += int(r.bytes)
            quantized += r.dtype not in rule["unquantized_dtypes"]
        else:
            other_bytes += int(r.bytes)
    total = own_bytes + other_bytes
    out = {
        "other_tensors": "pass" if total > 0 and other_bytes / total <= rule["max_other_tensor_share"] else "missed",
        "represented": "pass" if set(target) <= represented else "missed",
    }
    if exempt:
        return out
    declared = None
    c = ck[ck.engine == "candidate"] if not ck.empty else ck
    if not c.empty and pd.notna(c.iloc[0]["declared_method"]):
        declared = c.iloc[0]["declared_method"]
    linear = [
        t for t, r in target.items() if re.search(rule["decoder_linear_pattern"], t) and len(json.loads(r.shape)) == 2
    ]
    by_name = {r.tensor: r.dtype for r in cand}
    relabelled = declared is not None and linear and all(by_name.get(t) in rule["unquantized_dtypes"] for t in linear)
    out["relabelled"] = "missed" if relabelled else "pass"
    out["quantization"] = "pass" if quantized else "missed"
    return out


# ---- the score --------------------------------------------------------------------------------


def current_rows(home: Path) -> pd.DataFrame:
    ev = read_raw(home, "evaluations")
    if ev.empty:
        return ev
    ev = ev.assign(_u=ev["updated_at"].fillna(0.0)).sort_values("_u", kind="stable")
    return ev.drop_duplicates("evaluation_id", keep="last")


def recompute(home: Path, version: int) -> dict[str, dict]:
    """Every measured LowBArena evaluation of `home`: its figures, gates' verdicts, g and score."""
    home = Path(home)
    doc = document(version, home)
    tasks = all_task_ids(home)
    ev = current_rows(home)
    out = {}
    for e in ev.itertuples():
        if e.status != "measured" or e.task_id not in tasks:
            continue
        if e.task_id not in doc["tasks"]:
            out[e.evaluation_id] = {"lowbscore": math.nan}
            continue
        out[e.evaluation_id] = one(home, e, doc)
    return out


def one(home: Path, e, doc: dict) -> dict:
    eid = e.evaluation_id
    task = doc["tasks"][e.task_id]
    req = read_raw(home, "lowb_requests", eid)
    mem = read_raw(home, "lowb_memory", eid)
    single = set(doc["throughput"]["single_speed_workloads"])
    s = {w: (speedup(req, w, w in single) if not req.empty else math.nan) for w in doc["throughput"]["workloads"]}
    speed_gmean = gmean(list(s.values()))
    domains, dl = items(home, eid, doc["domains"], doc["gates"]["accuracy"]["z_one_sided"])
    t = speed_gmean / max(1.0, 1.0 + dl) if not math.isnan(dl) else math.nan
    caps = {w: capacity(mem, req, w) for w in doc["capacity"]["workloads"]}
    ratios = [c / cs if not math.isnan(cs) and cs != 0 else math.nan for c, cs in caps.values()]
    p = gmean(ratios)
    acc = doc["accuracy"]
    kl, ppl = kl_and_perplexity(home, eid, acc["kl_probability_floor"])
    gated = [d["drop"] for d in domains.values() if d["gated"]]
    drop = sum(gated) / len(gated) if gated else math.nan
    big_d = acc["drop_weight"] * drop + acc["kl_weight"] * acc["points_per_nat"] * kl
    a = math.exp(-max(big_d, 0.0) / acc["scale"]) if not math.isnan(big_d) else math.nan

    gates = doc["gates"]
    exempt = bool(e.is_reference) and e.solution_kind in gates["contract"]["exempt_reference_kinds"]
    verdicts: dict[tuple[str, str], str] = {}
    for check, v in contract_checks(home, eid, doc, exempt).items():
        verdicts[("contract", check)] = v
    verdicts[("contract", "kl")] = (
        "blank" if math.isnan(kl) else ("pass" if kl <= gates["contract"]["max_kl_nats_per_token"] else "missed")
    )
    prompts = read_raw(home, "lowb_kl_prompts", eid)
    if prompts.empty:
        verdicts[("engine_rules", "kl_prompts")] = "blank"
    else:
        unanswered = [
            pid
            for pid, g in prompts.groupby("prompt_id")
            if not (g[g.engine == "candidate"]["answered"] == True).any()  # noqa: E712
        ]
        verdicts[("engine_rules", "kl_prompts")] = "pass" if not unanswered else "missed"
    starts = read_raw(home, "engine_starts", eid)
    cstarts = starts[starts.engine == "candidate"] if not starts.empty else starts
    if not bool(e.is_reference):
        if cstarts.empty:
            verdicts[("engine_rules", "unprivileged")] = "blank"
        else:
            verdicts[("engine_rules", "unprivileged")] = (
                "pass" if cstarts["unprivileged"].fillna(False).all() else "missed"
            )
    limit = gates["accuracy"]["max_drop_points"][task["tier"]]
    gated_domains = {d: v for d, v in domains.items() if v["gated"]}
    if not gated_domains:
        verdicts[("accuracy", "items")] = "blank"
    for d, v in sorted(gated_domains.items()):
        verdicts[("accuracy", d)] = "missed" if v["n"] < 2 else ("pass" if v["upper"] <= limit else "missed")
    sp = gates["speed"]
    stat = speed_gmean - sp["z_one_sided"] * sp["noise"] / math.sqrt(sp["workloads_root"])
    verdicts[("speed", "speed")] = (
        "blank" if math.isnan(stat) else ("pass" if stat >= task["speed_floor"] else "missed")
    )
    verdicts[("length", "length")] = (
        "blank" if math.isnan(dl) else ("pass" if abs(dl) <= gates["length"]["max_relative_change"] else "missed")
    )

    score_rule = doc["score"]
    missed = [gate for (gate, _), v in verdicts.items() if v == "missed"]
    blank = [gate for (gate, _), v in verdicts.items() if v == "blank"]
    if set(missed) & set(score_rule["zero_score_gates"]):
        g, score = 0.0, score_rule["contract_or_engine_rule_score"]
    else:
        g = math.nan if blank else (score_rule["missed_gate_factor"] if missed else 1.0)
        ex = score_rule["axis_exponents"]
        if any(math.isnan(x) for x in (g, t, p, a)):
            score = math.nan
        else:
            score = g * t ** ex["T"] * p ** ex["P"] * a ** ex["A"]
    first = next((gate for gate in gates["order"] if gate in missed), None)
    served = cstarts[cstarts.healthy_at.notna() & cstarts.stopped_at.notna()] if not cstarts.empty else cstarts
    return {
        "T": t,
        "P": p,
        "A": a,
        "g": g,
        "lowbscore": score,
        "reason": first,
        "s_serve": s.get("serve"),
        "s_interactive": s.get("interactive"),
        "s_long": s.get("long"),
        "speed_gmean": speed_gmean,
        "delta_l": dl,
        "c_serve": caps["serve"][0],
        "c_long": caps["long"][0],
        "c_serve_bf16": caps["serve"][1],
        "c_long_bf16": caps["long"][1],
        "drop": drop,
        "kl": kl,
        "D": big_d,
        "perplexity_ratio": ppl,
        "device_seconds": float((served.stopped_at - served.healthy_at).sum()) if len(served) else math.nan,
        "verdicts": verdicts,
        "domains": domains,
    }
