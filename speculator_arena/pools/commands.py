"""`arena pools build --task T`: materialize the pool assets in-process, then summarize."""

from __future__ import annotations

import json
import time


def register(sub) -> None:
    p = sub.add_parser("pools", help="build and inspect session pools")
    ps = p.add_subparsers(dest="pools_command", required=True)
    b = ps.add_parser("build", help="materialize the pool assets of one task (Dagster, in-process)")
    b.add_argument("--task", required=True, help="task id (protocol), e.g. local-smollm2 or qwen3-8b")
    b.add_argument("--data", default="", help="shared data folder (default: ARENA_SHARED_DATA, else ../shared/data)")
    b.add_argument("--production-stats", default="", help="operators' production structure statistics (JSON)")
    b.add_argument("--cc-traces", default="", help="AgentX cc-traces file (Weka format) for the agent structure")
    b.add_argument("--sources", default="", help="declaration of conversation sets (YAML; default: ARENA_POOL_SOURCES, "
                                                 "else the shipped one; docs/pools.md)")
    b.add_argument("--write-repo-card", action="store_true", help="also write the data card into the repo's data_cards/")
    b.add_argument("--home", default="", help="ARENA_HOME (default: the environment's)")
    b.set_defaults(func=_build)
    s = ps.add_parser("show", help="print a built pool's manifest (counts only)")
    s.add_argument("--task", required=True)
    s.add_argument("--split", default="dev", choices=["dev", "test"])
    s.set_defaults(func=_show)


class PoolBuildFailed(RuntimeError):
    """A build that failed; the served pool is the one before it, whole."""


def build_with_dagster(task: str, *, data: str = "", production_stats: str = "", cc_traces: str = "",
                       write_repo_card: bool = False, home: str = "", sources: str = ""):
    """Materialize every pool asset of one task in-process. A failure (a bad source file, a
    blocking check such as a pool short of sessions) raises `PoolBuildFailed` naming the cause,
    after the run's build folder is removed: the served pool stays the previous one."""
    import dagster as dg

    from speculator_arena.assets.pools import POOL_ASSETS, POOL_TASKS
    from speculator_arena.dagster_project.resources import default_resources
    from speculator_arena.pools.build import builds_dir, discard_build
    from speculator_arena.warehouse import arena_home

    if task not in POOL_TASKS.get_partition_keys():
        raise KeyError(f"unknown task {task!r}; tasks: {POOL_TASKS.get_partition_keys()}")
    cfg = {"data_dir": data, "production_stats": production_stats, "cc_traces": cc_traces, "sources": sources,
           "write_repo_data_card": write_repo_card}
    run_config = {"ops": {a.op.name: {"config": cfg} for a in POOL_ASSETS}}
    builds = builds_dir(task, arena_home(home or None))
    before = set(builds.iterdir()) if builds.is_dir() else set()
    try:
        res = dg.materialize(POOL_ASSETS, partition_key=task, run_config=run_config,
                             resources=default_resources(home or None),
                             raise_on_error=False)
    finally:
        for d in (set(builds.iterdir()) if builds.is_dir() else set()) - before:
            discard_build(d)
    if not res.success:
        raise PoolBuildFailed(f"the {task} pool build failed; the served pool is unchanged. " + _failure(res))
    return res


def _failure(res) -> str:
    """The causes of a failed run: failed checks with their description, failed steps with
    their error (a reader's error names the file, line and record)."""
    out = [f"check {c.check_name} failed: {c.description or c.metadata}" for c in res.get_asset_check_evaluations()
           if not c.passed and c.severity.value == "ERROR"]
    for e in res.all_events:
        if e.is_step_failure:
            err = e.step_failure_data.error
            while err is not None and err.cause is not None and "dagster" in (err.cls_name or "").lower():
                err = err.cause
            out.append(f"step {e.step_key}: {err.cls_name}: {err.message.strip()}" if err else f"step {e.step_key} failed")
    return "; ".join(out) or "see the Dagster events"


def _build(args) -> int:
    from speculator_arena.pools.build import pool_root
    from speculator_arena.pools.settings import operator_key

    t0 = time.time()
    print(f"[pools] building {args.task} (Dagster assets, in-process)...", flush=True)
    if operator_key() is None:
        print("[pools] no ARENA_POOL_KEY: the hidden test pool will not be built", flush=True)
    try:
        res = build_with_dagster(args.task, data=args.data, production_stats=args.production_stats,
                                 cc_traces=args.cc_traces, write_repo_card=args.write_repo_card, home=args.home,
                                 sources=args.sources)
    except PoolBuildFailed as exc:
        print(f"[pools] {exc}", flush=True)
        return 1
    failed = [c for c in res.get_asset_check_evaluations() if not c.passed]
    for c in res.get_asset_check_evaluations():
        print(f"[pools] check {c.asset_key.to_user_string()}:{c.check_name}: {'passed' if c.passed else 'FAILED'}")
    root = pool_root(args.task, args.home or None)
    dev = json.loads((root / "dev" / "manifest.json").read_text())
    print(f"[pools] dev: {dev['sessions']} sessions {dev['families']}, {dev['turns']} turns, "
          f"{dev.get('warmup', 0)} warm-up, {dev['fidelity']} fidelity texts")
    test = root / "hidden" / "test" / "manifest.json"
    if test.is_file():
        t = json.loads(test.read_text())
        print(f"[pools] test (hidden): {t['sessions']} sessions, {t['paraphrased_turns']} paraphrased turns")
    print(f"[pools] data card: {root / 'data_card' / (args.task + '.md')}")
    print(f"[pools] done in {time.time() - t0:.0f} s")
    return 1 if failed else 0


def _show(args) -> int:
    from speculator_arena.cli import print_json
    from speculator_arena.pools.api import load_pool

    print_json(load_pool(args.task, args.split, require=False).manifest)
    return 0
