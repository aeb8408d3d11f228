"""`arena evaluate` and `arena demo`: the harness materialized through the Dagster asset.

Both go through `speculator_arena.assets.evaluations` in-process, on the Dagster instance of
ARENA_HOME, so `DAGSTER_HOME=$ARENA_HOME/dagster dagster dev` shows what ran. Machines
without Dagster run the same harness with `python -m speculator_arena.runners.evaluate`.
"""

from __future__ import annotations

import argparse
import sys
import time


def register(sub: argparse._SubParsersAction) -> None:
    from speculator_arena.runners.evaluate import add_arguments

    from speculator_arena.backends import BACKENDS, DEFAULT_BACKEND

    e = sub.add_parser("evaluate", help="run one paired evaluation (Dagster asset): on this machine or in a GPU pod")
    add_arguments(e)
    e.add_argument("--backend", choices=BACKENDS, default=DEFAULT_BACKEND,
                   help="local (this machine) or kubernetes (a GPU pod; settings: ARENA_K8S_*, docs/operators.md)")
    e.set_defaults(func=_evaluate)
    d = sub.add_parser("demo", help="build the local pools, evaluate the development references, print the board")
    d.add_argument("--task", default="local-smollm2")
    d.add_argument("--home", default=None, help="ARENA_HOME (default: $ARENA_HOME or ./arena_home)")
    d.add_argument("--only", nargs="*", default=None, help="reference names to evaluate (default: all)")
    d.set_defaults(func=_demo)


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def run_evaluation(spec, home, backend: str = "") -> dict:
    """Queue the evaluation (its row says `queued`), then materialize its partition."""
    from speculator_arena.assets.evaluations import materialize_evaluation
    from speculator_arena.runners.evaluate import summary
    from speculator_arena.backends import preflight
    from speculator_arena.runners.harness import Evaluation

    preflight(backend, spec, home)
    Evaluation(spec, home=home, progress=_say).queue()
    config = {k: v for k, v in {
        "task_id": spec.task_id, "engine": spec.engine, "split": spec.split, "stock_engine": spec.stock_engine,
        "label": spec.label, "account_id": spec.account_id, "submission_id": spec.submission_id,
        "is_reference": spec.is_reference, "solution_kind": spec.solution_kind,
        "speculator": spec.speculator, "target": spec.target}.items() if v is not None}
    materialize_evaluation(config, spec.evaluation_id, home, backend=backend)
    return summary(home, spec.evaluation_id)


def _evaluate(args) -> int:
    from speculator_arena.cli import print_json
    from speculator_arena.runners.evaluate import spec_from_args, summary
    from speculator_arena.runners.harness import resume_dead
    from speculator_arena.warehouse import Warehouse, arena_home

    home = arena_home(args.home)
    if args.resume:
        resume_dead(Warehouse(home), args.resume, progress=_say)
        print_json(summary(home, args.resume))
        return 0
    s = run_evaluation(spec_from_args(args), home, backend=args.backend)
    print_json(s)
    return 0


def _demo(args) -> int:
    from speculator_arena.protocol import load_protocol
    from speculator_arena.warehouse import Warehouse, arena_home

    t0 = time.time()
    home = arena_home(args.home)
    task = load_protocol().task(args.task)

    def step(msg: str) -> None:
        _say(f"[demo {time.time() - t0:5.0f} s] {msg}")

    step(f"ARENA_HOME {home}; task {args.task}")
    _ensure_pools(args.task, home, step)
    from speculator_arena.checkpoints import prepare_checkpoint

    step("preparing the sealed target checkpoint")
    target = prepare_checkpoint(args.task, home=home)
    step(f"target ready: {target}")
    from speculator_arena.runners.harness import EvaluationSpec

    refs = [r for r in task.task.references if args.only is None or r.name in args.only]
    results = []
    for k, ref in enumerate(refs, 1):
        step(f"evaluation {k}/{len(refs)}: {ref.name} ({ref.engine}) against the stock engine")
        spec = EvaluationSpec(task_id=args.task, engine=ref.engine, split="dev", label=ref.name,
                              is_reference=True, solution_kind=ref.kind, account_id="arena",
                              speculator=None, target=str(target))
        s = run_evaluation(spec, home)
        results.append(s)
        step(f"{ref.name}: {s['status']}" + (f" ({s['void_reason'] or s['failure_reason']})"
                                             if s["void_reason"] or s["failure_reason"] else ""))
    step("scoring every stored evaluation")
    scores = _score(home)
    from speculator_arena.scoring.board import board_text

    print(board_text(scores, split="dev", task_ids=[args.task]))
    step(f"done in {time.time() - t0:.0f} s; warehouse {Warehouse(home).home}; "
         f"`DAGSTER_HOME={home}/dagster dagster dev` shows the runs, `arena board` the board")
    return 0 if all(r["status"] == "measured" for r in results) else 1


def _ensure_pools(task_id: str, home, step) -> None:
    from speculator_arena.pools.api import PoolNotBuilt, load_pool

    try:
        load_pool(task_id, "dev", home=home)
        step("session pools already built")
        return
    except PoolNotBuilt:
        pass
    step("building the session pools (Dagster assets, in-process)")
    from speculator_arena.pools.commands import build_with_dagster

    build_with_dagster(task_id, home=str(home))
    step("session pools built")


def _score(home):
    """Materialize the `scores` asset for the latest version on the same instance, return scores."""
    import dagster as dg

    from speculator_arena.assets.evaluations import dagster_instance
    from speculator_arena.assets.scores import scores as scores_asset
    from speculator_arena.dagster_project.resources import default_resources
    from speculator_arena.protocol import load_protocol
    from speculator_arena.scoring import score_warehouse
    from speculator_arena.warehouse import Warehouse

    version = load_protocol().version
    dg.materialize([scores_asset], partition_key=str(version), instance=dagster_instance(home),
                   resources=default_resources(home), raise_on_error=True,
                   run_config={"loggers": {"console": {"config": {"log_level": "WARNING"}}}})
    return score_warehouse(Warehouse(home), protocol_version=version)
