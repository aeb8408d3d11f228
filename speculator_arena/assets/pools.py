"""Dagster assets of the session pools, one partition per task.

pool_sources -> pool_structure -> pool_dev, pool_test -> pool_warmup; pool_sources -> pool_probes;
all -> pool_data_card. Each asset writes its files into the run's own build folder
(`$ARENA_HOME/pools/.builds/<task>/<run>/`) and returns metadata only (row counts, digests, and
markdown previews of PUBLIC text), so no hidden text can reach the Dagster event log.
pool_data_card, the last asset, switches the served pool `pools/<task>` to the run's build; a
run that fails before it (a bad source, a short pool: the blocking check) leaves the previous
pool whole and served. The run's build context (sources and tokenizer loaded once, the build
folder) is held by the `pool_builds` resource for the run and released when the run ends,
whether it succeeded or failed. Checks: public and hidden disjoint, every turn fits the window,
no session in two passes, enough sessions for every pass (blocking), busy lanes within the cache.
"""

import sys

import dagster as dg

from speculator_arena.assets.resources import PoolBuildsResource, WarehouseResource
from speculator_arena.pools.builder import checks as C
from speculator_arena.pools.builder.context import BuildContext
from speculator_arena.pools.builder.folders import switch_build
from speculator_arena.pools.builder.inputs import fit_and_store_structure, store_sources_manifest
from speculator_arena.pools.builder.probes import build_probes
from speculator_arena.pools.builder.sessions import load_paraphrases
from speculator_arena.pools.builder.splits import build_split
from speculator_arena.pools.builder.warmup import build_warmup
from speculator_arena.pools.layout import data_card_dir, pool_root, read_jsonl, split_folder
from speculator_arena.pools.settings import operator_key
from speculator_arena.protocol import load_protocol

# tasks with pools of their own (a task with a `target_task` serves that task's pools)
POOL_TASKS = dg.StaticPartitionsDefinition(
    sorted(t for t, spec in load_protocol().tasks.items() if not spec.target_task)
)
GROUP = "pools"


class PoolConfig(dg.Config):
    """Where the sources are (default: ARENA_SHARED_DATA, else ../shared/data) and optional
    operator inputs (production structure statistics; AgentX cc-traces in the Weka format)."""

    data_dir: str = ""
    production_stats: str = ""
    cc_traces: str = ""
    sources: str = ""  # the declaration of conversation sets (default: ARENA_POOL_SOURCES, else the shipped one)
    write_repo_data_card: bool = False


def _ctx(
    context: dg.AssetExecutionContext, config: PoolConfig, warehouse: WarehouseResource, builds: PoolBuildsResource
) -> BuildContext:
    """The run's BuildContext (the `pool_builds` resource holds it for the run), rooted in the
    run's own build folder, logging to this asset."""
    return builds.build_context(
        context.run.run_id,
        context.partition_key,
        warehouse.path,
        data_dir=config.data_dir,
        cc_traces=config.cc_traces,
        sources=config.sources,
        progress=lambda msg: say(context, msg),
    )


def say(context: dg.AssetExecutionContext, msg: str, warning: bool = False) -> None:
    """A pool build's progress: into the run's event log (`dagster dev` shows it) and, with the
    arena's `[pools]` prefix, on stderr (the launchers keep Dagster's console logger quiet, so a
    terminal shows the arena's lines only)."""
    (context.log.warning if warning else context.log.info)(msg)
    print(f"[pools] {'warning: ' if warning else ''}{msg}", file=sys.stderr, flush=True)


def _dropped(d: dict | None) -> str:
    return "; ".join(f"{n} {why}" for why, n in (d or {}).items())


def _preview(sessions: list[dict], k: int = 3, chars: int = 160) -> str:
    lines = ["| session | family | app | turns | first turn |", "|---|---|---|---|---|"]
    for s in sessions[:k]:
        first = s["turns"][0]["content"][:chars].replace("\n", " ").replace("|", "\\|")
        lines.append(f"| {s['session_id']} | {s['family']} | {s['app']} | {len(s['turns'])} | {first} |")
    return "\n".join(lines)


@dg.asset(partitions_def=POOL_TASKS, group_name=GROUP)
def pool_sources(
    context: dg.AssetExecutionContext, config: PoolConfig, warehouse: WarehouseResource, pool_builds: PoolBuildsResource
) -> dg.MaterializeResult:
    """Every source read, with its commit, license, record count and truncation note."""
    ctx = _ctx(context, config, warehouse, pool_builds)
    man = store_sources_manifest(ctx)
    table = "\n".join(
        ["| source | records | used | dropped | license | note |", "|---|---|---|---|---|---|"]
        + [
            f"| {s['name']} | {s['records']} | {'' if s.get('used') is None else s['used']} | "
            f"{_dropped(s.get('dropped'))} | {s['license']} | {s['truncation'] or ''} |"
            for s in man["sources"]
        ]
    )
    return dg.MaterializeResult(
        metadata={
            "chat_conversations": man["chat_conversations"],
            "agent_trajectories": man["agent_trajectories"],
            "dagster/row_count": man["chat_conversations"] + man["agent_trajectories"],
            "declaration": man["declaration"],
            "dropped": dg.MetadataValue.json({s["name"]: s.get("dropped") or {} for s in man["sources"]}),
            "sources": dg.MetadataValue.md(table),
        }
    )


