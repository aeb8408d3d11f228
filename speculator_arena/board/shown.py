"""The raw rows behind the figures shown beside a score (SCORING.md "Shown, never scored"), and
the one blank rule they share.

Why the board computes these and not the scorer: they are shown, never scored, so no score
depends on them, and the scorer's frames stay what a score needs. Each figure is read by a SQL
file of `board/sql/` over the warehouse's own views (`pass_busy`, `staged_requests`,
`spec_decode_counters`, the `sessions` rows), never from the scorer's internals, and the few
lines of arithmetic on top live in the module named for the figure: `curves.py` (throughput
against interactivity), `acceptance.py` (by draft position, per verification step, per chunk,
by family and app; SPEED-Bench's speedup proxy), `context.py` (acceptance against prompt length
and turn), `profile.py` (the speculation profile), `goodput.py` (its objectives, which the
requests are read against: `goodput_objectives.py`). ADR-0009: a figure lacking any row it needs
is blank (NaN) with the reason, never a figure over fewer rows. Every figure can be redone from
the analysts' database by the queries in docs/warehouse.md.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass

import pandas as pd

from speculator_arena.board.data import board_sql, evaluations_index, scoped_connection
from speculator_arena.board.goodput_objectives import objectives_frame
from speculator_arena.protocol import load_protocol
from speculator_arena.protocol.model import WORKLOADS
from speculator_arena.rules.status import UNFINISHED

ENGINES = ("candidate", "stock")
ALL = "all"  # the workload of a figure pooled over solo, team and busy


@dataclass
class ShownRows:
    """One scoped read of the evaluations a page shows (one for the evaluation page, the task's
    references and an entry for the task page), under one protocol version."""

    index: pd.DataFrame  # evaluations index rows of these evaluations (task, split, status)
    passes: pd.DataFrame  # shown_passes.sql
    busy: pd.DataFrame  # shown_busy.sql
    counters: pd.DataFrame  # shown_counters.sql
    chunks: pd.DataFrame  # shown_chunks.sql
    requests: pd.DataFrame  # shown_requests.sql
    context: pd.DataFrame  # shown_context.sql
    objectives: pd.DataFrame  # evaluation_id, workload, ttft_seconds, tpot_seconds, source
    protocol_version: int


def read_shown(
    home: str | os.PathLike | None,
    evaluation_ids: Iterable[str],
    protocol_version: int | None = None,
    index: pd.DataFrame | None = None,
) -> ShownRows:
    """Read what every shown figure needs for these evaluations, in one scoped connection whose
    views count requests under `protocol_version` (its count slack), like the scores beside them."""
    from speculator_arena.warehouse.store import define_scoring_rules

    ids = sorted(set(evaluation_ids))
    proto = load_protocol(protocol_version)
    index = evaluations_index(home) if index is None else index
    mine = index[index["evaluation_id"].isin(ids)].drop_duplicates("evaluation_id").reset_index(drop=True)
    objectives = objectives_frame(proto, mine)
    with scoped_connection(home, ids) as con:
        define_scoring_rules(con, proto)
        con.register("goodput_objectives", objectives[["evaluation_id", "workload", "ttft_seconds", "tpot_seconds"]])

        def q(name: str) -> pd.DataFrame:
            return con.execute(board_sql(name), [ids]).fetchdf()

        return ShownRows(
            index=mine,
            passes=q("shown_passes.sql"),
            busy=q("shown_busy.sql"),
            counters=q("shown_counters.sql"),
            chunks=q("shown_chunks.sql"),
            requests=q("shown_requests.sql"),
            context=q("shown_context.sql"),
            objectives=objectives,
            protocol_version=proto.version,
        )


def expected_passes(rows: ShownRows) -> dict[str, int | None]:
    """Per evaluation, the passes per workload it was run with, as the scorer counts them
    (scoring/limits.py's passes_run); None when its task is not in the version read."""
    from speculator_arena.scoring.limits import passes_run

    proto = load_protocol(rows.protocol_version)
    index = rows.index
    counts = passes_run(index, proto) if len(index) else []
    return {
        e: (int(n) if t in proto.tasks and pd.notna(n) else None)
        for e, t, n in zip(index["evaluation_id"], index["task_id"], counts)
    }


class Blanks:
    """Why an evaluation's figure of one engine and workload cannot be shown (None: it can): the
    evaluation is unfinished, its task is not in the version read, or the engine has fewer
    complete passes of the workload than the task asks (ADR-0009)."""

    def __init__(self, rows: ShownRows):
        self.version = rows.protocol_version
        self.expected = expected_passes(rows)
        self.status = dict(zip(rows.index["evaluation_id"], rows.index["status"]))
        p = rows.passes
        self.complete = {
            (e, g, w): int(c) for e, g, w, c in zip(p["evaluation_id"], p["engine"], p["workload"], p["complete"])
        }

    def __call__(self, evaluation_id: str, engine: str, workload: str) -> str | None:
        status = self.status.get(evaluation_id)
        if status in UNFINISHED:
            return f"incomplete: evaluation is {status}"
        expected = self.expected.get(evaluation_id)
        if expected is None:
            return f"task not in protocol v{self.version}"
        missing = [
            w
            for w in (WORKLOADS if workload == ALL else (workload,))
            if self.complete.get((evaluation_id, engine, w), 0) < expected
        ]
        if missing:
            return f"{engine} passes missing or aborted in {', '.join(missing)}"
        return None


def keys(rows: ShownRows, workloads: Iterable[str] = WORKLOADS) -> list[tuple[str, str, str]]:
    """Every (evaluation, engine, workload) a figure has a row for, blank or not."""
    return [(e, g, w) for e in rows.index["evaluation_id"] for g in ENGINES for w in workloads]


def sub(df: pd.DataFrame, evaluation_id: str, engine: str, workload: str | None = None) -> pd.DataFrame:
    """The rows of one evaluation and engine (and workload) of a frame read above."""
    m = (df["evaluation_id"] == evaluation_id) & (df["engine"] == engine)
    if workload is not None and workload != ALL:
        m &= df["workload"] == workload
    return df[m]
