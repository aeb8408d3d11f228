"""The commands that run the arena's Dagster assets: `arena evaluate`, `arena demo`, `arena pools`,
`arena queue` and `arena calibrate`. They parse arguments and call the launchers (launch.py); the domains they
reach (runners, pools, front door) never import Dagster's side.

`arena evaluate` and `arena demo` run on the Dagster instance of ARENA_HOME, so
`DAGSTER_HOME=$ARENA_HOME/dagster dagster dev` shows what ran. Machines without Dagster run the
same harness with `python -m speculator_arena.runners.evaluate`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time


def register(sub: argparse._SubParsersAction) -> None:
    from speculator_arena.backends import BACKENDS
    from speculator_arena.runners.evaluate import add_arguments

    e = sub.add_parser("evaluate", help="run one paired evaluation (Dagster asset): on this machine or in a GPU pod")
    add_arguments(e)
    e.add_argument(
        "--backend",
        choices=BACKENDS,
        default="",
        help="local (this machine) or kubernetes (a GPU pod; settings: ARENA_K8S_*, docs/operators/kubernetes.md); "
        "default: ARENA_BACKEND, else local",
    )
    e.add_argument(
        "--rerun-contended",
        type=int,
        default=0,
        metavar="N",
        help="make an evaluation voided because the host was contended again, up to N times (new ids)",
    )
    e.set_defaults(func=_evaluate)
    d = sub.add_parser("demo", help="build the local pools, evaluate the development references, print the board")
    d.add_argument("--task", default="local-smollm2")
    d.add_argument("--home", default=None, help="ARENA_HOME (default: $ARENA_HOME or ./arena_home)")
    d.add_argument(
        "--only", nargs="*", default=None, help="reference names to evaluate (default: the A/A reference and n-gram)"
    )
    d.add_argument("--all", action="store_true", help="evaluate every development reference (self-draft too)")
    d.set_defaults(func=_demo)

    p = sub.add_parser("pools", help="build and inspect session pools")
    ps = p.add_subparsers(dest="pools_command", required=True)
    b = ps.add_parser("build", help="materialize the pool assets of one task (Dagster, in-process)")
    b.add_argument("--task", required=True, help="task id (protocol), e.g. local-smollm2 or qwen3-8b")
    b.add_argument(
        "--data",
        default="",
        help="data folder (default: ARENA_SHARED_DATA, else ../shared/data, else $ARENA_HOME/data: `arena data fetch`)",
    )
    b.add_argument("--production-stats", default="", help="operators' production structure statistics (JSON)")
    b.add_argument("--cc-traces", default="", help="AgentX cc-traces file (Weka format) for the agent structure")
    b.add_argument(
        "--sources",
        default="",
        help="declaration of conversation sets (YAML; default: ARENA_POOL_SOURCES, "
        "else the shipped one; docs/pools.md)",
    )
    b.add_argument(
        "--write-repo-card", action="store_true", help="also write the data card into the repo's data_cards/"
    )
    b.add_argument("--home", default="", help="ARENA_HOME (default: the environment's)")
    b.set_defaults(func=_pools_build)
    s = ps.add_parser("show", help="print a built pool's manifest (counts only)")
    s.add_argument("--task", required=True)
    s.add_argument("--split", default="dev", choices=["dev", "test"])
    s.set_defaults(func=_pools_show)

    q = sub.add_parser(
        "queue", help="the queue (submissions, queued calibrations): list it, or work it without the Dagster daemon"
    )
    qsub = q.add_subparsers(dest="action", required=True)
    qsub.add_parser("list", help="accepted submissions and their evaluations' status").set_defaults(func=_queue_list)
    w = qsub.add_parser(
        "work", help="tick the queue's sensors in-process (queued calibrations first) and run what they start"
    )
    w.add_argument(
        "--once", action="store_true", help="one tick: run what it starts (one evaluation per free device), then exit"
    )
    w.add_argument("--interval", type=float, default=15.0)
    w.set_defaults(func=_queue_work)

    p = sub.add_parser(
        "calibrate", help="calibrate a task: A/A runs, references, controls, m/c fit -> protocol candidate"
    )
    p.add_argument("--task", required=True)
    p.add_argument(
        "--candidate",
        type=int,
        default=None,
        help="the candidate's version number (default: the next); give it to resume a calibration",
    )
    p.add_argument("--base", type=int, default=None, help="the version the runs are made under (default: latest)")
    p.add_argument(
        "--aa",
        type=int,
        default=4,
        help="A/A evaluations (at least 4; a LowBArena task: at least 2, BF16 beside itself)",
    )
    p.add_argument(
        "--controls",
        choices=("auto", "yes", "no"),
        default="auto",
        help="run the planted attacks as negative controls (auto: where the task runs the dev engine)",
    )
    p.add_argument(
        "--not-honest",
        action="append",
        default=[],
        metavar="REFERENCE",
        help="a reference known not to be lossless: shown, but it does not widen the limits",
    )
    p.add_argument("--no-fit", action="store_true", help="keep m and c (no short stock passes over the grid)")
    p.add_argument("--fit-grid", choices=("full", "small"), default="full", help="small: m 1,2 x c 0.5,2 (CI)")
    p.add_argument(
        "--fit-seconds", type=float, default=0.0, help="seconds per fit pass (default: the task's busy pass)"
    )
    p.add_argument(
        "--adopt",
        action="append",
        default=[],
        metavar="RUN=EVALUATION",
        help="use a stored evaluation (made under the base version) for a planned run, e.g. aa-1=ID",
    )
    p.add_argument("--target", default="", help="a prepared target directory (default: prepare the task's)")
    p.add_argument(
        "--backend",
        choices=BACKENDS,
        default="",
        help="where the calibration's evaluations run (default: ARENA_BACKEND)",
    )
    p.add_argument(
        "--queue",
        action="store_true",
        help="leave it to the queue: its evaluations run one per free device (the calibration_queue sensor, "
        "or `arena queue work`), then its assets; this command returns at once",
    )
    p.set_defaults(func=_calibrate)


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _evaluate(args) -> int:
    from speculator_arena.dagster_project import launch
    from speculator_arena.printing import print_json
    from speculator_arena.runners.evaluate import summary
    from speculator_arena.runners.spec import spec_from_args
    from speculator_arena.warehouse import Warehouse, arena_home

    home = arena_home(args.home)
    if args.resume:
        from speculator_arena.backends import resume

        resume(Warehouse(home), args.resume, progress=_say)
        print_json(summary(home, args.resume).to_dict())
        return 0
    s = launch.evaluate(
        spec_from_args(args), home, backend=args.backend, progress=_say, rerun_contended=args.rerun_contended
    )
    print_json(s.to_dict())
    return 0


DEMO_RERUNS = 2  # a contended evaluation is made again this many times (SCORING.md: the operator re-runs it)
# The references the demo evaluates unless told otherwise: the A/A reference (the stock engine
# against itself, which must sit at 1) and n-gram (what speculation buys here). Why not all three:
# an evaluation of the embedded task takes about 6 minutes on 2 cores under v9's interleaved
# pairing (7.5 under v8's six passes, 5 under v5-v7's mirrored one), and the demo's budget is 15
# (docs/benchmarks/aa_noise.md);
# `--all` adds self-draft.
DEMO_KINDS = ("none", "ngram")


def _demo(args) -> int:
    """The main job on the embedded default: pools, every development reference against the stock
    engine (an evaluation the host's other work voided is made again, a few times at most), the
    board. Exits 0 only when every evaluation it reports was measured and scored, not void."""
    from speculator_arena.dagster_project import launch
    from speculator_arena.protocol import load_protocol
    from speculator_arena.warehouse import Warehouse, arena_home

    t0 = time.time()
    home = arena_home(args.home)
    from speculator_arena.protocol.lowb import is_lowb_task

    if is_lowb_task(args.task):  # LowBArena's embedded default (lowb_demo.py)
        from speculator_arena.dagster_project.lowb_demo import run_lowb_demo

        return run_lowb_demo(args.task, home, only=args.only)
    task = load_protocol().task(args.task)

    def step(msg: str) -> None:
        _say(f"[demo {time.time() - t0:5.0f} s] {msg}")

    from speculator_arena.runners.privileges import preflight

    preflight()  # an install its engine user cannot reach is refused now, before anything is built
    step(f"ARENA_HOME {home}; task {args.task}")
    _ensure_pools(args.task, home, step)
    from speculator_arena.checkpoints import prepare_checkpoint

    step("preparing the sealed target checkpoint")
    target = prepare_checkpoint(args.task, home=home)
    step(f"target ready: {target}")
    from speculator_arena.runners.spec import reference_spec

    refs = [
        r
        for r in task.task.references
        if (r.name in args.only if args.only is not None else args.all or r.kind in DEMO_KINDS)
    ]
    results = []
    for k, ref in enumerate(refs, 1):
        step(f"evaluation {k}/{len(refs)}: {ref.name} ({ref.engine}) against the stock engine")
        s = launch.evaluate(
            reference_spec(args.task, ref, str(target)), home, progress=step, rerun_contended=DEMO_RERUNS
        )
        results.append((ref.name, s))
        step(f"{ref.name}: {_demo_line(s)}")
    step("scoring every stored evaluation")
    scores = launch.score(home)
    from speculator_arena.board.text import board_text

    print(board_text(scores, split="dev", task_ids=[args.task]))
    unmeasured = [(name, s) for name, s in results if not s.scored]
    for name, s in unmeasured:
        _say(f"[demo] {name}: NOT MEASURED, {_demo_line(s)}")
    if any(s.contended for _, s in unmeasured):
        _say(
            "[demo] other work used this machine's CPU during the timed passes, and every attempt was void: "
            "stop it (see the processes named above), then run `arena demo` again; an evaluation needs an idle "
            "machine (docs/operators/evaluations.md, host contention)"
        )
    step(
        f"done in {time.time() - t0:.0f} s; warehouse {Warehouse(home).home}; "
        f"`DAGSTER_HOME={home}/dagster dagster dev` shows the runs, `arena board` the board"
    )
    return 1 if unmeasured else 0


def _demo_line(s) -> str:
    """How an evaluation (an `EvaluationSummary`) ended, in one line: its outcome, and its attempts
    when it was made again."""
    o = s.outcome
    if s.scored:
        text = (
            f"SpecScore {o.specscore:.3f}"
            if o is not None and o.specscore is not None
            else (o and o.reason) or s.status
        )
    else:
        text = f"{s.status}: {s.why}"
    tries = s.attempts
    if len(tries) > 1:
        text += (
            f" (attempt {len(tries)} of {len(tries)}; earlier: "
            + "; ".join(f"{a.evaluation_id} {a.status}: {a.why[:160]}" for a in tries[:-1])
            + ")"
        )
    return text


def _ensure_pools(task_id: str, home, step) -> None:
    from speculator_arena.dagster_project import launch
    from speculator_arena.pools.api import PoolNotBuilt, load_pool

    try:
        load_pool(task_id, "dev", home=home)
        step("session pools already built")
        return
    except PoolNotBuilt:
        pass
    from speculator_arena.pools.ingest.data_fetch import require_data

    step(f"data folder {require_data(home=home)}")  # none, or files missing: one error naming them and where from
    step("building the session pools (Dagster assets, in-process)")
    launch.build_pools(task_id, home=str(home))
    step("session pools built")


def _pools_build(args) -> int:
    from speculator_arena.dagster_project import launch
    from speculator_arena.pools.layout import data_card_dir, pool_root, split_folder
    from speculator_arena.pools.settings import operator_key

    t0 = time.time()
    print(f"[pools] building {args.task} (Dagster assets, in-process)...", flush=True)
    if operator_key() is None:
        print("[pools] no ARENA_POOL_KEY: the hidden test pool will not be built", flush=True)
    from speculator_arena.pools.ingest.data_fetch import require_data

    require_data(args.data or None, args.home or None)  # none, or files missing: one error naming them
    try:
        res = launch.build_pools(
            args.task,
            data=args.data,
            production_stats=args.production_stats,
            cc_traces=args.cc_traces,
            write_repo_card=args.write_repo_card,
            home=args.home,
            sources=args.sources,
        )
    except launch.PoolBuildFailed as exc:
        print(f"[pools] {exc}", flush=True)
        return 1
    failed = [c for c in res.get_asset_check_evaluations() if not c.passed]
    for c in res.get_asset_check_evaluations():
        print(f"[pools] check {c.asset_key.to_user_string()}:{c.check_name}: {'passed' if c.passed else 'FAILED'}")
    root = pool_root(args.task, args.home or None)
    dev = json.loads((split_folder(root, "dev") / "manifest.json").read_text())
    print(
        f"[pools] dev: {dev['sessions']} sessions {dev['families']}, {dev['turns']} turns, "
        f"{dev.get('warmup', 0)} warm-up, {dev['fidelity']} fidelity texts"
    )
    test = split_folder(root, "test") / "manifest.json"
    if test.is_file():
        t = json.loads(test.read_text())
        print(f"[pools] test (hidden): {t['sessions']} sessions, {t['paraphrased_turns']} paraphrased turns")
    print(f"[pools] data card: {data_card_dir(root) / (args.task + '.md')}")
    print(f"[pools] done in {time.time() - t0:.0f} s")
    return 1 if failed else 0


def _pools_show(args) -> int:
    from speculator_arena.pools.api import load_pool
    from speculator_arena.printing import print_json

    print_json(load_pool(args.task, args.split, require=False).manifest)
    return 0


def _queue_list(args) -> int:
    from speculator_arena.printing import print_json
    from speculator_arena.rules.status import ACCEPTED, QUEUED
    from speculator_arena.warehouse import Warehouse
    from speculator_arena.warehouse.evaluations import statuses as evaluation_statuses

    wh = Warehouse()
    from speculator_arena.frontdoor.state import connect, sql

    rows = [dict(r) for r in connect().execute(sql("queue_list"))]
    statuses = evaluation_statuses(wh)
    print_json(
        [
            dict(
                r,
                status=statuses.get(r["evaluation_id"], QUEUED)
                if r["intake_status"] == ACCEPTED
                else r["intake_status"],
            )
            for r in rows
        ]
    )
    return 0


def _queue_work(args) -> int:
    import time

    from speculator_arena.backends import chosen
    from speculator_arena.dagster_project import launch
    from speculator_arena.runners.privileges import worker_preflight
    from speculator_arena.warehouse import arena_home

    worker_preflight(arena_home(None), chosen())  # refused: the API stops accepting submissions too
    while True:
        ran = launch.work_queue_once(say=lambda m: print(m, file=sys.stderr, flush=True))
        if args.once and ran:
            return 0
        if args.once:
            print("no accepted submission is waiting", file=sys.stderr)
            return 0
        time.sleep(args.interval)


def _calibrate(args: argparse.Namespace) -> int:
    """`arena calibrate`: a task's calibration (protocol section 10) through the calibration assets;
    it resumes, reusing runs already stored under the candidate's evaluation ids."""
    from speculator_arena.calibration.calibrate import (
        CalibrationOptions,
        resolve_versions,
    )
    from speculator_arena.calibration.candidate import candidate_dir, load_evidence
    from speculator_arena.calibration.evidence import value_table
    from speculator_arena.dagster_project import launch
    from speculator_arena.protocol import load_protocol
    from speculator_arena.protocol.lowb import is_lowb_task
    from speculator_arena.warehouse import Warehouse

    if is_lowb_task(args.task):  # LowBArena's calibration: BF16's A/A runs set the task's noise
        from speculator_arena.calibration.lowb import calibrate_lowb
        from speculator_arena.runners.privileges import preflight

        preflight()
        home = Warehouse().home

        def say(m: str) -> None:
            print(m, flush=True)

        def evaluate(spec):
            return launch.evaluate(spec, home, progress=say, rerun_contended=2)

        calibrate_lowb(args.task, home, args.aa, evaluate, progress=say)
        return 0
    load_protocol().task(args.task)  # an unknown task is a clear error before anything runs
    from speculator_arena.backends import chosen
    from speculator_arena.runners.privileges import preflight

    preflight(backend=chosen(args.backend))  # engines run unprivileged or not at all
    opts = resolve_versions(
        CalibrationOptions(task_id=args.task, candidate_version=args.candidate, base_version=args.base, aa_runs=args.aa)
    )
    plan = opts.plan()  # bad options fail here, before anything runs
    adopt = {}
    for item in args.adopt:
        name, sep, eid = item.partition("=")
        if not sep or name not in plan.ids():
            raise ValueError(f"--adopt {item!r}: expected RUN=EVALUATION with RUN one of {sorted(plan.ids())}")
        adopt[name] = eid
    wh = Warehouse()
    config = {
        "candidate_version": opts.candidate_version,
        "base_version": opts.base_version,
        "aa_runs": args.aa,
        "controls": args.controls,
        "not_honest": list(args.not_honest),
        "fit": not args.no_fit,
        "fit_grid": args.fit_grid,
        "fit_pass_seconds": args.fit_seconds,
        "target": args.target,
        "adopt": adopt,
    }
    if args.queue:
        from speculator_arena.calibration.queued import queue

        path = queue(wh.home, args.task, opts.candidate_version, config)
        print(
            f"calibration of {args.task} (candidate v{opts.candidate_version}) queued: {path}; the queue runs its "
            "evaluations on free devices, then its assets (`arena queue work` without the Dagster daemon)"
        )
        return 0
    launch.calibrate(args.task, config, wh.home, backend=args.backend)
    ev = load_evidence(wh.home, args.task, opts.candidate_version)
    d = candidate_dir(wh.home, args.task, opts.candidate_version)
    print(f"protocol candidate v{ev['candidate_version']} of {args.task} (runs under v{ev['base_version']}): {d}")
    for r in value_table(ev):
        print(f"  {r['limit']:<34} {r['value']:<40} (was {r['previous']})")
    if ev["problems"]:
        print("DOES NOT SEPARATE the honest runs from every control (publishing needs --override):")
        for p in ev["problems"]:
            print(f"  - {p}")
    print(
        f"evidence: {d / 'evidence.md'}; publish with: arena protocol publish --task {args.task} "
        f"--candidate {ev['candidate_version']}"
    )
    return 0 if not ev["problems"] else 1
