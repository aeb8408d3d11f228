"""An independent recomputation of one evaluation's score, written from ../shared/SCORING.md.

Why it exists: the scorer (speculator_arena.scoring) is fast SQL over views plus a vectorized
busy-window scan; testing it against itself proves nothing. This module reads only what an
outside analyst has: the stored Parquet parts under `$ARENA_HOME/raw/<table>/evaluation_id=<id>/`,
the protocol version's YAML document as data, and the target's tokenizer (to recount tokens from
the reply texts). It imports nothing of `speculator_arena` at all, and each figure is computed the
plain way SCORING.md states it (per-lane interval unions for the busy window, the delta method
from a covariance matrix for length, cluster values rather than sums for the reply gates), so that
an agreement means two readings of the same rules agree.

Where SCORING.md leaves a choice open, the choice made here is stated where it is made.
"""

from __future__ import annotations

import bisect
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import yaml

REPO = Path(__file__).resolve().parents[2]
SHIPPED_VERSIONS = REPO / "speculator_arena" / "protocol" / "versions"
WORKLOADS = ("solo", "team", "busy")
ENGINES = ("candidate", "stock")


# ---- inputs ---------------------------------------------------------------------------------


def read_raw(home: Path, table: str, evaluation_id: str) -> pd.DataFrame:
    """Every stored part of one evaluation's table (no views, no packs): empty when none."""
    d = Path(home) / "raw" / table / f"evaluation_id={evaluation_id}"
    files = sorted(f for f in d.glob("*.parquet") if not f.name.startswith(".")) if d.is_dir() else []
    if not files:
        return pd.DataFrame()
    t = pa.concat_tables([pq.read_table(f) for f in files], promote_options="default")
    return t.to_pandas()


def protocol_document(version: int) -> dict:
    """vN.yaml, shipped or staged in ARENA_PROTOCOL_DIR, read as plain data."""
    dirs = [SHIPPED_VERSIONS] + (
        [Path(os.environ["ARENA_PROTOCOL_DIR"])] if os.environ.get("ARENA_PROTOCOL_DIR") else []
    )
    for d in dirs:
        f = d / f"v{version}.yaml"
        if f.is_file():
            return yaml.safe_load(f.read_text())
    raise FileNotFoundError(f"protocol v{version} not found in {dirs}")


def task_rules(doc: dict, task_id: str) -> dict:
    """The document's values with the task's own overriding them (its `gates` entries one by one)."""
    task = doc["tasks"][task_id]
    rules = {k: v for k, v in doc.items() if k != "tasks"}
    for k, v in task.items():
        if v is None:
            continue
        rules[k] = {**rules.get("gates", {}), **v} if k == "gates" else v
    return rules


def load_tokenizer(target_dir: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(target_dir), local_files_only=True)


def _ids(tokenizer, text) -> list[int]:
    """The reply's own tokens: no special tokens added (a reply carries no BOS of its own)."""
    if not isinstance(text, str) or not text:
        return []
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def _present(x) -> bool:
    return x is not None and not (isinstance(x, float) and math.isnan(x))


def _list(x) -> list:
    return [] if x is None or (isinstance(x, float) and math.isnan(x)) else list(x)


# ---- the busy window --------------------------------------------------------------------------


