"""`arena data fetch`: materialise the data folder the pools read, from the manifest
(pools/ingest/data_manifest.yaml), every file checked against its sha256."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("data", help="the data the session pools are built from (manifest, fetch)")
    dsub = p.add_subparsers(dest="data_command", required=True)
    f = dsub.add_parser(
        "fetch",
        help="materialise every manifest file into the data folder, from a mirror or the Hugging Face hub, "
        "each checked against its sha256",
    )
    f.add_argument(
        "--dest",
        default="",
        help="the data folder to fill (default: ARENA_SHARED_DATA if set, else $ARENA_HOME/data)",
    )
    f.add_argument(
        "--mirror",
        default="",
        help="a local copy of the data folder to copy from (default: ARENA_SHARED_DATA, else ../shared/data)",
    )
    f.add_argument("--home", default=None, help="ARENA_HOME (default: $ARENA_HOME or ./arena_home)")
    f.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="PATTERN",
        help="only the files matching this path pattern or folder (repeatable), e.g. traces/ or '*.csv'",
    )
    f.add_argument("--manifest", default="", help="a manifest of your own (default: the package's)")
    f.set_defaults(func=run_fetch)


def run_fetch(args: argparse.Namespace) -> int:
    from speculator_arena import settings
    from speculator_arena.pools.ingest import data_fetch

    dest = Path(args.dest or settings.raw("ARENA_SHARED_DATA") or data_fetch.fetched_dir(args.home))
    mirror = Path(args.mirror).expanduser() if args.mirror else data_fetch.default_mirror()
    if args.mirror and not mirror.is_dir():
        raise FileNotFoundError(f"--mirror {mirror}: no such folder")
    files = data_fetch.select(data_fetch.load_manifest(args.manifest or None), args.only)
    print(
        f"[data] {len(files)} file(s) into {dest.expanduser().resolve()}; mirror: {mirror or 'none'}",
        file=sys.stderr,
        flush=True,
    )
    res = data_fetch.fetch(dest, mirror, files, progress=lambda m: print(m, file=sys.stderr, flush=True))
    print(
        f"[data] {len(res.installed)} installed, {len(res.present)} already there, {len(res.failed)} not installed; "
        f"data folder {res.dest}"
    )
    for path, why in res.failed.items():
        print(f"[data] NOT INSTALLED {path}: {why}")
    if res.ok and not args.dest and not settings.raw("ARENA_SHARED_DATA"):
        print(f"[data] the pools read {res.dest} when neither --data, ARENA_SHARED_DATA nor ../shared/data is there")
    return 0 if res.ok else 1
