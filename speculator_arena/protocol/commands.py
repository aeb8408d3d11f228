"""`arena protocol`: print a protocol version as served at GET /api/protocol.

`arena protocol publish` and `arena protocol candidates` are the calibration's: its CLI adapter
(calibration/commands.py, registered after this one) adds them and their options to this
parser, so that the protocol imports nothing above it. The actions are a mapping the parser
carries (its `choices`, and the default `protocol_actions`), from each name to its handler.
"""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    actions = {"show": show}  # calibration/commands.py adds "publish" and "candidates"
    p = sub.add_parser("protocol", help="print a protocol version (what GET /api/protocol serves); publish a candidate")
    p.add_argument(
        "action",
        nargs="?",
        choices=actions,
        default="show",
        help="publish: make a calibration's candidate the version in force (an operator's action); "
        "candidates: list the calibration candidates of this ARENA_HOME",
    )
    p.add_argument("--version", type=int, default=None, help="protocol version (default: latest)")
    p.add_argument("--json", action="store_true", help="print the whole document as JSON")
    p.add_argument("--list", action="store_true", help="list the available versions")
    p.set_defaults(func=run, protocol_actions=actions)


def run(args: argparse.Namespace) -> int:
    return args.protocol_actions[args.action](args)


def show(args: argparse.Namespace) -> int:
    from speculator_arena.printing import print_json
    from speculator_arena.protocol import available_versions, load_protocol

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
