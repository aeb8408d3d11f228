"""Benchmark: score N synthetic protocol-scale evaluations with score_warehouse, against a bare
scan of the same requests measured in the same run, and check the scores against a plain Python
per-row loop computing the same per-pass speeds, ratios and SpecScore.

    python benchmarks/score_benchmark.py --n 1000 [--home /tmp/arena-bench] [--reuse] [--repeat 3]

The warehouse is written once (reused with --reuse when it already holds N evaluations). Then,
first on the raw parts (ARENA_PACKS=0) and again after packing them (`packs.pack`, what
`arena warehouse pack` runs), the bare scan (sql/bare_scan.sql: DuckDB reading the request
columns the scorer reads, chunk lists included, aggregated per evaluation, pass and engine),
a first scoring (`score_warehouse` with its request store emptied: every request read and
swept) and a rescore under the previous protocol version (what an operator's `arena score`
after a protocol change runs, with the request store the first scoring wrote,
scoring/request_store.py) alternate `--repeat` times; the script prints each one's median and
its ratio to the bare scan, the issue's measure (issue 36: at most 4 on parts, 3 packed). Both
reads must give identical frames, and the rescore the frames of a scoring without the store. The plain loop (`--no-plain` skips it) reads each evaluation's rows
with pyarrow into Python lists (one evaluation at a time, so memory stays bounded) and does
everything else in Python: counted requests, the solo speed, the busy-window sweep, the failure
rule, medians and the geometric mean. Both must agree to 1e-9 on every workload ratio and
SpecScore. Results: docs/benchmarks/scoring.md.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

from speculator_arena.protocol import load_protocol
from speculator_arena.protocol.model import WORKLOADS
from speculator_arena.scoring import request_store, score_warehouse
from speculator_arena.warehouse import Warehouse

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the synthetic warehouses
from synthetic import busy_window, write_synthetic_warehouse  # noqa: E402

BARE_SCAN = Path(__file__).resolve().parent / "sql" / "bare_scan.sql"


def _rows(wh: Warehouse, table: str, eid: str, columns) -> list[dict]:
    d = wh.partition_dir(table, eid)
    out = []
    for f in sorted(d.glob("*.parquet")):
        out.extend(pq.read_table(f, columns=columns).to_pylist())
    return out


def plain_python(wh: Warehouse, version: int | None = None) -> dict[str, dict]:
    """Per-row loop: {evaluation_id: {"r_solo": ..., "r_team": ..., "r_busy": ..., "specscore": ...}}."""
    proto = load_protocol(version)
    out = {}
    ids = sorted(p.name.split("=", 1)[1] for p in (wh.raw / "evaluations").iterdir())
    for n, eid in enumerate(ids):
        ev = _rows(wh, "evaluations", eid, ["task_id"])[0]
        tp = proto.task(ev["task_id"])
        passes = {
            (p["pass_id"], p["engine"]): p
            for p in _rows(
                wh, "passes", eid, ["pass_id", "engine", "workload", "lanes", "ends_at", "grace_ends_at", "status"]
            )
        }
        reqs: dict = {}
        for r in _rows(
            wh,
            "requests",
            eid,
            [
                "pass_id",
                "engine",
                "sent_at",
                "last_token_at",
                "ended_at",
                "output_tokens",
                "max_tokens",
                "done",
                "chunk_times",
                "chunk_tokens",
            ],
        ):
            if r["pass_id"].startswith("warmup"):
                continue
            reqs.setdefault((r["pass_id"], r["engine"]), []).append(r)
        speeds, failures, counts = {}, {}, {}
        for key, rs in reqs.items():
            p = passes[key]
            counted = [
                r
                for r in rs
                if r["done"]
                and r["output_tokens"] <= r["max_tokens"]
                and r["sent_at"] < p["ends_at"]
                and r["ended_at"] <= p["grace_ends_at"]
            ]
            failures[key] = len(rs) - len(counted)
            counts[key] = len(rs)
            if tp.workloads[p["workload"]].speed == "request_time":
                secs = sum(r["last_token_at"] - r["sent_at"] for r in counted)
                speeds[key] = sum(r["output_tokens"] for r in counted) / secs if secs > 0 else None
            else:
                intervals = [
                    (r["sent_at"], r["last_token_at"] if r["last_token_at"] is not None else r["ended_at"]) for r in rs
                ]
                chunks = [(t, k) for r in counted for t, k in zip(r["chunk_times"], r["chunk_tokens"])]
                secs, toks = busy_window(intervals, p["lanes"], chunks)
                speeds[key] = toks / secs if secs > 0 else None
        res = {}
        for w in WORKLOADS:
            ratios = []
            for i in range(tp.passes_per_workload):
                pid = f"{w}-{i}"
                c, s = (pid, "candidate"), (pid, "stock")
                if c not in passes or s not in passes or speeds.get(s) is None:
                    ratios.append(None)
                    continue
                excess = failures.get(c, 0) - failures.get(s, 0)
                limit = max(tp.failure_rule.min_excess, tp.failure_rule.share_of_requests * max(counts[c], counts[s]))
                ratios.append(0.0 if excess > limit else (speeds[c] or 0.0) / speeds[s])
            res[f"r_{w}"] = None if None in ratios else statistics.median(ratios)
        rs = [res[f"r_{w}"] for w in WORKLOADS]
        res["specscore"] = None if None in rs else math.prod(rs) ** (1 / 3)
        out[eid] = res
        if (n + 1) % max(1, len(ids) // 10) == 0:
            print(f"  plain loop: {n + 1}/{len(ids)}", file=sys.stderr, flush=True)
    return out


def bare_scan(wh: Warehouse) -> float:
    """Seconds of the baseline (sql/bare_scan.sql): DuckDB reading the requests the scorer reads
    (the packs where current, the parts otherwise: ARENA_PACKS decides, as for the scorer) and
    aggregating them per evaluation, pass and engine."""
    import duckdb

    from speculator_arena.scoring.connection import evaluation_ids
    from speculator_arena.warehouse import packs

    t = time.perf_counter()
    con = duckdb.connect(":memory:")
    try:
        resolved = packs.resolve(wh.home, evaluation_ids(wh, None))
        con.sql(packs.duck_select(con, wh.home, "requests", resolved)).create_view("bare_requests")
        con.execute(BARE_SCAN.read_text()).fetchall()
    finally:
        con.close()
    return time.perf_counter() - t


def timed_round(wh: Warehouse, packed: bool, repeat: int, rescore_version: int):
    """Medians of (bare scan, first scoring, rescore) seconds and the last Scores of both
    scorings, with the packs used or ignored, the three alternated `repeat` times so all see the
    same machine load. First scoring: the request store emptied (scoring/request_store.py), so
    every request is read and swept, and the store written; rescore: under `rescore_version`
    (a protocol change), with the store as the first scoring left it."""
    os.environ["ARENA_PACKS"] = "1" if packed else "0"
    os.environ["ARENA_REQUEST_STORE"] = "1"
    runs = {"bare": [], "first": [], "rescore": []}
    first = rescore = None
    for _ in range(repeat):
        runs["bare"].append(bare_scan(wh))
        shutil.rmtree(request_store.root(wh.home), ignore_errors=True)
        t = time.perf_counter()
        first = score_warehouse(wh)
        runs["first"].append(time.perf_counter() - t)
        t = time.perf_counter()
        rescore = score_warehouse(wh, rescore_version)
        runs["rescore"].append(time.perf_counter() - t)
    return {k: statistics.median(v) for k, v in runs.items()}, runs, first, rescore


def _same(a, b) -> None:
    for name in ("evaluations", "passes", "gates", "figures"):
        pd.testing.assert_frame_equal(getattr(a, name), getattr(b, name), check_exact=True)


def _runs(xs) -> str:
    return ", ".join(f"{x:.2f}" for x in xs)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--home", default="/tmp/arena-score-benchmark")
    ap.add_argument("--reuse", action="store_true", help="reuse the warehouse at --home when it holds N evaluations")
    ap.add_argument("--task", default="qwen3-8b")
    ap.add_argument("--repeat", type=int, default=1, help="bare scan and scoring, alternated, this many times")
    ap.add_argument("--no-plain", action="store_true", help="skip the plain Python loop (minutes at 1,000)")
    args = ap.parse_args(argv)
    wh = Warehouse(Path(args.home))
    have = len(list((wh.raw / "evaluations").glob("evaluation_id=*"))) if (wh.raw / "evaluations").exists() else 0
    if not (args.reuse and have == args.n):
        if have:
            raise SystemExit(f"{args.home} already holds {have} evaluations; remove it or pass --reuse with --n {have}")
        t = time.perf_counter()
        write_synthetic_warehouse(wh, args.n, task_ids=(args.task,), scale="protocol")
        print(f"wrote {args.n} synthetic evaluations in {time.perf_counter() - t:.1f} s", flush=True)
    req_rows = pq.ParquetDataset(str(wh.raw / "requests")).read(columns=["engine"]).num_rows
    print(f"warehouse: {args.n} evaluations, {req_rows} timed requests", flush=True)

    from speculator_arena.warehouse import packs

    latest = load_protocol().version
    results = {}
    for packed in (False, True):
        if packed:
            r = packs.pack(wh.home)
            print(f"packed {r.packed} evaluations in {r.seconds:.1f} s (0: the pack was current)", flush=True)
        med, runs, first, rescore = timed_round(wh, packed, args.repeat, latest - 1)
        where = "packed" if packed else "raw parts"
        results[where] = (first, rescore)
        bare = med["bare"]
        print(
            f"{where}: bare scan {bare:.2f} s; first scoring {med['first']:.2f} s, ratio {med['first'] / bare:.2f}; "
            f"rescore (v{latest - 1}, request store warm) {med['rescore']:.2f} s, ratio {med['rescore'] / bare:.2f} "
            f"(runs: bare {_runs(runs['bare'])}; first {_runs(runs['first'])}; rescore {_runs(runs['rescore'])})",
            flush=True,
        )
    # the packed and the unpacked read must score every evaluation the same, to the last bit,
    # and the rescore through the store as a scoring that reads every request
    _same(results["raw parts"][0], results["packed"][0])
    _same(results["raw parts"][1], results["packed"][1])
    os.environ["ARENA_REQUEST_STORE"] = "0"
    _same(results["packed"][1], score_warehouse(wh, latest - 1))
    print(
        "agreement: packed and raw parts give identical evaluations, passes, gates and figures, first "
        "scoring and rescore; the rescore through the store is identical to one without it",
        flush=True,
    )
    if args.no_plain:
        return 0
    scores = results["packed"][0]

    t = time.perf_counter()
    plain = plain_python(wh)
    t_plain = time.perf_counter() - t
    print(f"plain Python per-row loop: {t_plain:.2f} s (speeds, ratios, SpecScore only)", flush=True)

    ev = scores.evaluations.set_index("evaluation_id")
    worst = 0.0
    for eid, res in plain.items():
        for k in ("r_solo", "r_team", "r_busy", "specscore"):
            a, b = ev.at[eid, k], res[k]
            if b is None or math.isnan(a):
                raise SystemExit(f"disagreement on {eid} {k}: scorer {a}, plain {b} ({ev.at[eid, 'specscore_reason']})")
            worst = max(worst, abs(a - b))
    if worst > 1e-9:
        raise SystemExit(f"scorer and plain loop disagree by {worst}")
    print(f"agreement: every r_w and SpecScore of {len(plain)} evaluations within {worst:.1e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
