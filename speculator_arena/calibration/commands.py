"""`arena protocol publish` and `arena protocol candidates`: the calibration's actions of the
`arena protocol` command.

Why here and not in protocol/commands.py: both read and write a calibration's candidates
(calibration/candidate.py, calibration/publish.py), and the protocol, a base package, imports
nothing above it. The command line is the protocol's parser (protocol/commands.py registers it
first, cli.py's COMMAND_MODULES order); this adds its options and puts these two actions into
the mapping of actions that parser carries.
"""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.choices.get("protocol")
    if p is None:
        raise RuntimeError("calibration/commands.py extends `arena protocol`: register protocol/commands.py first")
    p.get_default("protocol_actions").update(publish=publish, candidates=candidates)
    p.add_argument("--task", default=None, help="publish: the calibrated task")
    p.add_argument("--candidate", type=int, default=None, help="publish: the candidate's version number")
    p.add_argument(
        "--override",
        action="store_true",
        help="publish a candidate whose evidence says a control passes (recorded with the version)",
    )
    p.add_argument("--by", default=None, help="who publishes (default: ARENA_OPERATOR or the login name)")


def candidates(args: argparse.Namespace) -> int:
    """The calibration candidates of this ARENA_HOME (of `--task` only, when given)."""
    from speculator_arena.calibration.candidate import candidate_versions, load_evidence
    from speculator_arena.warehouse import Warehouse

    wh = Warehouse()
    for task, v in candidate_versions(wh.home, args.task):
        ev = load_evidence(wh.home, task, v)
        state = "separates" if not ev["problems"] else f"{len(ev['problems'])} problem(s)"
        print(f"{task} v{v} (runs under v{ev['base_version']}, {ev['made_at']}): {state}")
    return 0


def publish(args: argparse.Namespace) -> int:
    """Make a calibration's candidate the version in force (an operator's action)."""
    from speculator_arena.warehouse import Warehouse

    wh = Warehouse()
    if args.task is None or args.candidate is None:
        raise ValueError("publish needs --task and --candidate")
    from speculator_arena.protocol.lowb import is_lowb_task

    if is_lowb_task(args.task):
        from speculator_arena.calibration.lowb import publish_lowb

        path = publish_lowb(wh.home, args.task, args.candidate)
        print(f"LowBArena protocol p{args.candidate} is in force ({path})")
        return 0
    from speculator_arena.calibration.publish import publish as publish_candidate

    rec = publish_candidate(wh.home, args.task, args.candidate, override=args.override, by=args.by, progress=print)
    print(
        f"protocol v{rec['version']} is in force (published by {rec['published_by']} at {rec['published_at']}"
        + ("; OVERRIDE of: " + "; ".join(rec["problems"]) if rec["override"] else "")
        + ")"
    )
    return 0
