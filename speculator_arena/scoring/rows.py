"""What the scorer reads: every frame its SQL returns, in one typed bundle built by one function.

Why one bundle: the gates, the outcome and the figures each read a few of these frames; naming
them in one frozen dataclass says what each reads (`rows.greedy`, `rows.memory`) instead of
passing eighteen frames by position, and `read_rows` is the one place where the queries run,
in the order that lets the busy-window scan of the requests (scoring/busy_scan.py) run in a
thread beside the DuckDB queries that do not need it (both release the GIL).

Every query is a file of sql/ (one per field below, named in its docstring line); the frames
are those queries' rows as DuckDB returns them, except `evaluations` (a repeated id keeps its
last row) and `busy` (the scan's busy windows, with the SQL path's for the evaluations it
handed back).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pandas as pd

from speculator_arena import settings
from speculator_arena.protocol.lowb import lowb_task_ids
from speculator_arena.rules.status import current_frame
from speculator_arena.scoring import busy_scan, request_store
from speculator_arena.scoring.busy import busy_windows
from speculator_arena.scoring.connection import evaluation_ids, open_connection, query, sql_text, threads
from speculator_arena.scoring.limits import passes_run, protocol_workloads
from speculator_arena.scoring.timing import tick
from speculator_arena.warehouse import catalog, packs
from speculator_arena.warehouse.store import Warehouse


@dataclass(frozen=True)
class ScoringRows:
    """The rows of every query the scorer reads, over the evaluations scored (sql/<file>)."""

    evaluations: pd.DataFrame  # evaluations.sql: one row per evaluation, oldest first, with passes_run
    passes: pd.DataFrame  # pass_ratios.sql: per timed pass, speeds, ratio and its reasons
    greedy: pd.DataFrame  # gate_greedy.sql: per greedy prompt the stock engine answered
    scored: pd.DataFrame  # gate_scored.sql: per scored reply, its sums
    fidelity: pd.DataFrame  # gate_fidelity.sql: per fixed text the stock engine answered
    length: pd.DataFrame  # gate_length.sql: per evaluation, the paired length sums
    memory: pd.DataFrame  # gate_memory.sql: per evaluation and engine, peak and coverage
    answering: pd.DataFrame  # gate_answering.sql: per probe check and engine asked
    starts: pd.DataFrame  # engine_starts_summary.sql: per evaluation and engine
    figures_requests: pd.DataFrame  # figures_requests.sql: per engine and workload (and 'all')
    figures_wall: pd.DataFrame  # figures_wall.sql: per engine, the timed wall time
    figures_acceptance: pd.DataFrame  # figures_acceptance.sql: per engine, the counters' deltas
    engine_passes: pd.DataFrame  # engine_passes.sql: per engine and workload, passes complete
    contention: pd.DataFrame  # contention_passes.sql: per timed pass and engine
    timed_passes: pd.DataFrame  # timed_passes.sql: every stored timed pass
    busy: pd.DataFrame  # the busy windows of every timed pass (busy.COLUMNS), pass_ratios.sql's input


# (field, query) of what runs before the scan's results are needed, in this order
_BEFORE_SCAN = (
    ("greedy", "gate_greedy.sql"),
    ("scored", "gate_scored.sql"),
    ("fidelity", "gate_fidelity.sql"),
    ("memory", "gate_memory.sql"),
    ("contention", "contention_passes.sql"),
    ("timed_passes", "timed_passes.sql"),
    ("answering", "gate_answering.sql"),
    ("starts", "engine_starts_summary.sql"),
    ("figures_wall", "figures_wall.sql"),
    ("figures_acceptance", "figures_acceptance.sql"),
)


def read_rows(wh: Warehouse, proto, limits: pd.DataFrame, ids=None, t0: list | None = None) -> ScoringRows:
    """Run every query of the scorer over the evaluations `ids` (None: all) under `proto`.

    The per-request results of evaluations the request store holds at their fingerprint and
    count slack (scoring/request_store.py) are taken from it; only the others' requests are
    read and swept, and their results stored. `limits`: protocol_limits(proto), registered for
    the queries that apply them; `t0`: the timing carried by scoring/timing.py's `tick`."""
    t0 = [] if t0 is None else t0
    wanted = evaluation_ids(wh, ids)
    prints = catalog.fingerprints(str(wh.home), wanted, time.time_ns())  # before anything is read
    held = request_store.load(wh.home, wanted)
    tick(f"request store read ({len(held.keys)} evaluations held)", t0)
    pool = ThreadPoolExecutor(max_workers=1)
    started = []
    try:
        con = open_connection(
            wh,
            wanted,
            after_passes=lambda c, r: started.append(_busy_start(c, wh, r, pool, held, prints)),
            proto=proto,
        )
    except BaseException:
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    busy_future, hits, slack = started[0]
    tick(f"read small tables (busy scan of {len(wanted) - len(hits)} starts after the passes)", t0)
    # The connection holds only these evaluations' rows (open_connection), so the queries run
    # with their filter open ($ids NULL, folded away): the same rows, without list_contains
    # over every id on every row (the board's first render scores 870 ids).
    every_row = None

    def q(name: str) -> pd.DataFrame:
        df = query(con, name, every_row)
        tick(name, t0)
        return df

    try:
        con.register("protocol_limits", limits)
        con.register("protocol_workloads", protocol_workloads(proto))
        ev = current_frame(query(con, "evaluations.sql", every_row))
        # LowBArena's evaluations share the raw evaluations table; its own scorer scores them
        ev = ev[~ev["task_id"].isin(lowb_task_ids())].reset_index(drop=True)
        ev["passes_run"] = passes_run(ev, proto)
        con.register("evaluation_passes", ev[["evaluation_id", "passes_run"]])
        got = {"evaluations": ev}
        # the queries that do not read the requests, while the scan reads them in its thread
        for field, name in _BEFORE_SCAN:
            got[field] = q(name)
        got["engine_passes"] = query(con, "engine_passes.sql", every_row)
        tick("remaining queries", t0)
        busy, staged, to_sql = _busy_finish(con, busy_future)
        tick("waiting for the Parquet scan (busy windows, staged requests)", t0)
        _stage_requests(con, staged, to_sql)
        tick("staged requests registered", t0)
        # the per-request results of the evaluations just read, then with the stored ones
        fresh = {
            "busy": busy,
            "sums": con.sql(sql_text("pass_request_sums.sql")).to_arrow_table(),
            "length": q("gate_length.sql"),
            "figures": q("figures_requests.sql"),
        }
        known = request_store.combine(held, hits, fresh)
        con.register("request_sums", known["sums"])
        con.execute(sql_text("pass_request_sums_known.sql"))
        got["length"], got["figures_requests"], got["busy"] = known["length"], known["figures"], known["busy"]
        con.register("busy_windows", known["busy"])
        got["passes"] = q("pass_ratios.sql")
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        con.close()
    if len(hits) < len(wanted):
        read = set(wanted) - set(hits)
        request_store.save(wh.home, held, fresh, {e: prints[e] for e in read}, slack)
        tick("request store written", t0)
    return ScoringRows(**got)


