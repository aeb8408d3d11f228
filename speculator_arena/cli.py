"""The `arena` command. Each domain registers its own subcommands (see COMMAND_MODULES).

Why registration instead of one big parser: the scoring, engine, pools, runner and board
domains each own their commands next to their code, and importing one never imports the
heavy dependencies (torch, streamlit) of another until its command runs.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from speculator_arena import settings
from speculator_arena.diskspace import full_disk
from speculator_arena.errors import ArenaError

COMMAND_MODULES = (
    "speculator_arena.protocol.commands",
    "speculator_arena.calibration.commands",  # after protocol's: it adds `arena protocol publish`
    "speculator_arena.warehouse.commands",
    "speculator_arena.scoring.commands",
    "speculator_arena.checkpoints.commands",
    "speculator_arena.pools.commands",
    "speculator_arena.dagster_project.commands",
    "speculator_arena.dagster_project.sweep",  # `arena sweep` (its driver and its parser, one module)
    "speculator_arena.dashboards.commands",
    "speculator_arena.backends.kubernetes.commands",
    "speculator_arena.frontdoor.commands",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="arena", description="SpeculatorArena platform")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMAND_MODULES:  # every one ships with the package: a failing import is a bug, never skipped
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        rc = args.func(args)
    except KeyboardInterrupt as exc:  # Ctrl-C, or a stop signal during an evaluation (runners/interrupt.py)
        print(f"arena {args.command}: {exc or 'interrupted'}", file=sys.stderr)
        return getattr(exc, "exit_code", 130)
    except Exception as exc:
        # Bad input and a full disk get one clear line, not a traceback; ARENA_DEBUG=1 shows the
        # traceback. A full disk is recognised wherever it was raised (the runner, the scorer,
        # Dagster's sqlite storage) and names the path and the space left (diskspace.py).
        full = full_disk(exc, settings.arena_home(getattr(args, "home", None) or None))
        if full is None and not isinstance(exc, (ArenaError, ValueError, KeyError, FileNotFoundError, RuntimeError)):
            raise
        if settings.flag("ARENA_DEBUG"):
            raise
        if full is not None:
            print(f"arena {args.command}: {full}", file=sys.stderr)
            return 3
        print(f"arena {args.command}: error: {exc}", file=sys.stderr)
        return 2
    return int(rc or 0)


if __name__ == "__main__":
    sys.exit(main())