def _union(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[list[float]] = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def _intersect(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        s, e = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if s <= e:
            out.append((s, e))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def busy_window(lane_intervals: dict[int, list[tuple[float, float]]], lanes: int) -> list[tuple[float, float]]:
    """The times at which every one of the `lanes` lanes has a request in flight: the
    intersection over lanes of each lane's union of closed intervals (empty if a lane has none)."""
    window = None
    for lane in range(lanes):
        u = _union(lane_intervals.get(lane, []))
        window = u if window is None else _intersect(window, u)
    return window or []


def inside(window: list[tuple[float, float]], t: float) -> bool:
    starts = [s for s, _ in window]
    k = bisect.bisect_right(starts, t) - 1
    return k >= 0 and window[k][0] <= t <= window[k][1]


def attribute(tokenizer, text: str, chunk_chars: list[int]) -> list[int]:
    """Tokens per chunk: each token of the reply's full tokenization goes to the chunk holding its
    last character (the moment a reader of the stream has the whole token); SCORING.md says
    "mapping each chunk's character span onto the offsets", and this is the one mapping under
    which a token is counted once, when it is complete."""
    counts = [0] * len(chunk_chars)
    if not text or not chunk_chars:
        return counts
    ends = list(np.cumsum(chunk_chars))
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    for start, end in enc["offset_mapping"]:
        last = max(end - 1, start)
        counts[min(bisect.bisect_right(ends, last), len(counts) - 1)] += 1
    return counts


# ---- the result -----------------------------------------------------------------------------


@dataclass
class Gate:
    verdict: str  # pass | fail | not measured
    statistic: float = float("nan")
    se: float = float("nan")
    ci_low: float = float("nan")
    ci_high: float = float("nan")
    limit: float = float("nan")
    detail: str = ""
    items: dict = field(default_factory=dict)  # per probe item, where the gate has items


@dataclass
class Recomputed:
    evaluation_id: str
    protocol_version: int
    requests: pd.DataFrame  # timed requests, with the arena's recount and `counted`
    engine_passes: pd.DataFrame  # per pass and engine: requests, failures, speeds and their parts
    passes: pd.DataFrame  # per pass: both speeds, failures, the failure rule, the ratio
    r: dict[str, float]
    gates: dict[str, Gate]
    outcome: str  # score | zero | void | blocked
    reasons: list[str]
    specscore: float  # the number shown: SpecScore, 0, or NaN (void, blocked)
    findings: list[str] = field(default_factory=list)  # stored rows that disagree with the rules


# ---- the recomputation ------------------------------------------------------------------------


def recompute(home, evaluation_id: str, tokenizer, protocol_version: int | None = None) -> Recomputed:
    """Every figure of SCORING.md for one evaluation, from its raw rows; `protocol_version`
    defaults to the version it ran under."""
    home = Path(home)
    raw = {
        t: read_raw(home, t, evaluation_id)
        for t in (
            "evaluations",
            "passes",
            "requests",
            "replies",
            "memory",
            "probe_greedy",
            "probe_scored",
            "probe_fidelity",
            "engine_starts",
            "contention",
        )
    }
    ev = raw["evaluations"].sort_values("updated_at").iloc[-1]
    version = int(protocol_version or ev["protocol_version"])
    rules = task_rules(protocol_document(version), ev["task_id"])
    gates_rules, limits = rules["gates"], rules["limits"]
    z = float(gates_rules["z"])
    findings: list[str] = []

    passes = raw["passes"]
    if len(passes) and len(raw["requests"]):
        passes = passes[~passes["pass_id"].str.startswith("warmup")]
        req, counted_frame = _requests(raw, passes, rules, tokenizer, findings)
        eng = _engine_passes(req, passes, rules, tokenizer, findings)
    else:  # an evaluation that ended before its timed passes (its outcome comes from its status)
        req = counted_frame = pd.DataFrame(
            columns=["pass_id", "engine", "workload", "request_id", "session_id", "turn", "text", "tokens", "counted"]
        )
        eng = pd.DataFrame(columns=["pass_id", "engine", "workload", "pass_index", "counted_tokens"])
    paired = _pass_ratios(eng, rules, _steal_fractions(raw["contention"], rules))
    r = {
        w: float(np.median(paired.loc[paired.workload == w, "ratio"].to_numpy(dtype=float)))
        if (paired.workload == w).any()
        else float("nan")
        for w in WORKLOADS
    }

    answering, stock_unanswered = _answering(raw, rules, tokenizer)
    gates = {
        "greedy_agreement": _greedy(raw["probe_greedy"], limits, tokenizer, findings),
        **_replies(raw["probe_scored"], raw["replies"], counted_frame, rules, z, tokenizer, findings),
        "target_fidelity": _fidelity(raw["probe_fidelity"], limits, gates_rules),
        "length": _length(counted_frame, gates_rules, z),
        "memory": _memory(raw["memory"], rules),
        "answering": answering,
    }

    void, zero = [], []
    if ev["status"] == "void":
        void.append(f"runner: {ev['void_reason']}")
    for _, p in (eng[eng.engine == "stock"] if len(eng) else eng).iterrows():
        if not p["counted_tokens"] > 0:
            void.append(f"stock engine counted no tokens on {p['pass_id']}")
    void += [f"stock engine left {s} unanswered" for s in stock_unanswered]
    run_rules = task_rules(protocol_document(int(ev["protocol_version"])), ev["task_id"])
    void += _contended(raw["contention"], rules, run_rules)
    starts = raw["engine_starts"]
    if len(starts) and "device_idle_ok" in starts:
        if (starts["device_idle_ok"] == False).any():  # noqa: E712 (null: no device to watch)
            void.append("device did not fall idle")
    if ev["status"] == "failed":
        zero.append(f"candidate failed: {ev['failure_reason']}")
    idle_void, idle_zero = _idle_engine(raw["passes"], rules)
    void += idle_void
    zero += idle_zero
    cand_starts = starts[starts.engine == "candidate"] if len(starts) else starts
    if len(cand_starts) and (cand_starts["died"].fillna(False).astype(bool).any()):
        zero.append("candidate engine died")
    if len(cand_starts) and (cand_starts["offload_detected"].fillna(False).astype(bool).any()):
        zero.append("offload in the candidate's start-up log")
    zero += [f"gate failed: {g}" for g, v in gates.items() if v.verdict == "fail"]
    zero += [f"r_{w} is 0" for w in WORKLOADS if r[w] == 0]
    blocked = [
        f"gate not measured: {g}"
        for g, v in gates.items()
        if v.verdict == "not measured" and (g != "memory" or rules["public"])
    ]
    if void:
        outcome, reasons, score = "void", void, float("nan")
    elif zero:
        outcome, reasons, score = "zero", zero, 0.0
    elif blocked:
        outcome, reasons, score = "blocked", blocked, float("nan")
    else:
        outcome, reasons = "score", []
        score = float(np.cbrt(r["solo"] * r["team"] * r["busy"]))
    return Recomputed(evaluation_id, version, req, eng, paired, r, gates, outcome, reasons, score, findings)


def _idle_engine(passes: pd.DataFrame, rules) -> tuple[list[str], list[str]]:
    """The interleaved pairing's idle-engine rule (docs/scoring.md "Pairing", item 6): the CPU the
    frozen engine's group used during the other engine's pass, above the version's limit, is the
    idle engine's fault: the candidate's a 0, the stock engine's a void. (void, zero) reasons."""
    limit = (rules.get("interleaving") or {}).get("max_idle_cpu_seconds")
    if limit is None or "idle_engine_cpu_seconds" not in passes:
        return [], []
    void, zero = [], []
    for _, p in passes.iterrows():
        used = p["idle_engine_cpu_seconds"]
        if pd.isna(used) or used <= limit:
            continue
        idle = "candidate" if p["engine"] == "stock" else "stock"
        (zero if idle == "candidate" else void).append(f"{idle} engine used CPU while frozen ({p['pass_id']})")
    return void, zero


def _requests(raw, passes, rules, tokenizer, findings) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Timed requests with the arena's own token count of each reply text and SCORING.md's
    "counted"; and the counted ones alone."""
    req = raw["requests"]
    req = req[~req["pass_id"].str.startswith("warmup")].copy()
    texts = (
        {(e, i): t for e, i, t in zip(raw["replies"]["engine"], raw["replies"]["request_id"], raw["replies"]["text"])}
        if len(raw["replies"])
        else {}
    )
    req["text"] = [texts.get((e, i)) for e, i in zip(req["engine"], req["request_id"])]
    req["tokens"] = [len(_ids(tokenizer, t)) for t in req["text"]]
    for _, q in req[req["tokens"] != req["output_tokens"]].iterrows():
        findings.append(
            f"requests.output_tokens {q['output_tokens']} != {q['tokens']} tokens of the reply text ({q['request_id']})"
        )
    bounds = passes.set_index(["pass_id", "engine"])[["ends_at", "grace_ends_at"]]
    b = bounds.reindex(pd.MultiIndex.from_arrays([req["pass_id"], req["engine"]]))
    slack = int(rules.get("count_slack_tokens", 0))  # SCORING.md: 0 in v1, a constant from v2 on
    # SCORING.md lists an HTTP error and a broken stream among the failures: a stream the client
    # recorded an error for does not count even if a [DONE] line came.
    req["counted"] = (
        (req["done"] == True)  # noqa: E712 (null is not done)
        & req["error"].isna()
        & (req["tokens"] <= req["max_tokens"] + slack)
        & (req["sent_at"].to_numpy() < b["ends_at"].to_numpy())
        & (req["ended_at"].to_numpy() <= b["grace_ends_at"].to_numpy())
    )
    return req, req[req["counted"]]


def _engine_passes(req, passes, rules, tokenizer, findings) -> pd.DataFrame:
    """Per pass and engine: the request-time speed and the busy-window speed with their parts."""
    has_chars = "chunk_chars" in req.columns
    rows = []
    for _, p in passes.iterrows():
        q = req[(req.pass_id == p["pass_id"]) & (req.engine == p["engine"])]
        c = q[q["counted"]]
        lanes = int(rules["lanes"][p["workload"]])
        if int(p["lanes"]) != lanes:
            findings.append(f"passes.lanes {p['lanes']} != the protocol's {lanes} ({p['engine']} {p['pass_id']})")
        with_last = c[c["last_token_at"].notna()]
        seconds = float((with_last["last_token_at"] - with_last["sent_at"]).sum())
        tokens = int(c["tokens"].sum())
        lane_intervals: dict[int, list] = {}
        for _, x in q.iterrows():
            # in flight from sent to its last chunk; a request with no chunk until it ended
            end = x["last_token_at"] if _present(x["last_token_at"]) else x["ended_at"]
            if _present(x["sent_at"]) and _present(end):
                lane_intervals.setdefault(int(x["lane"]), []).append((float(x["sent_at"]), float(end)))
        window = busy_window(lane_intervals, lanes)
        busy_seconds = float(sum(e - s for s, e in window))
        busy_tokens = 0
        for _, x in c.iterrows():
            times = _list(x["chunk_times"])
            if has_chars:
                per_chunk = attribute(tokenizer, x["text"] or "", _list(x["chunk_chars"]))
            else:
                # Raw rows without `chunk_chars` (written before issue 10) keep only the runner's own
                # attribution, `chunk_tokens`: used as stored, checked only for its total.
                per_chunk = _list(x["chunk_tokens"])
                if sum(per_chunk) != x["tokens"]:
                    findings.append(f"chunk_tokens sum {sum(per_chunk)} != {x['tokens']} tokens ({x['request_id']})")
            if len(per_chunk) != len(times):
                findings.append(f"{len(per_chunk)} chunk token counts for {len(times)} chunk times ({x['request_id']})")
            busy_tokens += sum(k for t, k in zip(times, per_chunk) if inside(window, t))
        rows.append(
            dict(
                pass_id=p["pass_id"],
                engine=p["engine"],
                workload=p["workload"],
                pass_index=int(p["pass_index"]),
                status=p["status"],
                requests=len(q),
                counted=len(c),
                failures=len(q) - len(c),
                counted_tokens=tokens,
                request_seconds=seconds,
                request_time_speed=tokens / seconds if seconds > 0 else float("nan"),
                busy_seconds=busy_seconds,
                busy_tokens=busy_tokens,
                busy_window_speed=busy_tokens / busy_seconds if busy_seconds > 0 else float("nan"),
            )
        )
    return pd.DataFrame(rows)


def _steal_fractions(rows: pd.DataFrame, rules) -> dict[tuple[str, str], float]:
    """docs/scoring.md "Steal correction" (a task's `steal_correction`, v11 on): per (pass, engine),
    the steal CPU-seconds of its intervals read without error per second of them, with the steal
    share of all CPU time counted at most up to the contention limit. Empty when the task has none."""
    if not rules.get("steal_correction") or not len(rows):
        return {}
    cap = float(rules["contention"]["max_steal_share"])
    out = {}
    for (pid, engine), g in rows[rows["error"].isna()].groupby(["pass_id", "engine"]):
        seconds, total = float((g["ended_at"] - g["started_at"]).sum()), float(g["total_cpu_seconds"].sum())
        if seconds > 0 and total > 0:
            share = min(float(g["steal_seconds"].sum()) / total, cap)
            out[(pid, engine)] = min(share * total / seconds, 0.5)  # never over half the pass
    return out


def _pass_ratios(eng: pd.DataFrame, rules, steal: dict | None = None) -> pd.DataFrame:
    """Pass ratio = candidate speed / stock speed, 0 under the failure rule; "the pass's requests"
    are read as the larger of the two engines' request counts on it. `steal`: (pass, engine) ->
    the fraction of its time the steal correction takes off (speed / (1 - fraction))."""
    steal = steal or {}
    fr = rules["failure_rule"]
    rows = []
    for (pid, w), g in eng.groupby(["pass_id", "workload"]) if len(eng) else ():
        kind = rules["workloads"][w]["speed"]
        col = "request_time_speed" if kind == "request_time" else "busy_window_speed"
        by = g.set_index("engine")
        if not set(ENGINES) <= set(by.index):
            continue
        c, s = by.loc["candidate"], by.loc["stock"]
        n = max(int(c["requests"]), int(s["requests"]))
        zeroed = int(c["failures"]) - int(s["failures"]) > max(fr["min_excess"], fr["share_of_requests"] * n)
        fc, fs = steal.get((pid, "candidate"), 0.0), steal.get((pid, "stock"), 0.0)
        c_speed, ss = float(c[col]) / (1.0 - fc), float(s[col]) / (1.0 - fs)
        cs = c_speed if c_speed == c_speed else 0.0  # a candidate with no counted token: speed 0
        ratio = 0.0 if zeroed else (cs / ss if ss > 0 else float("nan"))  # no stock speed: void, above
        rows.append(
            dict(
                pass_id=pid,
                workload=w,
                pass_index=int(c["pass_index"]),
                candidate_speed=c_speed,
                stock_speed=ss,
                candidate_steal_fraction=fc,
                stock_steal_fraction=fs,
                candidate_failures=int(c["failures"]),
                stock_failures=int(s["failures"]),
                requests=n,
                zeroed_by_failure_rule=bool(zeroed),
                ratio=ratio,
            )
        )
    columns = [
        "pass_id",
        "workload",
        "pass_index",
        "candidate_speed",
        "stock_speed",
        "candidate_steal_fraction",
        "stock_steal_fraction",
        "candidate_failures",
        "stock_failures",
        "requests",
        "zeroed_by_failure_rule",
        "ratio",
    ]
    return pd.DataFrame(rows, columns=columns).sort_values(["workload", "pass_index"]).reset_index(drop=True)


# ---- gates ------------------------------------------------------------------------------------


def _greedy(rows: pd.DataFrame, limits, tokenizer, findings) -> Gate:
    """Mean over prompts of common prefix / longer reply, on the arena's tokenization of the texts;
    a prompt the candidate left unanswered scores 0; one the stock engine left unanswered is out."""
    floor = limits.get("greedy_agreement_floor")
    if not len(rows):
        return Gate("not measured", limit=_num(floor), detail="no greedy probe rows")
    by = {(e, p): x for e, p, x in zip(rows["engine"], rows["prompt_id"], rows.to_dict("records"))}
    a, items = [], {}
    for pid in sorted({p for _, p in by}):
        c, s = by.get(("candidate", pid)), by.get(("stock", pid))
        if s is None or not s["answered"]:
            continue
        ts = _ids(tokenizer, s["text"])
        _check_ids(s, ts, findings)
        if c is None or not c["answered"]:
            if ts:
                a.append(0.0)
                items[pid] = 0.0
            continue
        tc = _ids(tokenizer, c["text"])
        _check_ids(c, tc, findings)
        longest = max(len(tc), len(ts))
        if longest == 0:
            continue
        common = 0
        while common < min(len(tc), len(ts)) and tc[common] == ts[common]:
            common += 1
        a.append(common / longest)
        items[pid] = common / longest
    if not a:
        return Gate("not measured", limit=_num(floor), detail="no prompt answered by the stock engine")
    mean = float(np.mean(a))
    verdict = "pass" if floor is None or mean >= floor else "fail"
    return Gate(verdict, statistic=mean, limit=_num(floor), detail=f"{len(a)} prompts", items=items)


def _check_ids(row, ids, findings) -> None:
    if list(_list(row["token_ids"])) != ids:
        findings.append(
            f"probe_greedy.token_ids of {row['engine']} {row['prompt_id']} are not the arena's tokenization"
        )


def _cluster(y: np.ndarray, n: np.ndarray) -> tuple[float, float]:
    """Y/N with SE = sqrt(R/(R-1) * sum (y_r - est n_r)^2) / sum n_r (SCORING.md, replies as clusters)."""
    est = y.sum() / n.sum()
    r = len(y)
    se = math.sqrt(r / (r - 1) * float(np.sum((y - est * n) ** 2))) / n.sum() if r > 1 else float("nan")
    return float(est), se


def _two_sided(d: float, se: float, bound: float, z: float, detail: str) -> Gate:
    lo, hi = d - z * se, d + z * se
    if se != se:
        return Gate("not measured", statistic=d, limit=bound, detail="fewer than 2 clusters")
    return Gate("fail" if lo > bound or hi < -bound else "pass", d, se, lo, hi, bound, detail)


def _replies(rows, replies, counted, rules, z, tokenizer, findings) -> dict[str, Gate]:
    """Sampled likelihood and first-choice share, candidate minus stock, over the answered rows."""
    bounds = {
        "sampled_likelihood": float(rules["limits"]["likelihood_bound"]),
        "first_choice": float(rules["limits"]["first_choice_bound"]),
    }
    out = {
        g: Gate("not measured", limit=b, detail="scored replies of both engines are needed") for g, b in bounds.items()
    }
    if not len(rows):
        return out
    want = int(rules["gates"]["sampled_likelihood"]["replies"])
    cut = int(rules["gates"]["sampled_likelihood"]["reply_chars"])
    stats = {}
    for e in ENGINES:
        mine = rows[rows.reply_engine == e]
        pool = counted[counted.engine == e]
        if len(mine) != min(want, len(pool)) or mine["request_id"].duplicated().any():
            findings.append(f"{len(mine)} {e} replies sampled, not min(R={want}, {len(pool)} counted) distinct")
        stray = set(mine["request_id"]) - set(pool["request_id"])
        if stray:
            findings.append(f"sampled {e} replies that are not counted timed replies: {sorted(stray)}")
        ok = mine[mine["answered"] == True]  # noqa: E712
        if not len(ok):
            return out
        text = dict(zip(pool["request_id"], pool["text"]))
        s, x, n = [], [], []
        for _, q in ok.iterrows():
            lp, ranks = _list(q["token_logprobs"]), _list(q["token_ranks"])
            reply = (text.get(q["request_id"]) or "")[:cut]
            if "token_ids" in q and q["token_ids"] is not None:
                # The arena's positions, tokenized in the scored context (stored by hash only): they
                # must spell the reply (a first token may also hold the template's last characters).
                arena = _list(q["token_ids"])
                if not tokenizer.decode(arena).endswith(reply):
                    findings.append(f"probe_scored.token_ids of {q['request_id']} do not spell the scored reply")
            else:  # rows written before the arena's positions were stored: the reply tokenized alone
                arena = _ids(tokenizer, reply)
            if len(lp) != len(arena) or len(ranks) != len(lp):
                findings.append(
                    f"scored reply {q['request_id']}: {len(lp)} log-probabilities, {len(ranks)} ranks, "
                    f"{len(arena)} arena tokens"
                )
            s.append(sum(lp))
            x.append(sum(1 for k in ranks if k != 1))
            n.append(len(lp))
        s, x, n = (np.asarray(v, dtype=float) for v in (s, x, n))
        stats[e] = {"L": _cluster(s, n), "F": _cluster(x, n), "R": len(n)}
    for g, key in (("sampled_likelihood", "L"), ("first_choice", "F")):
        (c, sec), (st, ses) = stats["candidate"][key], stats["stock"][key]
        out[g] = _two_sided(
            c - st,
            math.hypot(sec, ses),
            bounds[g],
            z,
            f"candidate {c:.5f} ({stats['candidate']['R']}), stock {st:.5f} ({stats['stock']['R']})",
        )
    return out


def _fidelity(rows: pd.DataFrame, limits, gates_rules) -> Gate:
    """Pooled mean |lp_cand - lp_stock| over the fixed texts' tokens. The arena's positions are the
    ones the stock engine (the arena's side) answered; a candidate item unanswered or not covering
    them takes its tokens at the largest per-token difference of the answered items, at least
    `unanswered_fidelity_min_nats` (SCORING.md: 1 nat, where the protocol does not name it)."""
    ceiling = float(limits["fidelity_ceiling"])
    floor_nats = float(gates_rules.get("answering", {}).get("unanswered_fidelity_min_nats", 1.0))
    if not len(rows):
        return Gate("not measured", limit=ceiling, detail="no fidelity rows")
    by = {(e, t): x for e, t, x in zip(rows["engine"], rows["text_id"], rows.to_dict("records"))}
    total, tokens, worst, missing = 0.0, 0, 0.0, []
    for tid in sorted({t for _, t in by}):
        c, s = by.get(("candidate", tid)), by.get(("stock", tid))
        if s is None or not s["answered"]:
            continue
        s_lp = np.asarray(_list(s["token_logprobs"]), dtype=float)
        if (
            c is None
            or not c["answered"]
            or _list(c["token_ids"]) != _list(s["token_ids"])
            or len(_list(c["token_logprobs"])) != len(s_lp)
        ):
            missing.append(len(s_lp))
            continue
        diff = np.abs(np.asarray(_list(c["token_logprobs"]), dtype=float) - s_lp)
        total += float(diff.sum())
        tokens += len(diff)
        worst = max(worst, float(diff.max()) if len(diff) else 0.0)
    for k in missing:
        total += k * max(worst, floor_nats)
        tokens += k
    if tokens == 0:
        return Gate("not measured", limit=ceiling, detail="no fixed text answered by the stock engine")
    value = total / tokens
    return Gate(
        "pass" if value <= ceiling else "fail",
        statistic=value,
        limit=ceiling,
        detail=f"{tokens} tokens, {len(missing)} items at the worst value",
    )


def _length(counted: pd.DataFrame, gates_rules, z) -> Gate:
    """Δ = Σ len_cand / Σ len_stock − 1 over pairs matched on (workload, pass, session, turn); SE
    by the delta method, Var(C̄/S̄) ≈ (Var C − 2ρ Cov(C,S) + ρ² Var S) / (P S̄²), with the pairs'
    sample (co)variances."""
    bound = float(gates_rules["length"]["bound"])
    key = ["workload", "pass_id", "session_id", "turn"]
    c = counted[counted.engine == "candidate"][key + ["tokens"]]
    s = counted[counted.engine == "stock"][key + ["tokens"]]
    pairs = c.merge(s, on=key, suffixes=("_c", "_s"))
    if len(pairs) < 2 or pairs["tokens_s"].sum() <= 0:
        return Gate("not measured", limit=bound, detail="fewer than 2 pairs")
    cc, ss = pairs["tokens_c"].to_numpy(dtype=float), pairs["tokens_s"].to_numpy(dtype=float)
    rho = cc.mean() / ss.mean()
    cov = np.cov(np.vstack([cc, ss]), ddof=1)
    var = (cov[0, 0] - 2 * rho * cov[0, 1] + rho * rho * cov[1, 1]) / (len(cc) * ss.mean() ** 2)
    return _two_sided(rho - 1.0, math.sqrt(max(var, 0.0)), bound, z, f"{len(cc)} pairs")


def _memory(rows: pd.DataFrame, rules) -> Gate:
    """The candidate's peak sample during its timed passes against utilization × total + slack
    (the gate judges the candidate; the stock engine's peak is not its concern)."""
    if not len(rows):
        return Gate("not measured", detail="no device memory samples")
    m = rows[(rows.engine == "candidate") & ~rows["pass_id"].str.startswith("warmup")]
    if not len(m):
        return Gate("not measured", detail="no candidate memory samples")
    util = float(rules["engine_environment"]["gpu_memory_utilization"])
    allowed = util * float(m["total_bytes"].max()) + float(rules["gates"]["memory"]["slack_gib"]) * 2**30
    peak = float(m["used_bytes"].max())
    return Gate("pass" if peak <= allowed else "fail", statistic=peak, limit=allowed)


def _answering(raw, rules, tokenizer) -> tuple[Gate, list[str]]:
    """Unanswered share per probe check and engine. In the likelihood check the stock engine is
    asked to score both engines' replies; an item is the engine's whose reply it scores: the same
    stock engine and procedure on both sides, only the text differs, so an unscored candidate reply
    (empty, or text the stock engine cannot score) is the candidate's failure (SCORING.md: a
    candidate can never cause a void by what it returns), and the stock engine voids only by
    failing its own replies."""
    mx = float(rules["gates"]["answering"]["max_unanswered_share"])
    shares: dict[tuple[str, str], tuple[int, int]] = {}
    for check, table in (("greedy_agreement", "probe_greedy"), ("target_fidelity", "probe_fidelity")):
        t = raw[table]
        for e in ENGINES:
            mine = t[t.engine == e] if len(t) else t
            if len(mine):
                shares[(check, e)] = (int((mine["answered"] != True).sum()), len(mine))  # noqa: E712
    sc = raw["probe_scored"]
    for e in ENGINES:
        mine = sc[sc.reply_engine == e] if len(sc) else sc
        if len(mine):
            shares[("sampled_likelihood", e)] = (int((mine["answered"] != True).sum()), len(mine))  # noqa: E712
    stock_over = [f"{u}/{n} of {c}" for (c, e), (u, n) in shares.items() if e == "stock" and n and u / n > mx]
    cand = [(u / n, c) for (c, e), (u, n) in shares.items() if e == "candidate" and n]
    if not cand:
        return Gate("not measured", limit=mx, detail="no probe rows"), stock_over
    worst = max(s for s, _ in cand)
    return Gate("pass" if worst <= mx else "fail", statistic=worst, limit=mx), stock_over


def _contended(rows: pd.DataFrame, rules, run_rules) -> list[str]:
    """SCORING.md "Host contention": per timed pass and engine, over its intervals read without
    error, foreign CPU seconds / the intervals' seconds (a share of one core), steal seconds / all
    CPU seconds, and any other process on the device. Versions without a `contention` rule, and
    warehouses without its rows, judge nothing here. Under the interleaved pairing of the version
    the evaluation ran under (`run_rules`), a workload's passes of both engines are judged as one
    (docs/scoring.md "Pairing": how the passes were made, whatever version scores them)."""
    rule = rules.get("contention")
    if not rule or not len(rows):
        return []
    ok = rows[rows["error"].isna() & ~rows["pass_id"].str.startswith("warmup")]
    interleaving = run_rules.get("interleaving")
    if interleaving and interleaving.get("contention_per_workload", True):
        # the interleaved pairing: every pass of a workload, both engines, judged as one
        ok = ok.assign(pass_id=ok["pass_id"].str.rsplit("-", n=1).str[0], engine="both")
    out = []
    for (pid, engine), g in ok.groupby(["pass_id", "engine"]):
        seconds, total = float((g["ended_at"] - g["started_at"]).sum()), float(g["total_cpu_seconds"].sum())
        foreign = float(g["foreign_cpu_seconds"].sum()) / seconds if seconds > 0 else 0.0
        steal = float(g["steal_seconds"].sum()) / total if total > 0 else 0.0
        gpu = g["foreign_gpu_processes"].fillna(0).max()
        if foreign > rule["max_foreign_cpu_share"] or steal > rule["max_steal_share"] or gpu > 0:
            out.append(
                f"host contended ({engine} {pid}: foreign CPU {foreign:.2f} of a core, steal {steal:.1%}, "
                f"{int(gpu)} other device processes)"
            )
    return out


def _num(x) -> float:
    return float("nan") if x is None else float(x)


# ---- the board's interval (SCORING.md "Ties on the board") -------------------------------------


def board_interval(
    ratios: dict[str, list[float]], evaluation_id: str, max_abs_error: float | None, resamples: int = 1000
) -> tuple[float, float]:
    """The SpecScore's bootstrap 95% interval widened by the max A/A error, one resample at a time.

    SCORING.md fixes the resampling (passes within each workload, the median per workload, the
    geometric mean) and the widening; docs/viewers/board.md fixes the draws so anyone can reproduce them:
    seed = the first 8 bytes of sha256(evaluation_id), big-endian; numpy.random.default_rng(seed);
    per workload (solo, team, busy) with its ratios sorted ascending, the indices
    rng.integers(0, n, size=(resamples, n), dtype=uint8); the 2.5% and 97.5% quantiles (linear)."""
    import hashlib
    import statistics

    seed = int.from_bytes(hashlib.sha256(evaluation_id.encode("utf-8")).digest()[:8], "big")
    rng = np.random.default_rng(seed)
    drawn = {}
    for w in WORKLOADS:
        x = sorted(float(v) for v in ratios[w])
        drawn[w] = (x, rng.integers(0, len(x), size=(resamples, len(x)), dtype=np.uint8))
    scores = []
    for r in range(resamples):
        product = 1.0
        for w in WORKLOADS:
            x, idx = drawn[w]
            product *= statistics.median([x[i] for i in idx[r]])
        scores.append(product ** (1.0 / 3.0))
    low, high = np.quantile(np.array(scores), [0.025, 0.975])
    e = max_abs_error or 0.0
    return float(low) * (1 - e), float(high) * (1 + e)
