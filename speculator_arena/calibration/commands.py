"""`arena calibrate --task T`: a task's calibration (protocol section 10), with progress, through
the calibration assets on this ARENA_HOME's Dagster instance. It resumes: runs already stored
under the candidate's evaluation ids are reused."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("calibrate", help="calibrate a task: A/A runs, references, controls, m/c fit -> protocol candidate")
    p.add_argument("--task", required=True)
    p.add_argument("--candidate", type=int, default=None,
                   help="the candidate's version number (default: the next); give it to resume a calibration")
    p.add_argument("--base", type=int, default=None, help="the version the runs are made under (default: latest)")
    p.add_argument("--aa", type=int, default=4, help="A/A evaluations (at least 4)")
    p.add_argument("--controls", choices=("auto", "yes", "no"), default="auto",
                   help="run the planted attacks as negative controls (auto: where the task runs the dev engine)")
    p.add_argument("--not-honest", action="append", default=[], metavar="REFERENCE",
                   help="a reference known not to be lossless: shown, but it does not widen the limits")
    p.add_argument("--no-fit", action="store_true", help="keep m and c (no short stock passes over the grid)")
    p.add_argument("--fit-grid", choices=("full", "small"), default="full", help="small: m 1,2 x c 0.5,2 (CI)")
    p.add_argument("--fit-seconds", type=float, default=0.0, help="seconds per fit pass (default: the task's busy pass)")
    p.add_argument("--adopt", action="append", default=[], metavar="RUN=EVALUATION",
                   help="use a stored evaluation (made under the base version) for a planned run, e.g. aa-1=ID")
    p.add_argument("--target", default="", help="a prepared target directory (default: prepare the task's)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from speculator_arena.assets.calibration import materialize_calibration
    from speculator_arena.calibration.calibrate import (
        CalibrationOptions,
        resolve_versions,
    )
    from speculator_arena.calibration.candidate import candidate_dir, load_evidence
    from speculator_arena.calibration.evidence import value_table
    from speculator_arena.protocol import load_protocol
    from speculator_arena.warehouse import Warehouse

    load_protocol().task(args.task)   # an unknown task is a clear error before anything runs
    opts = resolve_versions(CalibrationOptions(task_id=args.task, candidate_version=args.candidate,
                                               base_version=args.base, aa_runs=args.aa))
    plan = opts.plan()                # bad options fail here, before anything runs
    adopt = {}
    for item in args.adopt:
        name, sep, eid = item.partition("=")
        if not sep or name not in plan.ids():
            raise ValueError(f"--adopt {item!r}: expected RUN=EVALUATION with RUN one of {sorted(plan.ids())}")
        adopt[name] = eid
    wh = Warehouse()
    config = {"candidate_version": opts.candidate_version, "base_version": opts.base_version, "aa_runs": args.aa,
              "controls": args.controls, "not_honest": list(args.not_honest), "fit": not args.no_fit,
              "fit_grid": args.fit_grid, "fit_pass_seconds": args.fit_seconds, "target": args.target,
              "adopt": adopt}
    materialize_calibration(args.task, config, wh.home)
    ev = load_evidence(wh.home, args.task, opts.candidate_version)
    d = candidate_dir(wh.home, args.task, opts.candidate_version)
    print(f"protocol candidate v{ev['candidate_version']} of {args.task} (runs under v{ev['base_version']}): {d}")
    for r in value_table(ev):
        print(f"  {r['limit']:<34} {r['value']:<40} (was {r['previous']})")
    if ev["problems"]:
        print("DOES NOT SEPARATE the honest runs from every control (publishing needs --override):")
        for p in ev["problems"]:
            print(f"  - {p}")
    print(f"evidence: {d / 'evidence.md'}; publish with: arena protocol publish --task {args.task} "
          f"--candidate {ev['candidate_version']}")
    return 0 if not ev["problems"] else 1
