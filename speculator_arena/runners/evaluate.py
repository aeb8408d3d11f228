"""`python -m speculator_arena.runners.evaluate`: one paired evaluation without Dagster.

The same harness `arena evaluate` launches through the Dagster asset; this entry point exists
for machines that have only the runner's dependencies (the GPU image: torch, transformers,
httpx, pyarrow, pynvml; no Dagster, no DuckDB). It writes raw Parquet under ARENA_HOME.

    python -m speculator_arena.runners.evaluate --task local-smollm2 --engine engines/dev-ngram
    python -m speculator_arena.runners.evaluate --resume <evaluation_id>
    python -m speculator_arena.runners.evaluate --task local-smollm2 --engine engines/dev-stock \
        --fit 1:0.5,2:2 --evaluation-id cal-local-smollm2-v16-fit --account arena-calibration
"""

from __future__ import annotations

import argparse
import json
import sys


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--task", help="task id, e.g. local-smollm2")
    p.add_argument("--engine", help="engine directory (launch.sh serve) or .tar.gz")
    p.add_argument("--split", default="dev", choices=["dev", "test"])
    p.add_argument("--stock-engine", default=None, help="stock engine directory (default: the task's stock reference)")
    p.add_argument("--label", default=None)
    p.add_argument("--account", default=None)
    p.add_argument("--reference", action="store_true", help="mark as a reference evaluation")
    p.add_argument("--kind", default="other", help="solution kind (ngram, suffix, draft, eagle3, mtp, other, none)")
    p.add_argument("--speculator", default=None, help="sealed speculator directory (none: an empty one)")
    p.add_argument("--target", default=None, help="prepared target directory (default: prepare the task's)")
    p.add_argument("--evaluation-id", default=None)
    p.add_argument("--home", default=None, help="ARENA_HOME (default: $ARENA_HOME or ./arena_home)")
    p.add_argument(
        "--fit",
        metavar="M:C,...",
        default=None,
        help="the calibration's m/c fit instead of a paired evaluation: one short stock pass of busy per "
        "grid point (the engine is the stock engine; `arena calibrate` makes these itself)",
    )
    p.add_argument("--fit-seconds", type=float, default=None, help="with --fit: seconds per pass (default: busy's)")
    p.add_argument(
        "--resume",
        metavar="EVALUATION_ID",
        default=None,
        help="a `running` evaluation whose runner died: clean up and mark it void",
    )


def summary(home, evaluation_id: str):
    """The stored evaluation's `EvaluationSummary` (runners/summary.py), not yet scored."""
    from speculator_arena.runners.summary import EvaluationSummary
    from speculator_arena.warehouse.evaluations import current_row
    from speculator_arena.warehouse.schema import TABLES
    from speculator_arena.warehouse.store import Warehouse

    wh = Warehouse(home)
    row = current_row(wh, evaluation_id) or {}
    return EvaluationSummary(
        evaluation_id=evaluation_id,
        status=row.get("status"),
        void_reason=row.get("void_reason"),
        failure_reason=row.get("failure_reason"),
        rows={t: wh.read_table(t, evaluation_id).num_rows for t in TABLES},
        home=str(wh.home),
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m speculator_arena.runners.evaluate",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(p)
    args = p.parse_args(argv)
    from speculator_arena.diskspace import full_disk
    from speculator_arena.rules.status import FINAL
    from speculator_arena.runners.harness import Evaluation, resume_dead
    from speculator_arena.runners.spec import spec_from_args
    from speculator_arena.warehouse import analysts
    from speculator_arena.warehouse.store import Warehouse

    try:
        if args.resume:
            resume_dead(Warehouse(args.home), args.resume)
            eid = args.resume
        else:
            spec = spec_from_args(args)
            Evaluation(spec, home=args.home).run()
            eid = spec.evaluation_id
    except Exception as exc:  # a full disk is one line (diskspace.py), anything else a traceback
        full = full_disk(exc, Warehouse(args.home).home)
        if full is None:
            raise
        print(f"[evaluate] {full}", file=sys.stderr)
        return 3
    analysts.refresh_after_evaluation(args.home, say=lambda m: print(f"[analysts] {m}", file=sys.stderr))
    s = summary(args.home, eid)
    print(json.dumps(s.to_dict(), indent=1))
    return 0 if s.status in FINAL else 1


if __name__ == "__main__":
    sys.exit(main())
