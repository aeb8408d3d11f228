"""The shown figures of issue 20 recomputed the plain way from the raw Parquet, for the tests.

It imports nothing of `speculator_arena` but the protocol's count slack (protocol data): it reads
the parts with pyarrow, counts requests by SCORING.md's rule, finds the busy window by checking
every elementary interval between two request boundaries (O(n²), fine for a test), and
differences the counters pass by pass. The board's SQL and arithmetic are checked against it.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

WORKLOADS = ("solo", "team", "busy")
PER_POS = ("vllm:spec_decode_num_accepted_tokens_per_pos", "vllm:spec_decode_num_accepted_tokens_per_pos_total")
DRAFTS = ("vllm:spec_decode_num_drafts", "vllm:spec_decode_num_drafts_total")
ACCEPTED = ("vllm:spec_decode_num_accepted_tokens", "vllm:spec_decode_num_accepted_tokens_total")


def raw(home: Path, table: str, evaluation_id: str) -> pd.DataFrame:
    parts = sorted((Path(home) / "raw" / table / f"evaluation_id={evaluation_id}").glob("*.parquet"))
    if not parts:
        return pd.DataFrame()
    return pd.concat([pq.read_table(p).to_pandas() for p in parts], ignore_index=True)


def timed_requests(home: Path, evaluation_id: str, slack: int) -> pd.DataFrame:
    """Timed requests with their pass's bounds and `counted` (SCORING.md "Counted requests")."""
    req = raw(home, "requests", evaluation_id)
    req = req[~req["pass_id"].str.startswith("warmup")]
    passes = raw(home, "passes", evaluation_id)[["pass_id", "engine", "lanes", "ends_at", "grace_ends_at", "status"]]
    r = req.merge(passes, on=["pass_id", "engine"])
    r["counted"] = [
        bool(d) and o <= m + slack and s < e and end <= g
        for d, o, m, s, e, end, g in zip(
            r["done"].fillna(False),
            r["output_tokens"],
            r["max_tokens"],
            r["sent_at"],
            r["ends_at"],
            r["ended_at"],
            r["grace_ends_at"],
        )
    ]
    return r


def busy(requests: pd.DataFrame, lanes: int) -> tuple[float, float]:
    """(tokens, seconds) of one pass's busy window: the times at which `lanes` requests are in
    flight, each from sent_at to its last chunk (ended_at without one), closed intervals."""
    spans = [
        (s, lt if pd.notna(lt) else e)
        for s, lt, e in zip(requests["sent_at"], requests["last_token_at"], requests["ended_at"])
    ]
    cuts = sorted({t for span in spans for t in span})
    seconds = sum(b - a for a, b in zip(cuts, cuts[1:]) if sum(s <= (a + b) / 2 <= e for s, e in spans) >= lanes)
    tokens = 0
    for times, toks, counted in zip(requests["chunk_times"], requests["chunk_tokens"], requests["counted"]):
        if counted:
            tokens += sum(k for t, k in zip(times, toks) if sum(s <= t <= e for s, e in spans) >= lanes)
    return float(tokens), float(seconds)


def interactivity(home: Path, evaluation_id: str, slack: int) -> dict:
    """{(engine, workload): (throughput, per_user)} pooled over the workload's passes."""
    r = timed_requests(home, evaluation_id, slack)
    out = {}
    for (engine, workload), g in r.groupby(["engine", "workload"]):
        tok = sec = 0.0
        lanes = int(g["lanes"].max())
        for _, p in g.groupby("pass_id"):
            t, s = busy(p, lanes)
            tok, sec = tok + t, sec + s
        out[(engine, workload)] = (tok / sec, tok / sec / lanes)
    return out


def counter_deltas(home: Path, evaluation_id: str, engine: str, workload: str) -> dict:
    """{'drafts': Δ, 'accepted': Δ, position: Δ} over the workload's passes (after − before)."""
    m = raw(home, "metrics", evaluation_id)
    m = m[(m["engine"] == engine) & m["pass_id"].str.startswith(workload + "-")]
    out: dict = {}
    for row in m.itertuples():
        if row.name in DRAFTS:
            key = "drafts"
        elif row.name in ACCEPTED:
            key = "accepted"
        elif row.name in PER_POS:
            key = int(json.loads(row.labels)["position"])
        else:
            continue
        out[key] = out.get(key, 0.0) + (row.value if row.phase == "after" else -row.value)
    return out


