"""`arena checkpoints prepare --task T`: build (once) and print the sealed target directory."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("checkpoints", help="prepare sealed target checkpoints")
    csub = p.add_subparsers(dest="checkpoints_command", required=True)
    prep = csub.add_parser("prepare", help="build a task's target directory once; prints its path last")
    prep.add_argument("--task", required=True, help="task id, e.g. local-smollm2")
    prep.add_argument("--home", default=None, help="ARENA_HOME (default: $ARENA_HOME or ./arena_home)")
    prep.set_defaults(func=run_prepare)
    ver = csub.add_parser("verify", help="re-hash a prepared checkpoint against its manifest")
    ver.add_argument("--task", required=True)
    ver.add_argument("--home", default=None)
    ver.set_defaults(func=run_verify)


def run_prepare(args: argparse.Namespace) -> int:
    from speculator_arena.checkpoints import prepare_checkpoint, read_manifest

    path = prepare_checkpoint(args.task, home=args.home)
    manifest = read_manifest(path) or {}
    print(
        f"{args.task}: {len(manifest.get('files', {}))} files, {manifest.get('total_bytes', 0) / 2**20:.1f} MiB, "
        f"from {manifest.get('source', '?')}"
    )
    print(path)
    return 0


def run_verify(args: argparse.Namespace) -> int:
    from speculator_arena.checkpoints import checkpoint_dir, verify_manifest

    path = checkpoint_dir(args.task, args.home)
    problems = verify_manifest(path, full=True)
    for p in problems:
        print(p)
    print("whole" if not problems else f"{len(problems)} problems", path)
    return 0 if not problems else 1
