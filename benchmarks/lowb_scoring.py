"""Benchmark: LowBArena's scorer (`score_lowb`) against a bare DuckDB scan of the same raw rows.

    python benchmarks/lowb_scoring.py --n 1000 [--home /tmp/lowb-bench] [--reuse] [--repeat 3]

The warehouse: N synthetic measured evaluations of the embedded task `lowb-smollm2`, each written
by tests/scoring/test_lowb_scoring.py `write_evaluation` (both engines' requests of the three
workloads, memory samples, 6 domains x 12 items x 2 runs, tensors, checkpoint, starts) with its KL
probe at the task's scale (24 prompts x `--positions` positions x 2 engines, top-20 each) instead of
the tests' 3 x 4. Then the bare scan (benchmarks/sql/lowb_bare_scan.sql: every column the scorer
reads, aggregated per evaluation and engine) and a scoring alternate `--repeat` times; the script
prints each one's median and the ratio (the speculator scorer's measure, docs/benchmarks/scoring.md).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from speculator_arena.scoring.lowb import score_lowb
from speculator_arena.warehouse import Warehouse
from speculator_arena.warehouse.schema import LOWB_LOGPROBS

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "scoring"))  # the synthetic evaluation writer
from test_lowb_scoring import write_evaluation  # noqa: E402


def kl_rows(eid: str, prompts: int, positions: int, k: int, rng) -> pa.Table:
    """Both engines' top-k prompt_logprobs at every position, vectorized (the scale of a real probe)."""
    n = prompts * positions
    logits = rng.normal(size=(n, 64)) * 2
    tables = []
    for engine, noise in (("stock", 0.0), ("candidate", 0.2)):
        lg = logits + rng.normal(size=logits.shape) * noise
        lp = lg - np.log(np.exp(lg).sum(1, keepdims=True))
        top = np.argsort(-lp, 1)[:, :k]
        token = np.arange(n) % 64
        tables.append(
            pa.table(
                {
                    "evaluation_id": [eid] * n,
                    "engine": [engine] * n,
                    "prompt_id": [f"p{i // positions}" for i in range(n)],
                    "position": np.arange(n) % positions,
                    "token_id": token,
                    "token_logprob": lp[np.arange(n), token],
                    "top_ids": pa.FixedSizeListArray.from_arrays(top.ravel(), k).cast(pa.list_(pa.int64())),
                    "top_logprobs": pa.FixedSizeListArray.from_arrays(np.take_along_axis(lp, top, 1).ravel(), k).cast(
                        pa.list_(pa.float64())
                    ),
                }
            )
        )
    return pa.concat_tables(tables).cast(LOWB_LOGPROBS)


def write(home: Path, n: int, positions: int) -> None:
    os.environ["ARENA_CATALOG"] = "0"  # no catalog upsert per write (a bulk load)
    wh = Warehouse(home)
    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    for i in range(n):
        eid = f"bench-{i:05d}"
        write_evaluation(wh, eid, omit=("lowb_logprobs",), drop_points=float(i % 7), length_factor=1 + (i % 5) / 50)
        wh.write_rows("lowb_logprobs", eid, kl_rows(eid, 24, positions, 20, rng))
    print(f"wrote {n} evaluations in {time.perf_counter() - t0:.1f} s")


def bare_scan(home: Path) -> int:
    import duckdb

    sql = (HERE / "sql" / "lowb_bare_scan.sql").read_text().replace("{root}", str(home / "raw"))
    return len(duckdb.connect(":memory:").execute(sql).fetchall())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--home", type=Path, default=Path("/tmp/lowb-bench"))
    ap.add_argument("--positions", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--reuse", action="store_true")
    a = ap.parse_args()
    if not a.reuse:
        shutil.rmtree(a.home, ignore_errors=True)
        write(a.home, a.n, a.positions)
    wh = Warehouse(a.home)
    bare, scored = [], []
    for _ in range(a.repeat):
        t0 = time.perf_counter()
        rows = bare_scan(a.home)
        bare.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        s = score_lowb(wh)
        scored.append(time.perf_counter() - t0)
        assert len(s.evaluations) == a.n and rows > 0, (len(s.evaluations), rows)
    b, c = statistics.median(bare), statistics.median(scored)
    print(f"bare scan: {b:.2f} s {[round(x, 2) for x in bare]}")
    print(f"score_lowb: {c:.2f} s {[round(x, 2) for x in scored]}")
    print(f"ratio: {c / b:.2f}")


if __name__ == "__main__":
    main()
