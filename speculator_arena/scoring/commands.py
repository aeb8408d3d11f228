"""`arena score`: score every stored evaluation under a protocol version.

It prints the scores, never the board: the board as text is `arena board --text` (board/text.py
`read_board_text`), one code path for every text board. `--board` was a second one (it printed
`board_text` over every evaluation); it is gone, and naming it says where the board is.
"""

from __future__ import annotations

import argparse
import sys


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("score", help="score every stored evaluation under a protocol version")
    p.add_argument("--protocol", type=int, default=None, help="protocol version (default: latest)")
    p.add_argument("--evaluation", action="append", default=None, help="score only this evaluation (repeatable)")
    p.add_argument("--json", action="store_true", help="print the evaluations' scores as JSON")
    # gone (the board is `arena board --text`): kept, unlisted, only to say so
    p.add_argument("--board", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--split", default="test", choices=("dev", "test"), help=argparse.SUPPRESS)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Score, then print. A full disk does not stop the printing: the scores are computed from
    the raw rows, and only their convenience copy could not be written (said on stderr)."""
    from speculator_arena.scoring.registry import score_and_record
    from speculator_arena.warehouse import Warehouse

    if args.board:
        print(
            f"arena score: --board is gone; the board as text is `arena board --text --split {args.split}"
            + (f" --protocol {args.protocol}" if args.protocol is not None else "")
            + "` (`arena score` first records the scores, if you want their copy too)",
            file=sys.stderr,
        )
        return 2
    scores = score_and_record(Warehouse(), args.protocol, args.evaluation)
    rc = _print(args, scores)
    if scores.copy_error:  # the scores printed are complete; only their file copy is missing
        print(f"arena score: convenience copy not written: {scores.copy_error}", file=sys.stderr)
    return rc


def _print(args: argparse.Namespace, scores) -> int:
    import math

    from speculator_arena.printing import json_cell, print_json

    ev = scores.evaluations
    if args.json:
        cols = [
            "evaluation_id",
            "task_id",
            "split",
            "label",
            "account_id",
            "is_reference",
            "status",
            "specscore",
            "specscore_reason",
            "r_solo",
            "r_team",
            "r_busy",
            "gates_pass",
            "failed_gates",
            "not_measured_gates",
            "gap_flag",
        ]

        print_json(
            {
                "protocol_version": scores.protocol_version,
                "protocol_digest": scores.protocol_digest,
                "evaluations": [{c: json_cell(r[c]) for c in cols} for _, r in ev.iterrows()],
            }
        )
        return 0
    n = len(ev)
    scored = int(ev["specscore"].notna().sum())
    print(
        f"scored {n} evaluations under protocol v{scores.protocol_version} (digest {scores.protocol_digest[:12]}): "
        f"{scored} with a SpecScore, {n - scored} blank with a reason"
    )
    for r in ev.itertuples():
        val = "-" if math.isnan(r.specscore) else f"{r.specscore:.4f}"
        why = f"  ({r.specscore_reason})" if isinstance(r.specscore_reason, str) else ""
        print(f"  {r.evaluation_id:<28} {r.task_id:<14} {r.split:<5} {str(r.label)[:24]:<24} {val:>8}{why}")
    if scores.copy_path is not None:
        print(f"convenience copy (not authoritative): {scores.copy_path}")
    return 0