def step_counts(deltas: dict) -> list[float]:
    """Steps that accepted exactly k draft tokens, k = 0..γ, from the per-position deltas."""
    acc = [deltas[p] for p in sorted(k for k in deltas if isinstance(k, int))]
    chain = [deltas["drafts"], *acc, 0.0]
    return [chain[k] - chain[k + 1] for k in range(len(chain) - 1)]


def chunk_histogram(home: Path, evaluation_id: str, engine: str, workload: str, slack: int) -> Counter:
    r = timed_requests(home, evaluation_id, slack)
    r = r[(r["engine"] == engine) & (r["workload"] == workload) & r["counted"]]
    return Counter(int(k) for toks in r["chunk_tokens"] for k in toks)


def tokens_per_chunk_by_family(home: Path, evaluation_id: str, engine: str, slack: int) -> dict:
    """{family: tokens / chunks} over every workload's counted requests of the engine."""
    r = timed_requests(home, evaluation_id, slack)
    s = raw(home, "sessions", evaluation_id)[["pass_id", "engine", "session_id", "family"]].drop_duplicates()
    r = r[(r["engine"] == engine) & r["counted"]].merge(s, on=["pass_id", "engine", "session_id"])
    out = {}
    for family, g in r.groupby("family"):
        chunks = [k for toks in g["chunk_tokens"] for k in toks]
        out[family] = sum(chunks) / len(chunks)
    return out


def seconds_per_step(home: Path, evaluation_id: str, engine: str, workload: str, slack: int) -> float:
    r = timed_requests(home, evaluation_id, slack)
    r = r[(r["engine"] == engine) & (r["workload"] == workload) & r["counted"]]
    n = r["chunk_times"].map(len)
    r, n = r[n > 1], n[n > 1]
    return float((r["last_token_at"] - r["first_token_at"]).sum() / (n - 1).sum())


def goodput(home: Path, evaluation_id: str, engine: str, workload: str, slack: int, ttft: float, tpot: float) -> float:
    r = timed_requests(home, evaluation_id, slack)
    r = r[(r["engine"] == engine) & (r["workload"] == workload)]
    good = 0
    for row in r.itertuples():
        if not row.counted or pd.isna(row.first_token_at) or row.first_token_at - row.sent_at > ttft:
            continue
        if row.output_tokens > 1 and (row.last_token_at - row.first_token_at) / (row.output_tokens - 1) > tpot:
            continue
        good += 1
    return good / len(r)


def acceptance_by_context(home: Path, evaluation_id: str, engine: str, slack: int) -> dict:
    """{(family, axis, bin_low): (Σ tokens / Σ chunks, mean of each request's tokens / chunks)} over
    every workload's counted requests that streamed a chunk; prompt lengths binned in powers of
    two (the bin [2^k, 2^(k+1)) by its low end), turns as they are."""
    r = timed_requests(home, evaluation_id, slack)
    s = raw(home, "sessions", evaluation_id)[["pass_id", "engine", "session_id", "family"]].drop_duplicates()
    r = r[(r["engine"] == engine) & r["counted"]].merge(s, on=["pass_id", "engine", "session_id"])
    r = r[r["chunk_tokens"].map(len) > 0]
    r = r.assign(
        tokens=r["chunk_tokens"].map(sum),
        chunks=r["chunk_tokens"].map(len),
        prompt_bin=[0 if p < 1 else 2 ** (int(p).bit_length() - 1) for p in r["prompt_tokens"]],
    )
    out = {}
    for axis, column in (("prompt_tokens", "prompt_bin"), ("turn", "turn")):
        for (family, low), g in r.groupby(["family", column]):
            out[(family, axis, int(low))] = (g["tokens"].sum() / g["chunks"].sum(), (g["tokens"] / g["chunks"]).mean())
    return out
