"""Where the interleaved pairing's A/A spread comes from, read from stored A/A evaluations
(issue 31): a difference between the two engine starts, or the host's speed from one moment to
the next?

    python benchmarks/aa_pass_noise.py --home /work/aahome9

For every interleaved A/A evaluation in the home's warehouse (24 timed passes: 4 per workload and
engine), each pass's log ratio of the candidate's to the stock's time over the requests both
served alike (same session, turn, seed and reply length). If the two starts differed, a pass's
ratio would carry its evaluation's offset and the evaluations' means per workload would spread
more than the passes within an evaluation predict (their sd over the square root of 4); if the
spread is the host's moment-to-moment speed, the two agree. Then, per workload, how far apart
two requests of the same pass are: served at the same moment (team, busy) or one after the other
(solo). Reads the raw Parquet rows directly (DuckDB), not through the scorer.
"""

from __future__ import annotations

import argparse
import collections
import math
import statistics
from pathlib import Path

import duckdb

MATCHED = Path(__file__).resolve().parent / "sql" / "aa_pass_noise.sql"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--home", required=True)
    args = ap.parse_args()
    rows = duckdb.sql(MATCHED.read_text().format(home=args.home)).fetchall()
    by_pass: dict[tuple, list[float]] = collections.defaultdict(list)
    for e, w, p, lr in rows:
        by_pass[(e, w, p)].append(lr)
    pass_lr: dict[tuple, list[float]] = collections.defaultdict(list)
    for (e, w, _), lrs in sorted(by_pass.items()):
        pass_lr[(e, w)].append(statistics.mean(lrs))
    evaluations = sorted({e for e, _ in pass_lr})
    within = math.sqrt(statistics.mean(statistics.variance(v) for v in pass_lr.values()))
    print(f"{len(evaluations)} interleaved A/A evaluations; pass-to-pass sd within one: {within:.3f}")
    for w in ("solo", "team", "busy"):
        means = [statistics.mean(v) for (e, ww), v in pass_lr.items() if ww == w]
        n = statistics.mean(len(v) for (e, ww), v in pass_lr.items() if ww == w)
        same = [statistics.variance(v) for (e, ww, _), v in by_pass.items() if ww == w and len(v) > 1]
        print(
            f"{w}: sd of the evaluations' means {statistics.stdev(means):.3f}, "
            f"predicted by the passes alone {within / math.sqrt(n):.3f}; "
            f"two requests of one pass {math.sqrt(statistics.mean(same)):.3f} apart (sd of log ratio)"
        )


if __name__ == "__main__":
    main()
