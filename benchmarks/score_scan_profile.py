"""Where the scorer's read and busy-window scan spend their time, step by step, in one thread.

    python benchmarks/score_scan_profile.py HOME [--no-packs] [--former PATH/busy.py]

On a warehouse `score_benchmark.py` wrote (HOME): the time of resolving the packs, of copying
each small table into DuckDB (`scoring/connection.py` `copy_rows`), of reading the requests'
batches alone, and a cProfile of the scan (`busy_scan.scan_batch`, batch after batch, no thread
pool, so the profile sees it). With `--former`, a former `scoring/busy.py` (e.g. `git show
REV:speculator_arena/scoring/busy.py > /tmp/busy_old.py`) is timed against the current kernel on
the same batches, read once (alternated twice), and its results must be identical, batch by
batch. Figures: docs/benchmarks/scoring.md (issue 36).
"""

from __future__ import annotations

import argparse
import cProfile
import importlib.util
import os
import pstats
import sys
import time


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("home")
    ap.add_argument("--no-packs", action="store_true", help="every row from its part (ARENA_PACKS=0)")
    ap.add_argument("--former", help="a former scoring/busy.py to time and check against the current kernel")
    args = ap.parse_args(argv)
    os.environ["ARENA_PACKS"] = "0" if args.no_packs else "1"

    import duckdb
    import numpy as np
    import pyarrow.compute as pc

    from speculator_arena.protocol import load_protocol
    from speculator_arena.scoring import busy_scan, connection
    from speculator_arena.warehouse import Warehouse, packs
    from speculator_arena.warehouse.store import define_scoring_rules

    wh = Warehouse(args.home)
    t = time.perf_counter()
    ids = connection.evaluation_ids(wh, None)
    resolved = packs.resolve(wh.home, ids)
    print(f"resolve {len(ids)} evaluations: {time.perf_counter() - t:.3f} s ({len(resolved.packed_ids)} packed)")
    con = duckdb.connect(":memory:")
    define_scoring_rules(con, load_protocol())
    for table in connection.CACHED:
        t = time.perf_counter()
        connection.copy_rows(con, wh.home, table, resolved)
        print(f"copy_rows {table}: {time.perf_counter() - t:.3f} s")
    passes = con.sql(connection.sql_text("busy_pass_rows.sql")).to_arrow_table()
    passes = passes.filter(pc.fill_null(pc.invert(pc.starts_with(passes["pass_id"], "warmup")), False))
    index = busy_scan.pass_index(passes)
    batches = busy_scan.request_batches(wh.home, resolved)
    t = time.perf_counter()
    tables = [b() for b in batches]
    print(f"read {len(batches)} request batches alone: {time.perf_counter() - t:.3f} s")
    prof = cProfile.Profile()
    t = time.perf_counter()
    prof.enable()
    for b in batches:
        busy_scan.scan_batch(b, passes, index)
    prof.disable()
    print(f"scan_batch x{len(batches)}, read included (one thread, profiled): {time.perf_counter() - t:.3f} s")
    pstats.Stats(prof).sort_stats("tottime").print_stats(15)
    if args.former:
        spec = importlib.util.spec_from_file_location("former_busy", args.former)
        former = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(former)
        kernels = {"current": busy_scan.pass_windows, "former": former.pass_windows}
        read = [lambda t=t: t for t in tables]
        out = {}
        for order in (("former", "current"), ("current", "former")):
            for name in order:
                busy_scan.pass_windows = kernels[name]
                t = time.perf_counter()
                out[name] = [busy_scan.scan_batch(b, passes, index) for b in read]
                print(f"{name} kernel: scan of {len(read)} batches, read excluded: {time.perf_counter() - t:.2f} s")
        busy_scan.pass_windows = kernels["current"]
        for (s1, r1), (s2, r2) in zip(out["current"], out["former"]):
            assert s1 == s2 and r1[:3] == r2[:3] and r1[5].equals(r2[5])
            assert np.array_equal(r1[3], r2[3]) and np.array_equal(r1[4], r2[4])
        print("former and current kernel: identical seconds, tokens and staged rows on every batch")
    return 0


if __name__ == "__main__":
    sys.exit(main())
