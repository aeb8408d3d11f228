"""`arena protocol`: print a protocol version as served at GET /api/protocol."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("protocol", help="print a protocol version (what GET /api/protocol serves); publish a candidate")
    p.add_argument(
        "action",
        nargs="?",
        choices=("show", "publish", "candidates"),
        default="show",
        help="publish: make a calibration's candidate the version in force (an operator's action); "
        "candidates: list the calibration candidates of this ARENA_HOME",
    )
    p.add_argument("--task", default=None, help="publish: the calibrated task")
    p.add_argument("--candidate", type=int, default=None, help="publish: the candidate's version number")
    p.add_argument(
        "--override",
        action="store_true",
        help="publish a candidate whose evidence says a control passes (recorded with the version)",
    )
    p.add_argument("--by", default=None, help="who publishes (default: ARENA_OPERATOR or the login name)")
    p.add_argument("--version", type=int, default=None, help="protocol version (default: latest)")
    p.add_argument("--json", action="store_true", help="print the whole document as JSON")
    p.add_argument("--list", action="store_true", help="list the available versions")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from speculator_arena.printing import print_json
    from speculator_arena.protocol import available_versions, load_protocol

    if args.action != "show":
        return _candidates(args)
    if args.list:
        for v in available_versions():
            print(f"v{v}")
        return 0
    proto = load_protocol(args.version)
    if args.json:
        print_json(proto.as_document())
        return 0
    print(f"SpeculatorArena protocol v{proto.version} (published {proto.published})")
    for task_id, task in proto.tasks.items():
        tp = proto.task(task_id)
        scope = "public" if task.public else "not part of the public protocol"
        lanes = ", ".join(f"{w} {n}" for w, n in tp.lanes.items())
        print(f"  {task_id}: {task.model} @ {task.revision} ({scope}); window {task.max_model_len}; lanes {lanes}")
    return 0


def _candidates(args: argparse.Namespace) -> int:
    from speculator_arena.calibration.candidate import candidate_versions, load_evidence
    from speculator_arena.warehouse import Warehouse

    wh = Warehouse()
    if args.action == "candidates":
        for task, v in candidate_versions(wh.home, args.task):
            ev = load_evidence(wh.home, task, v)
            state = "separates" if not ev["problems"] else f"{len(ev['problems'])} problem(s)"
            print(f"{task} v{v} (runs under v{ev['base_version']}, {ev['made_at']}): {state}")
        return 0
    if args.task is None or args.candidate is None:
        raise ValueError("publish needs --task and --candidate")
    from speculator_arena.calibration.publish import publish

    rec = publish(wh.home, args.task, args.candidate, override=args.override, by=args.by, progress=print)
    print(
        f"protocol v{rec['version']} is in force (published by {rec['published_by']} at {rec['published_at']}"
        + ("; OVERRIDE of: " + "; ".join(rec["problems"]) if rec["override"] else "")
        + ")"
    )
    return 0
