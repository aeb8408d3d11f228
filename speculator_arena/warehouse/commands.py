"""`arena warehouse`: the operator's upkeep of a warehouse's rebuildable copies (catalog, packs, analysts' database)."""

from __future__ import annotations

import argparse
import sys


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("warehouse", help="refresh the warehouse's evaluations catalog, packs and analysts' database")
    wsub = p.add_subparsers(dest="warehouse_command", required=True)
    pk = wsub.add_parser("pack", help="pack finished evaluations' raw rows (faster reads; never authoritative)")
    pk.add_argument("--full", action="store_true", help="rewrite every live pack as one")
    pk.set_defaults(func=run_pack)
    ct = wsub.add_parser("catalog", help="refresh the evaluations catalog (after a bulk load)")
    ct.set_defaults(func=run_catalog)
    an = wsub.add_parser("analysts", help="rebuild the analysts' database $ARENA_HOME/arena.duckdb (no hidden text)")
    an.set_defaults(func=run_analysts)


def run_pack(args: argparse.Namespace) -> int:
    from speculator_arena.warehouse import catalog, packs
    from speculator_arena.warehouse.store import arena_home

    home = arena_home()
    if not (home / "raw").is_dir():
        raise FileNotFoundError(f"no warehouse at {home} (set ARENA_HOME)")
    catalog.refresh(home)

    def progress(done: int, total: int) -> None:
        print(f"\r  packed {done}/{total} evaluations", end="", file=sys.stderr, flush=True)

    r = packs.pack(home, full=args.full, progress=progress)
    print(file=sys.stderr)
    if r.pack is None:
        print(
            f"nothing to pack in {home}: every finished evaluation is in a current pack"
            + (
                f" ({r.skipped_recent} written in the last seconds are left for the next run)"
                if r.skipped_recent
                else ""
            )
        )
    else:
        print(
            f"packed {r.packed} evaluations into {r.pack} in {r.seconds:.1f} s"
            + ("; the earlier packs are retired" if r.rewritten else "")
        )
    if r.removed:
        print(f"removed {r.removed} retired pack(s)")
    return 0


def run_catalog(args: argparse.Namespace) -> int:
    from speculator_arena.warehouse import catalog
    from speculator_arena.warehouse.store import arena_home

    path, n = catalog.refresh(arena_home())
    print(f"catalog {path}: {n} partition(s) read from their parts")
    return 0


def run_analysts(args: argparse.Namespace) -> int:
    from speculator_arena.warehouse import analysts

    r = analysts.refresh()
    rows = ", ".join(f"{t} {n}" for t, n in r.rows.items())
    print(
        f"analysts' database {r.path} rebuilt in {r.seconds:.1f} s ({rows}); text columns of "
        f"{r.withheld_test_evaluations} test-split evaluation(s) withheld. Open it with: duckdb -readonly {r.path}"
    )
    return 0
