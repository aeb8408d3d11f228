"""`arena sweep`: development evaluations of one engine over values of one speculation setting,
each through the one door (`launch.evaluate`), so each point is an ordinary stored evaluation
paired with the stock engine, scored as it lands and re-scored with the rest.

Why a driver of its own and not a loop over `arena evaluate`: a sweep is resumable. Its points'
evaluation ids are fixed by the sweep id and the value (runners/sweep_plan.py), so the same
command run again (same `--sweep-id`) keeps every point already measured and scored (a number or
0, not void) and makes the rest: a sweep stopped midway (Ctrl-C, SIGTERM: the evaluation running
is recorded void, runners/interrupt.py) keeps its finished points. A point whose evaluation the
host's other work voided is made again under its next attempt id, at most `--rerun-contended`
times (2, as `arena demo` does); the void one stays stored, refunded.

The result printed at the end is read back from the warehouse (board/sweep.py), never taken from
what the runs returned. Sweeps run on the dev split only: they are a participant's development
tool, and their per-value figures of a test evaluation would be a trace of the hidden pool.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

SWEEP_RERUNS = 2  # a contended point is made again this many times, as `arena demo` does


def register(sub) -> None:
    s = sub.add_parser(
        "sweep",
        help="evaluate one engine over values of one speculation setting (dev split); export or list sweeps",
        description="arena sweep --task T --engine DIR --setting NAME --values 1,2,4,8 [--sweep-id ID]: one "
        "evaluation per value (run again with the same --sweep-id to finish a stopped sweep); "
        "arena sweep export --sweep-id ID --out DIR; arena sweep list",
    )
    s.add_argument("action", nargs="?", choices=("run", "export", "list"), default="run")
    s.add_argument("--task", default="local-smollm2")
    s.add_argument("--engine", help="engine directory whose launch.sh sets the setting once")
    s.add_argument("--setting", help='NAME in launch.sh: NAME=VALUE (shell) or "NAME": VALUE (JSON)')
    s.add_argument("--values", help="comma-separated values, e.g. 1,2,4,8")
    s.add_argument("--sweep-id", default=None, help="the sweep's id (default: sweep-<UTC time>); again to resume")
    s.add_argument("--label", default=None, help="label of the points (default: the engine's folder name)")
    s.add_argument("--kind", default="other", help="solution kind of the points (ngram, suffix, draft, ...)")
    s.add_argument("--split", default="dev", help="dev only: a sweep never runs on the hidden test split")
    s.add_argument("--target", default=None, help="prepared target directory (default: prepare the task's)")
    s.add_argument("--rerun-contended", type=int, default=SWEEP_RERUNS, metavar="N")
    s.add_argument("--protocol", type=int, default=None, help="score the result under this version (default: latest)")
    s.add_argument("--out", default=None, help="export: the folder for <sweep_id>.json and <sweep_id>.parquet")
    s.add_argument("--home", default=None, help="ARENA_HOME (default: $ARENA_HOME or ./arena_home)")
    s.set_defaults(func=_command)


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _command(args) -> int:
    from speculator_arena.board.sweep import sweep_document, sweep_parquet
    from speculator_arena.printing import print_json
    from speculator_arena.runners.sweep_plan import SweepError, list_sweeps
    from speculator_arena.warehouse import arena_home

    home = arena_home(args.home)
    if args.action == "list":
        print_json(list_sweeps(home))
        return 0
    if args.action == "export":
        if not args.sweep_id or not args.out:
            raise SweepError("arena sweep export needs --sweep-id and --out")
        doc = sweep_document(home, args.sweep_id, args.protocol)
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        from speculator_arena.atomic import write_atomic, write_json_atomic

        write_json_atomic(out / f"{args.sweep_id}.json", doc, indent=1)
        write_atomic(out / f"{args.sweep_id}.parquet", sweep_parquet(doc))
        print(out / f"{args.sweep_id}.json")
        print(out / f"{args.sweep_id}.parquet")
        return 0
    if not args.engine or not args.setting or not args.values:
        raise SweepError("arena sweep needs --engine, --setting and --values (or: export, list)")
    doc = run_sweep(
        task_id=args.task,
        engine=args.engine,
        setting=args.setting,
        values=args.values.split(","),
        home=home,
        sweep_id=args.sweep_id,
        label=args.label,
        kind=args.kind,
        split=args.split,
        target=args.target,
        reruns=args.rerun_contended,
        protocol_version=args.protocol,
    )
    print_json(doc)
    from speculator_arena.rules.status import Status

    return 0 if all(p["status"] == Status.MEASURED for p in doc["points"]) else 1


def _checked_plan(task_id, engine, setting, values, split, home, sweep_id, label):
    """Every refusal before anything is written: split, task, pool, engine, setting and values
    (each value substituted into launch.sh once, in memory), and a manifest of the same id that
    describes another sweep. Returns (engine directory, values, manifest)."""
    from speculator_arena.pools.api import load_pool
    from speculator_arena.protocol import load_protocol
    from speculator_arena.runners.spec import resolve_engine_path
    from speculator_arena.runners.sweep_plan import (
        SweepError,
        check_name,
        check_sweep_id,
        check_values,
        read_manifest,
        substitute,
    )

    if split != "dev":
        raise SweepError("sweeps run on the dev split only (a test evaluation's figures would trace the hidden pool)")
    check_name(setting)
    values = check_values(values)
    check_sweep_id(sweep_id)
    load_protocol().task(task_id)
    engine_dir = resolve_engine_path(engine)
    launch = engine_dir / "launch.sh"
    if not launch.is_file():
        raise SweepError(f"engine {engine_dir} has no launch.sh at its top")
    text = launch.read_text(encoding="utf-8")
    for v in values:
        substitute(text, setting, v)
    load_pool(task_id, "dev", home=home)
    try:
        manifest = read_manifest(home, sweep_id)
    except SweepError:
        manifest = None
    if manifest is None:
        manifest = {
            "sweep_id": sweep_id,
            "task_id": task_id,
            "engine": str(engine_dir),
            "setting": setting,
            "values": [],
            "label": label or engine_dir.name,
            "created_at": time.time(),
            "points": [],
        }
    elif (manifest["task_id"], manifest["engine"], manifest["setting"]) != (task_id, str(engine_dir), setting):
        raise SweepError(
            f"sweep {sweep_id} is {manifest['setting']} of {manifest['engine']} on {manifest['task_id']}; "
            "give another --sweep-id for another sweep"
        )
    manifest["values"] += [v for v in values if v not in manifest["values"]]
    have = {p["value"] for p in manifest["points"]}
    manifest["points"] += [{"value": v, "evaluation_ids": []} for v in manifest["values"] if v not in have]
    return engine_dir, values, manifest


def run_sweep(
    *,
    task_id: str,
    engine: str,
    setting: str,
    values: list[str],
    home,
    sweep_id: str | None = None,
    label: str | None = None,
    kind: str = "other",
    split: str = "dev",
    target: str | None = None,
    reruns: int = SWEEP_RERUNS,
    protocol_version: int | None = None,
    progress=_say,
) -> dict:
    """Make the sweep's points not yet measured, each through `launch.evaluate`; return its
    document (board/sweep.py `sweep_document`), read from the stored evaluations."""
    from speculator_arena.board.memo import BoardMemo
    from speculator_arena.board.sweep import measured, sweep_document
    from speculator_arena.dagster_project import launch
    from speculator_arena.runners.spec import sweep_spec
    from speculator_arena.runners.sweep_plan import evaluation_id, new_sweep_id, point_engine, write_manifest
    from speculator_arena.warehouse import Warehouse
    from speculator_arena.warehouse.evaluations import current_row

    t0 = time.time()
    sweep_id = sweep_id or new_sweep_id()
    engine_dir, values, manifest = _checked_plan(task_id, engine, setting, values, split, home, sweep_id, label)

    def say(msg: str) -> None:
        progress(f"[sweep {time.time() - t0:5.0f} s] {msg}")

    from speculator_arena.runners.privileges import preflight

    preflight()  # an install the engine user cannot reach is refused before anything is written
    write_manifest(home, manifest)
    say(f"sweep {sweep_id}: {setting} = {', '.join(values)} of {engine_dir} on {task_id} (dev); ARENA_HOME {home}")
    if target is None:
        from speculator_arena.checkpoints import prepare_checkpoint

        target = str(prepare_checkpoint(task_id, home=home))
    wh, memo = Warehouse(home), BoardMemo(home)  # one memo: it re-reads only what changed
    points = {p["value"]: p for p in manifest["points"]}
    for k, value in enumerate(values, 1):
        point, head = points[value], f"{setting}={value} ({k}/{len(values)})"
        stored = [i for i in point["evaluation_ids"] if current_row(wh, i) is not None]
        done = measured(memo.scores(stored, protocol_version), stored) if stored else []
        if done:
            say(f"{head}: already measured ({done[-1]}), kept")
            continue
        spec_engine = point_engine(engine_dir, home, sweep_id, setting, value)
        left = reruns
        while True:
            attempt = 1
            while current_row(wh, evaluation_id(sweep_id, setting, value, attempt)) is not None:
                attempt += 1
            eid = evaluation_id(sweep_id, setting, value, attempt)
            if eid not in point["evaluation_ids"]:
                point["evaluation_ids"].append(eid)
            write_manifest(home, manifest)  # before it runs: a stopped sweep still names it
            say(f"{head}: evaluating {eid} against the stock engine")
            spec = sweep_spec(
                task_id=task_id,
                engine=str(spec_engine),
                evaluation_id=eid,
                label=f"{manifest['label']} {setting}={value}",
                solution_kind=kind,
                target=target,
            )
            s = launch.evaluate(spec, home, progress=say)  # a stop signal raises here, the point void
            o = s.outcome
            score = f"SpecScore {o.specscore:.3f}" if s.scored and o and o.specscore is not None else s.why
            say(f"{head}: {eid} {s.status}: {score}")
            if not (s.contended and left > 0):
                break
            left -= 1
            say(f"{head}: void, host contended; making it again")
    say("reading the sweep back from the stored evaluations")
    return sweep_document(home, sweep_id, protocol_version, memo=BoardMemo(home))
