"""How much of the A/A pass-to-pass noise is the hypervisor's steal (issue 31; docs/scoring.md
"Steal correction"), read from stored A/A evaluations:

    python benchmarks/steal_noise.py --home /work/aahome9 [--pattern 'aa-noise-v9%']

Per workload: the correlation of a pass's log time ratio (candidate over stock, the same work)
with the difference of the two engines' steal per second (f, summed over the CPUs), and the
spread of the pass ratios and of the evaluations' means when each engine's time is multiplied
by (1 - beta * f), for beta 0 (no correction), 0.5, 1 (the correction v11 takes: each stolen
CPU-second stalls the engine's lock-step threads for that second), 1.5 and 2. Reads the
analysts' views (pass_speeds, raw_contention), not the scorer; the contention limit's cap is
not applied (the figures show what the steal explains, before any bound).
"""

from __future__ import annotations

import argparse
import collections
import math
import statistics
from pathlib import Path

import duckdb

QUERY = Path(__file__).resolve().parent / "sql" / "steal_noise.sql"
BETAS = (0.0, 0.5, 1.0, 1.5, 2.0)


def corr(x: list[float], y: list[float]) -> float:
    mx, my = statistics.mean(x), statistics.mean(y)
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y))
    return sxy / math.sqrt(sum((a - mx) ** 2 for a in x) * sum((b - my) ** 2 for b in y))


def kept(beta: float, f: float) -> float:
    """The share of an engine's time the correction keeps, never under 0.3 (a pass stolen from so
    much that beta * f nears 1 would otherwise dominate the spread)."""
    return max(1 - beta * f, 0.3)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--home", required=True)
    ap.add_argument("--pattern", default="aa-noise-%", help="SQL LIKE pattern of the A/A evaluations' ids")
    args = ap.parse_args()
    con = duckdb.connect(str(Path(args.home) / "arena.duckdb"), read_only=True)
    rows = con.sql(QUERY.read_text().format(pattern=args.pattern.replace("'", "''"))).fetchall()
    passes: dict[tuple, dict[str, tuple[float, float]]] = collections.defaultdict(dict)
    for e, w, i, engine, seconds, f in rows:
        passes[(e, w, i)][engine] = (seconds, f)
    paired = {k: v for k, v in passes.items() if len(v) == 2 and all(s > 0 for s, _ in v.values())}
    print(f"{len({k[0] for k in paired})} evaluations, {len(paired)} passes with both engines")
    for w in ("solo", "team", "busy"):
        keys = [k for k in paired if k[1] == w]
        log_ratio = [math.log(paired[k]["candidate"][0] / paired[k]["stock"][0]) for k in keys]
        steal_diff = [paired[k]["candidate"][1] - paired[k]["stock"][1] for k in keys]
        print(f"{w}: {len(keys)} passes; corr(log time ratio, steal difference) {corr(log_ratio, steal_diff):.2f}")
        for beta in BETAS:
            corrected = [
                lr + math.log(kept(beta, paired[k]["candidate"][1])) - math.log(kept(beta, paired[k]["stock"][1]))
                for k, lr in zip(keys, log_ratio)
            ]
            by_eval = collections.defaultdict(list)
            for k, c in zip(keys, corrected):
                by_eval[k[0]].append(c)
            means = [statistics.mean(v) for v in by_eval.values()]
            print(
                f"  beta {beta:.1f}: pass sd {statistics.stdev(corrected):.3f}, "
                f"sd of the evaluations' means {statistics.stdev(means):.3f}"
            )


if __name__ == "__main__":
    main()