@dg.asset(partitions_def=POOL_TASKS, group_name=GROUP, deps=[pool_sources])
def pool_structure(
    context: dg.AssetExecutionContext, config: PoolConfig, warehouse: WarehouseResource, pool_builds: PoolBuildsResource
) -> dg.MaterializeResult:
    """Session structure per family, fitted from the public traces (or the operators' file)."""
    ctx = _ctx(context, config, warehouse, pool_builds)
    doc = fit_and_store_structure(ctx, config.production_stats or None)
    rows = ["| family | statistic | n | p50 | p90 | source |", "|---|---|---|---|---|---|"]
    from speculator_arena.pools.builder.structure import quantile

    for fam, stats in doc["families"].items():
        for k, d in stats.items():
            rows.append(f"| {fam} | {k} | {d['n']} | {quantile(d, 0.5):.4g} | {quantile(d, 0.9):.4g} | {d['source']} |")
    return dg.MaterializeResult(
        metadata={
            "digest": doc["digest"],
            "production": doc.get("production", False),
            "statistics": dg.MetadataValue.md("\n".join(rows)),
        }
    )


@dg.asset(
    partitions_def=POOL_TASKS,
    group_name=GROUP,
    deps=[pool_structure],
    check_specs=[dg.AssetCheckSpec("every_turn_fits_window", asset="pool_dev")],
)
def pool_dev(
    context: dg.AssetExecutionContext, config: PoolConfig, warehouse: WarehouseResource, pool_builds: PoolBuildsResource
):
    """The public pool: diverse real conversations and trajectories, cut to structure."""
    ctx = _ctx(context, config, warehouse, pool_builds)
    man = build_split(ctx, "dev")
    sessions = read_jsonl(split_folder(ctx.root, "dev") / "sessions.jsonl")
    yield dg.MaterializeResult(
        metadata={
            "dagster/row_count": man["sessions"],
            "turns": man["turns"],
            "fidelity_texts": man["fidelity"],
            "families": dg.MetadataValue.json(man["families"]),
            "mean_footprint_tokens": man["mean_footprint_tokens"],
            "diversity": dg.MetadataValue.json(man["diversity"] or {}),
            "preview": dg.MetadataValue.md(_preview(sessions)),
        }
    )
    ok, meta = C.every_turn_fits(ctx, split_folder(ctx.root, "dev"))
    yield dg.AssetCheckResult(check_name="every_turn_fits_window", passed=ok, metadata=meta)


@dg.asset(
    partitions_def=POOL_TASKS,
    group_name=GROUP,
    deps=[pool_structure],
    check_specs=[dg.AssetCheckSpec("every_turn_fits_window", asset="pool_test")],
)
def pool_test(
    context: dg.AssetExecutionContext, config: PoolConfig, warehouse: WarehouseResource, pool_builds: PoolBuildsResource
):
    """The hidden pool (only with the operators' key); metadata holds counts, never text."""
    ctx = _ctx(context, config, warehouse, pool_builds)
    key = operator_key()
    if key is None:
        say(context, "no ARENA_POOL_KEY: the hidden test pool is not built", warning=True)
        yield dg.MaterializeResult(metadata={"built": False, "reason": "no operator key (ARENA_POOL_KEY)"})
        yield dg.AssetCheckResult(
            check_name="every_turn_fits_window", passed=True, metadata={"hidden_pool": "not built"}
        )
        return
    man = build_split(ctx, "test", key=key, paraphrases=load_paraphrases())
    yield dg.MaterializeResult(
        metadata={
            "built": True,
            "dagster/row_count": man["sessions"],
            "turns": man["turns"],
            "paraphrased_turns": man["paraphrased_turns"],
            "key_id": man["key_id"],
            "families": dg.MetadataValue.json(man["families"]),
        }
    )
    ok, meta = C.every_turn_fits(ctx, split_folder(ctx.root, "test"))
    yield dg.AssetCheckResult(check_name="every_turn_fits_window", passed=ok, metadata=meta)