def _busy_start(con, wh: Warehouse, resolved: packs.Resolved, pool: ThreadPoolExecutor, held=None, prints=None):
    """Start the scan of the busy windows in `pool`; DuckDB runs the other queries meanwhile
    (both release the GIL), and `_busy_finish` collects it. Returns (the scan's future, the
    evaluations the request store `held` answers at their `prints`, which the scan skips, and
    every evaluation's count slack under the version being scored)."""
    slack = dict(con.execute(sql_text("evaluation_slack.sql")).fetchall())
    hits = held.hits(prints, slack) if held is not None and held.shards else []
    if hits:
        resolved = resolved.without(hits)
    passes = con.sql(sql_text("busy_pass_rows.sql")).to_arrow_table()
    batches, n_threads = busy_scan.request_batches(wh.home, resolved), threads(con)

    def scan():
        t = time.perf_counter()
        out = busy_scan.busy_windows_from_batches(batches, passes, n_threads, staged=True)
        if settings.flag("ARENA_SCORE_TIMING"):
            import sys

            print(
                f"  score step (in its thread) busy-window scan of {len(batches)} batches "
                f"({len(resolved.packed_ids)} evaluations from packs, {len(resolved.unpacked)} from parts): "
                f"{time.perf_counter() - t:.2f} s",
                file=sys.stderr,
                flush=True,
            )
        return out

    return pool.submit(scan), hits, slack


def _busy_finish(con, future):
    """(busy windows, staged requests of the scanned evaluations, evaluations handed back):
    the scan's results, plus the SQL path's windows for the evaluations it handed back."""
    fast, to_sql, staged = future.result()
    if not to_sql:
        return fast, staged, to_sql
    slow = busy_windows(con.sql(sql_text("busy_inputs.sql"), params={"ids": to_sql}).to_arrow_table())
    return (pd.concat([fast, slow], ignore_index=True) if len(fast) else slow), staged, to_sql


def busy_windows_on(con, wh: Warehouse, ids) -> pd.DataFrame:
    """Busy windows of the evaluations `ids` (all: None) on an open scoring connection, as
    `read_rows` computes them (the tests compare them with the SQL view)."""
    resolved = packs.resolve(wh.home, evaluation_ids(wh, ids))
    with ThreadPoolExecutor(max_workers=1) as pool:
        return _busy_finish(con, _busy_start(con, wh, resolved, pool)[0])[0]


def _stage_requests(con, staged, to_sql) -> None:
    """`staged_requests` for every query that follows (sql/staged_requests.sql): the SQL view's
    rows (sql/staged_requests_cached.sql) of the evaluations the scan handed back, then the
    scan's rows (an Arrow table DuckDB reads in place, no copy); a side with no evaluations is
    an empty table of the same columns (busy_scan.STAGED)."""
    if to_sql or staged is None:
        con.execute(sql_text("staged_requests_cached.sql"), {"ids": to_sql})
    else:
        con.register("cached_staged_requests", busy_scan.STAGED.empty_table())
    con.register("staged_scan", busy_scan.STAGED.empty_table() if staged is None else staged)
    con.execute(sql_text("staged_requests.sql"))
