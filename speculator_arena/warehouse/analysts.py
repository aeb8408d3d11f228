"""The analysts' database, `$ARENA_HOME/arena.duckdb`: the raw tables without hidden text.

Why a separate file with copied rows: the raw Parquet (the operators' warehouse) holds reply
texts, probe texts and engine logs of test-split evaluations, and the models echo the hidden
prompts word for word. The analysts' file is built from an ALLOWLIST of columns per table
(deny by default: a column added to a schema later is not copied until someone classifies it
here), and columns that are text an engine wrote (replies, probe replies and their token ids,
logs, errors, metric names and labels) are copied for dev-split evaluations only; of a test
evaluation's metrics, only the names of the speculative-decoding counters (the arena's own
words) and a per-position counter's draft position (an integer it reads) are kept, so the
figures of the evaluation page can be redone for both splits. The file
holds tables, not views over the Parquet, so it can be handed to analysts on its own and
opened with `duckdb -readonly $ARENA_HOME/arena.duckdb`.

It is written whole into a temporary file and renamed into place, so a reader never sees a
half-built file, and rebuilt after every evaluation (`refresh_after_evaluation`), by
`arena warehouse analysts` and by the Dagster asset `analysts_db`.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from speculator_arena import sqlfiles
from speculator_arena.atomic import atomic_path
from speculator_arena.warehouse.schema import (
    LOWB_CHECKPOINTS,
    LOWB_ITEMS,
    LOWB_KL_PROMPTS,
    LOWB_MEMORY,
    LOWB_REQUESTS,
    LOWB_TENSORS,
    RAW_TABLES,
)
from speculator_arena.warehouse.store import Warehouse, arena_home, warehouse_sql

FILE_NAME = "arena.duckdb"

ALL, DEV = "all", "dev"  # copied for every evaluation / for dev-split evaluations only (NULL for test)
# Copied whole for dev-split evaluations and, for any other, only what a rule of
# `sql/copied/<table>.<column>.sql` keeps: a metric's name when it is one of the engine's
# speculative-decoding counters (KNOWN), a per-position counter's draft position (POSITION).
KNOWN, POSITION = "known", "position"

# table -> {column: ALL | DEV}. Every column not named here is left out.
ALLOWLIST: dict[str, dict[str, str]] = {
    "evaluations": {
        c: ALL
        for c in (
            "evaluation_id",
            "task_id",
            "split",
            "protocol_version",
            "submission_id",
            "account_id",
            "is_reference",
            "label",
            "solution_kind",
            "status",
            "created_at",
            "updated_at",
            "provenance",
        )
    }
    | {"void_reason": DEV, "failure_reason": DEV},
    "passes": {
        c: ALL
        for c in (
            "evaluation_id",
            "pass_id",
            "engine",
            "workload",
            "pass_index",
            "lanes",
            "interleave",
            "started_at",
            "ends_at",
            "grace_ends_at",
            "finished_at",
            "status",
            "memory_status",
            "memory_note",
            "device_total_bytes",
            "gpu_memory_utilization",
        )
    }
    | {"error": DEV},
    "requests": {
        c: ALL
        for c in (
            "evaluation_id",
            "pass_id",
            "engine",
            "workload",
            "pass_index",
            "request_id",
            "lane",
            "session_id",
            "turn",
            "seed",
            "sent_at",
            "first_token_at",
            "last_token_at",
            "ended_at",
            "prompt_tokens",
            "usage_prompt_tokens",
            "cached_tokens",
            "output_tokens",
            "usage_completion_tokens",
            "max_tokens",
            "done",
            "finish_reason",
            "window_cut",
            "chunk_times",
            "chunk_tokens",
            "chunk_chars",
        )
    }
    | {"error": DEV},
    "replies": {"evaluation_id": ALL, "request_id": ALL, "engine": ALL, "text": DEV},
    "metrics": {c: ALL for c in ("evaluation_id", "pass_id", "engine", "phase", "taken_at", "value")}
    | {"name": KNOWN, "labels": POSITION},
    "memory": {
        c: ALL
        for c in ("evaluation_id", "pass_id", "engine", "sampled_at", "used_bytes", "total_bytes", "engine_bytes")
    }
    | {"error": DEV},
    "contention": {
        c: ALL
        for c in (
            "evaluation_id",
            "pass_id",
            "engine",
            "started_at",
            "ended_at",
            "cpu_seconds",
            "own_cpu_seconds",
            "foreign_cpu_seconds",
            "steal_seconds",
            "total_cpu_seconds",
            "cpus",
            "foreign_gpu_processes",
            "foreign_gpu_bytes",
            "foreign_gpu_pids",
            "gpu_utilization",
            "throttle_reasons",
        )
    }
    | {"error": DEV},
    "slices": {
        c: ALL
        for c in (
            "evaluation_id",
            "workload",
            "pass_id",
            "pass_index",
            "engine",
            "slice_index",
            "started_at",
            "ended_at",
            "cpu_seconds",
            "other_cpu_seconds",
        )
    },
    "sessions": {c: ALL for c in ("evaluation_id", "pass_id", "engine", "session_id", "family", "app")},
    "probe_greedy": {c: ALL for c in ("evaluation_id", "engine", "prompt_id", "prompt_index", "answered")}
    | {"token_ids": DEV, "text": DEV, "error": DEV},
    "probe_scored": {
        c: ALL
        for c in (
            "evaluation_id",
            "reply_engine",
            "scorer_engine",
            "request_id",
            "sample_index",
            "token_logprobs",
            "token_ranks",
            "answered",
        )
    }
    | {"token_ids": DEV, "context_sha256": DEV, "error": DEV},
    "probe_fidelity": {c: ALL for c in ("evaluation_id", "engine", "text_id", "token_logprobs", "answered")}
    | {"token_ids": DEV, "error": DEV},
    "engine_starts": {
        c: ALL
        for c in (
            "evaluation_id",
            "engine",
            "purpose",
            "start_index",
            "started_at",
            "healthy_at",
            "stopped_at",
            "exit_code",
            "stop_signal",
            "run_as_user",
            "unprivileged",
            "offload_detected",
            "died",
            "device_idle_seconds",
            "device_idle_ok",
        )
    }
    | {"offload_evidence": DEV, "log_text": DEV},
    # LowBArena's tables: ids are opaque; what could spell a hidden item or prompt (the token ids the
    # KL probe read, the model's top ids there, a grader's or an engine's words) is dev-only.
    "lowb_requests": {c: ALL for c in LOWB_REQUESTS.names if c != "error"} | {"error": DEV},
    "lowb_memory": {c: ALL for c in LOWB_MEMORY.names},
    "lowb_items": {c: ALL for c in LOWB_ITEMS.names if c != "detail"} | {"detail": DEV},
    "lowb_kl_prompts": {c: ALL for c in LOWB_KL_PROMPTS.names if c != "error"} | {"error": DEV},
    "lowb_logprobs": {
        c: ALL for c in ("evaluation_id", "engine", "prompt_id", "position", "token_logprob", "top_logprobs")
    }
    | {"token_id": DEV, "top_ids": DEV},
    "lowb_tensors": {c: ALL for c in LOWB_TENSORS.names},
    "lowb_checkpoints": {c: ALL for c in LOWB_CHECKPOINTS.names},
}


@dataclass
class Refresh:
    path: Path
    rows: dict[str, int]
    withheld_test_evaluations: int
    seconds: float


def _copy(wh: Warehouse, table: str) -> str:
    """The statement that copies the allowed columns of one raw table; DEV columns NULL unless the row's evaluation is
    a dev-split one (by the evaluations table, so a row of an unknown evaluation gets NULL)."""
    schema = RAW_TABLES[table]
    allowed = ALLOWLIST.get(table, {})
    cols = []
    for f in schema:
        rule = allowed.get(f.name)
        if rule == ALL:
            cols.append(f'r."{f.name}"')
        elif rule == DEV:
            cols.append(warehouse_sql("analysts_dev_column.sql", column=f.name))
        elif rule in (KNOWN, POSITION):
            rule_sql = sqlfiles.read("speculator_arena.warehouse", f"{table}.{f.name}.sql", "sql/copied")
            cols.append(f'({rule_sql}) AS "{f.name}"')
    return warehouse_sql("analysts_copy_table.sql", table=table, columns=", ".join(cols), select=wh.raw_select(table))


def column_rows() -> list[tuple[str, str, str]]:
    """(table, column, copied) for every raw column: `all`, `dev` (NULL for test-split
    evaluations), `known` or `position` (whole for dev, what the rule keeps for test: above) or
    `no` (not in the file): the table `analyst_columns` of the file."""
    return [(t, f.name, ALLOWLIST.get(t, {}).get(f.name, "no")) for t, schema in RAW_TABLES.items() for f in schema]


def refresh(home: str | os.PathLike | None = None) -> Refresh:
    """Build the analysts' file from the raw Parquet into a temporary file beside it, then
    rename it into place (readers that have the old file open keep reading the old one)."""
    import duckdb

    from speculator_arena.protocol import load_protocol
    from speculator_arena.warehouse.store import define_scoring_rules, macro_statements, sql_statements

    t0 = time.time()
    wh = Warehouse(home)
    wh.home.mkdir(parents=True, exist_ok=True)
    path = wh.home / FILE_NAME
    rows: dict[str, int] = {}
    with atomic_path(path) as tmp:
        con = duckdb.connect(str(tmp))
        try:
            con.execute(warehouse_sql("analysts_dev_evaluations.sql", evaluations=wh.raw_select("evaluations")))
            for stmt in macro_statements():  # the copy rules of sql/copied/ call them
                con.execute(stmt)
            for table in RAW_TABLES:
                con.execute(_copy(wh, table))
                rows[table] = con.execute(warehouse_sql("analysts_count.sql", table=table)).fetchone()[0]
            withheld = con.execute(warehouse_sql("analysts_withheld.sql")).fetchone()[0]
            con.execute(warehouse_sql("analysts_columns.sql"))
            con.executemany(warehouse_sql("analysts_insert_column.sql"), column_rows())
            define_scoring_rules(con, load_protocol(), temporary=False)
            for stmt in sql_statements():
                con.execute(stmt)
            con.execute(warehouse_sql("checkpoint.sql"))
        finally:
            con.close()
    return Refresh(path, rows, int(withheld), time.time() - t0)


def refresh_after_evaluation(home: str | os.PathLike | None = None, say=print) -> None:
    """The hook at the end of an evaluation: refresh the analysts' file, never failing the
    evaluation (a runner image without DuckDB skips it; `arena warehouse analysts` catches up)."""
    try:
        r = refresh(home)
        say(f"analysts' database {r.path} refreshed in {r.seconds:.1f} s")
    except ImportError as exc:
        say(f"analysts' database not refreshed here ({exc}); run `arena warehouse analysts`")
    except Exception as exc:  # noqa: BLE001 - the evaluation's rows are stored; this copy is rebuildable
        say(f"analysts' database not refreshed: {type(exc).__name__}: {exc}; run `arena warehouse analysts`")


def analysts_path(home: str | os.PathLike | None = None) -> Path:
    return arena_home(home) / FILE_NAME