@dg.asset(
    partitions_def=POOL_TASKS,
    group_name=GROUP,
    deps=[pool_dev, pool_test],
    check_specs=[
        dg.AssetCheckSpec("public_hidden_disjoint", asset="pool_warmup"),
        dg.AssetCheckSpec("no_session_in_two_passes", asset="pool_warmup"),
        dg.AssetCheckSpec("enough_sessions_for_every_pass", asset="pool_warmup", blocking=True),
    ],
)
def pool_warmup(
    context: dg.AssetExecutionContext, config: PoolConfig, warehouse: WarehouseResource, pool_builds: PoolBuildsResource
):
    """Warm-up sessions apart from every pass, per split; then the cross-split checks."""
    from speculator_arena.pools.api import Pool, PoolExhausted

    ctx = _ctx(context, config, warehouse, pool_builds)
    key = operator_key()
    out = [build_warmup(ctx, "dev")]
    if key is not None and (split_folder(ctx.root, "test") / "used_sources.json").is_file():
        out.append(build_warmup(ctx, "test", key=key, paraphrases=load_paraphrases()))
    yield dg.MaterializeResult(
        metadata={"dagster/row_count": sum(o["warmup"] for o in out), "per_split": dg.MetadataValue.json(out)}
    )
    ok, meta = C.public_hidden_disjoint(ctx)
    yield dg.AssetCheckResult(check_name="public_hidden_disjoint", passed=ok, metadata=meta)
    # The probe file is built by pool_probes; the pass check needs only sessions and warm-ups.
    results = {}
    passed = True
    for split in ("dev", "test") if len(out) > 1 else ("dev",):
        pool = Pool.at(ctx.task_id, split, ctx.root)
        try:
            ok, meta = C.no_session_in_two_passes(pool)
        except PoolExhausted as exc:  # a short pool: enough_sessions_for_every_pass says by how much
            passed = False
            results[split] = {"not checked": str(exc)}
            continue
        passed &= ok
        results[split] = {"repeats": meta["repeats"], "evaluations_checked": meta["evaluations_checked"]}
    yield dg.AssetCheckResult(
        check_name="no_session_in_two_passes", passed=passed, metadata={"splits": dg.MetadataValue.json(results)}
    )
    yield _enough_sessions(ctx, ("dev", "test") if len(out) > 1 else ("dev",))


def _enough_sessions(ctx: BuildContext, splits) -> dg.AssetCheckResult:
    """Blocking: a pool short of the protocol's sessions for any pass (or warm-up) fails with the
    numbers, and the run stops before pool_data_card switches the served pool to it."""
    from speculator_arena.pools.api import Pool, shortfall

    numbers = {}
    for split in splits:
        numbers[split] = shortfall(Pool.at(ctx.task_id, split, ctx.root))
        numbers[split].pop("greedy_prompts")  # built by pool_probes, checked by the runner's load_pool
    short = [f"{split}: {msg}" for split, n in numbers.items() for msg in n["short"] if not msg.startswith("greedy")]
    return dg.AssetCheckResult(
        check_name="enough_sessions_for_every_pass",
        passed=not short,
        description="; ".join(short) or "every pass of every workload gets its live sessions",
        metadata={"per_split": dg.MetadataValue.json(numbers), "short": dg.MetadataValue.json(short)},
    )


@dg.asset(partitions_def=POOL_TASKS, group_name=GROUP, deps=[pool_sources])
def pool_probes(
    context: dg.AssetExecutionContext, config: PoolConfig, warehouse: WarehouseResource, pool_builds: PoolBuildsResource
) -> dg.MaterializeResult:
    """Greedy-agreement probe prompts: Spec-Bench questions by diverse selection."""
    ctx = _ctx(context, config, warehouse, pool_builds)
    man = build_probes(ctx)
    rows = read_jsonl(ctx.root / "probes.jsonl")
    prev = "\n".join(f"- `{r['prompt_id']}` ({r['category']}): {r['messages'][0]['content'][:120]}" for r in rows[:5])
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": man["probes"],
            "diversity": dg.MetadataValue.json(man["diversity"]),
            "preview": dg.MetadataValue.md(prev),
        }
    )


@dg.asset(
    partitions_def=POOL_TASKS,
    group_name=GROUP,
    deps=[pool_warmup, pool_probes],
    check_specs=[dg.AssetCheckSpec("busy_lanes_fit_cache", asset="pool_data_card", blocking=False)],
)
def pool_data_card(
    context: dg.AssetExecutionContext, config: PoolConfig, warehouse: WarehouseResource, pool_builds: PoolBuildsResource
):
    """The generated data card (markdown, JSON, PNG) in the pool folder (and data_cards/)."""
    from speculator_arena.pools.builder.datacard import REPO_DATA_CARDS, build_data_card

    ctx = _ctx(context, config, warehouse, pool_builds)
    dirs = [data_card_dir(ctx.root)] + ([REPO_DATA_CARDS] if config.write_repo_data_card else [])
    card = build_data_card(ctx, dirs)
    div = card["diversity"]
    yield dg.MaterializeResult(
        metadata={
            "path": str(data_card_dir(pool_root(ctx.task_id, ctx.home)) / f"{ctx.task_id}.md"),
            "diversity_probes": dg.MetadataValue.json(div["probes"]),
            "diversity_public_pool": dg.MetadataValue.json(div["public_pool_chat"] or {}),
            "cache_hit_targets": dg.MetadataValue.json(card["cache_hit_targets"]),
        }
    )
    switch_build(ctx.task_id, ctx.root, ctx.home)
    say(context, f"serving the pool built in {ctx.root}")
    b = card["busy_lanes"]
    yield dg.AssetCheckResult(
        check_name="busy_lanes_fit_cache",
        passed=b["ok"],
        severity=dg.AssetCheckSeverity.WARN,
        metadata={k: v for k, v in b.items() if k != "ok"},
    )


POOL_ASSETS = [pool_sources, pool_structure, pool_dev, pool_test, pool_warmup, pool_probes, pool_data_card]
