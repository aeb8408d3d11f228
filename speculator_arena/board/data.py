"""What the board reads from the warehouse, without Streamlit (so it is testable and reusable).

Three rules shape this module:

- Read-only. Nothing here writes under `ARENA_HOME`. Scores are computed by
  `speculator_arena.scoring.score_warehouse` from raw rows; the board never reads the score
  copies under `$ARENA_HOME/scores/v<N>/`. (The board's memo, board/memo.py, keeps what it
  scored in its score store, board/store.py, checked against the raw partitions' mtimes.)
- Scoped. Scoring or querying a few evaluations must not cost what the whole warehouse costs:
  binding the warehouse's `raw_*` views reads the footer of every Parquet part of every table,
  several seconds with 10,000 evaluations. So the board lists evaluations through the
  warehouse's evaluations catalog (warehouse/catalog.py), picks the ones a page needs, and
  hands the scorer exactly those (it reads their rows from the warehouse's packs where those
  are current, warehouse/packs.py, else from their parts). An evaluation page's own queries
  run on a *scoped warehouse*: a temporary ARENA_HOME whose raw partitions are symbolic links
  to that evaluation's partitions.
- Hidden text stays hidden. No query here reads `raw_replies`, probe texts or pool text; the
  SQL under `board/sql/` returns engine logs and request error texts only for `dev`
  evaluations (tests/dashboards/test_hidden_text.py checks every page's output).
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import duckdb
import pandas as pd

from speculator_arena import sqlfiles
from speculator_arena.errors import ArenaError
from speculator_arena.rules.status import current_frame
from speculator_arena.warehouse import catalog
from speculator_arena.warehouse.schema import TABLES
from speculator_arena.warehouse.store import Warehouse, arena_home

GIB = 1 << 30


class BoardDataError(RuntimeError, ArenaError):
    """The warehouse could not be read for a reason the page should explain."""


def quiet(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """No progress bar: DuckDB draws one on stdout for long scans, into the server's log."""
    con.execute(board_sql("quiet.sql"))
    return con


def board_sql(name: str) -> str:
    """One query of `board/sql/` (board-only queries; the scorer's live in `scoring/sql/`)."""
    return sqlfiles.read("speculator_arena.board", name)


# ---- the warehouse's state ----------------------------------------------------------------


@dataclass(frozen=True)
class WarehouseState:
    home: str
    exists: bool
    evaluations: int
    message: str
    # the tasks that have evaluations, in the index's order (newest activity first): the
    # sidebar's first choices, so it need not read the index itself
    tasks: tuple[str, ...] = ()


def warehouse_state(home: str | os.PathLike | None = None, index: pd.DataFrame | None = None) -> WarehouseState:
    """Whether there is anything to show, and if not, a sentence that says why.

    `index` (the evaluations index, when the caller already has it) saves listing again."""
    h = arena_home(home)
    if not h.exists():
        return WarehouseState(
            str(h),
            False,
            0,
            f"No warehouse at {h}: set ARENA_HOME to a warehouse directory, or run `arena evaluate` to make one.",
        )
    idx = evaluations_index(h) if index is None else index
    n = int(idx["evaluation_id"].nunique())
    if n == 0:
        return WarehouseState(
            str(h),
            True,
            0,
            f"The warehouse at {h} holds no evaluations yet. Run an evaluation "
            "(`arena evaluate ...`) and it appears here once its first rows are written.",
        )
    tasks = tuple(dict.fromkeys(idx["task_id"].dropna().tolist()))
    return WarehouseState(str(h), True, n, f"{n} evaluation(s) in {h}", tasks)


# ---- listing evaluations ------------------------------------------------------------------

INDEX_COLUMNS = [
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
    "void_reason",
    "failure_reason",
    "created_at",
    "updated_at",
]


def evaluations_index(home: str | os.PathLike | None = None) -> pd.DataFrame:
    """One row per evaluation (identity and status, newest first), from the raw evaluations rows.

    Read through the warehouse's catalog (`warehouse/catalog.py`): one snapshot file plus the
    parts of any partition written since, so listing 10,000 evaluations does not open 10,000
    Parquet parts. The catalog checks every partition's directory against the snapshot; it is
    never read alone.
    """
    table, _ = catalog.read_evaluations(arena_home(home))
    return index_frame(table)


def index_frame(table) -> pd.DataFrame:
    """The catalog's Arrow rows as the board's index frame: its columns, newest first."""
    if table.num_rows == 0:
        return pd.DataFrame({c: pd.Series(dtype=_index_dtype(c)) for c in INDEX_COLUMNS})
    df = table.select(INDEX_COLUMNS).to_pandas()
    df["is_reference"] = df["is_reference"].fillna(False).astype(bool)
    df = current_frame(df)  # several parts: the current row, as the scorer keeps
    return df.sort_values(["created_at", "evaluation_id"], ascending=[False, True], na_position="last").reset_index(
        drop=True
    )


def _index_dtype(col: str) -> str:
    return {"protocol_version": "Int64", "is_reference": "bool", "created_at": "float64", "updated_at": "float64"}.get(
        col, "object"
    )


def tasks_present(index: pd.DataFrame) -> list[str]:
    return sorted(index["task_id"].dropna().unique().tolist())


def board_candidates(index: pd.DataFrame, task_id: str, keep: int = 1) -> list[str]:
    """The evaluations the board must score for one task.

    Each account's last `keep` finished evaluations per split (the one the board ranks; both
    splits, for the dev/test gap flag), and each reference's last `keep` per label. Scoring only
    these makes the board's cost grow with the number of accounts, not with the number of
    evaluations the warehouse holds (docs/benchmarks/board.md).
    """
    return catalog.latest_finished(index[index["task_id"] == task_id], keep)


# ---- scoped warehouses --------------------------------------------------------------------


@contextmanager
def scoped_warehouse(home: str | os.PathLike | None, evaluation_ids: Iterable[str]) -> Iterator[Warehouse]:
    """A temporary, read-only view of the warehouse holding only `evaluation_ids`.

    Its raw partitions are symbolic links to the real partition directories, so nothing is
    copied and nothing under the real ARENA_HOME is touched; it has no `arena.duckdb`, so
    connecting to it read-only defines the views in memory. Whatever way a reader finds the
    parts (the store's views, a glob of `raw/<table>/*/*.parquet`, os.scandir), it finds only
    these evaluations'. One link per partition. Only an evaluation page's raw queries use it
    (one evaluation); the scorer takes evaluation ids and reads only theirs.
    """
    src = Warehouse(home)
    ids = sorted(set(evaluation_ids))
    with tempfile.TemporaryDirectory(prefix="arena-board-scope-") as tmp:
        scoped = Warehouse(tmp)
        for table in TABLES:
            dest_root = scoped.raw / table
            dest_root.mkdir(parents=True, exist_ok=True)
            for eid in ids:
                part = src.partition_dir(table, eid)
                if part.is_dir():
                    (dest_root / part.name).symlink_to(part, target_is_directory=True)
        yield scoped


@contextmanager
def scoped_connection(
    home: str | os.PathLike | None, evaluation_ids: Iterable[str]
) -> Iterator[duckdb.DuckDBPyConnection]:
    with scoped_warehouse(home, evaluation_ids) as wh:
        con = quiet(wh.connect(read_only=True))
        try:
            yield con
        finally:
            con.close()


# ---- scores -------------------------------------------------------------------------------


@dataclass
class ScoreFrames:
    """The scorer's output as plain frames (picklable, so Streamlit can cache it)."""

    evaluations: pd.DataFrame
    passes: pd.DataFrame
    gates: pd.DataFrame
    figures: pd.DataFrame
    boards: dict[str, pd.DataFrame] = field(default_factory=dict)  # split -> board_rows(...)
    protocol_version: int | None = None
    protocol_digest: str | None = None
    intervals: dict | None = None  # bootstrap intervals already drawn (Scores.intervals)

    @property
    def empty(self) -> bool:
        return self.evaluations.empty


def _scoring():
    try:
        from speculator_arena import scoring
    except ImportError as exc:  # the scoring domain is not installed in this build
        raise BoardDataError(f"scores cannot be computed: speculator_arena.scoring is unavailable ({exc})") from exc
    return scoring


def _frames(scores: Any) -> dict[str, pd.DataFrame]:
    out = {}
    for name in ("evaluations", "passes", "gates", "figures"):
        df = getattr(scores, name, None)
        out[name] = df.copy() if isinstance(df, pd.DataFrame) else pd.DataFrame()
    return out


def score_frames(home: str | os.PathLike | None, ids: list[str], protocol_version: int | None):
    """Score exactly these evaluations from their raw rows, under `protocol_version`."""
    scoring = _scoring()
    # the scorer reads only these evaluations' rows (through the packs where they are current)
    scores = scoring.score_warehouse(Warehouse(home), protocol_version=protocol_version, evaluation_ids=ids)
    frames = ScoreFrames(
        **_frames(scores),
        protocol_version=getattr(scores, "protocol_version", protocol_version),
        protocol_digest=getattr(scores, "protocol_digest", None),
    )
    return frames, scores


def empty_frames(protocol_version: int | None) -> ScoreFrames:
    from speculator_arena.protocol import load_protocol, protocol_digest

    version = load_protocol(protocol_version).version
    e = pd.DataFrame()
    return ScoreFrames(e, e, e, e, {}, version, protocol_digest(version))


SPLITS = ("dev", "test")


def score_board_candidates(index: pd.DataFrame, task_id: str, score):
    """`score(ids)` over the evaluations the board ranks: each group's last finished evaluation,
    and, for a group whose candidates the scorer left all without a score (void by a rule the
    runner's status cannot show, such as host contention), its earlier ones too, until it has a
    scored one or none is left (SCORING.md "Ranking": the last *scored* evaluation). What the
    text board over every evaluation would pick, at the cost of the latest ones alone when none
    is void. Only the groups still without a score reach further back: the earlier evaluations
    of a group that has its last scored one change nothing the board shows (its ranking and the
    gap flag read each group's last scored evaluation), and scoring them for every group cost
    the scorer most of the warehouse at 10,000 evaluations. Returns the last `score` result
    (None when there is nothing to score)."""
    task_rows = index[index["task_id"] == task_id]
    keep, ids, scores = 1, board_candidates(task_rows, task_id), None
    while ids:
        scores = score(ids)
        ev = getattr(scores, "evaluations", None)
        if ev is None or ev.empty:
            return scores
        per = pd.DataFrame({"g": _ranking_group(ev), "scored": ev["specscore"].notna()}).groupby("g")["scored"]
        per = per.agg(["any", "size"])
        open_groups = per.index[(~per["any"]) & (per["size"] >= keep)]
        if not len(open_groups):
            return scores
        keep *= 2
        more = board_candidates(task_rows[_ranking_group(task_rows).isin(open_groups)], task_id, keep)
        if set(more) <= set(ids):
            return scores
        ids = sorted(set(ids) | set(more))
    return scores


def _ranking_group(ev: pd.DataFrame) -> pd.Series:
    """The board's group of each row (of the index or the scorer's evaluations): split, and the
    account, or the label of a reference (board/ranking.py ranks each group's last scored one)."""
    ref = ev["is_reference"].fillna(False).astype(bool)
    return (
        ev["split"].astype(str)
        + "\x00"
        + ref.astype(str)
        + "\x00"
        + ev["account_id"].where(~ref, ev["label"]).fillna("").astype(str)
    )


def board_frames(scores, task_id: str, protocol_version: int | None) -> ScoreFrames:
    """The frames of one task's board from the scorer's output, with its ranked rows per split
    (board/ranking.py `board_rows`, the one ranking every board shows); empty when there is nothing to rank."""
    if scores is None:
        return empty_frames(protocol_version)
    frames = ScoreFrames(
        **_frames(scores),
        protocol_version=getattr(scores, "protocol_version", protocol_version),
        protocol_digest=getattr(scores, "protocol_digest", None),
    )
    from speculator_arena.board.ranking import board_rows

    frames.intervals = getattr(scores, "intervals", None)
    frames.boards = {split: pd.DataFrame(board_rows(scores, task_id, split)) for split in SPLITS}
    return frames


def combined_frames(boards: list[ScoreFrames], protocol_version: int | None) -> ScoreFrames:
    """Several tasks' boards as one set of frames (the text board prints every task at once)."""
    present = [b for b in boards if not b.evaluations.empty]
    if not present:
        return empty_frames(protocol_version)
    cat = {
        n: pd.concat([getattr(b, n) for b in present], ignore_index=True)
        for n in ("evaluations", "passes", "gates", "figures")
    }
    drawn = {k: v for b in present for k, v in (b.intervals or {}).items()}
    return ScoreFrames(
        **cat,
        protocol_version=present[0].protocol_version,
        protocol_digest=present[0].protocol_digest,
        intervals=drawn or None,
    )


def evaluation_scores(
    home: str | os.PathLike | None,
    evaluation_id: str,
    protocol_version: int | None = None,
    index: pd.DataFrame | None = None,
) -> ScoreFrames:
    """One evaluation's scores, passes, gates and figures (its page shows how it was scored).

    Scored together with its account's last finished evaluations of the task on both splits,
    so that the dev/test gap flag (protocol section 8, shown on the submission's page) is the
    one the board shows; every frame is then cut to this evaluation.
    """
    index = evaluations_index(home) if index is None else index
    me = index[index["evaluation_id"] == evaluation_id]
    ids = [evaluation_id]
    if not me.empty:
        acct, task = me.iloc[0]["account_id"], me.iloc[0]["task_id"]
        ids += board_candidates(index[(index["account_id"] == acct) & (index["task_id"] == task)], task)
    frames, _ = score_frames(home, ids, protocol_version)
    for name in ("evaluations", "passes", "gates", "figures"):
        df = getattr(frames, name)
        if "evaluation_id" in df.columns:
            setattr(frames, name, df[df["evaluation_id"] == evaluation_id].reset_index(drop=True))
    return frames


# ---- one evaluation's raw measurements (for its page) --------------------------------------


@dataclass
class EvaluationRaw:
    """Everything the evaluation page plots or lists besides scores; no text of any reply."""

    row_counts: pd.DataFrame
    passes: pd.DataFrame
    throughput: pd.DataFrame
    memory: pd.DataFrame
    failures: pd.DataFrame
    engine_starts: pd.DataFrame
    contention: pd.DataFrame


def evaluation_raw(home: str | os.PathLike | None, evaluation_id: str, bin_seconds: float = 1.0) -> EvaluationRaw:
    with scoped_connection(home, [evaluation_id]) as con:

        def q(name: str, *params) -> pd.DataFrame:
            return con.execute(board_sql(name), list(params)).fetchdf()

        return EvaluationRaw(
            row_counts=q("raw_row_counts.sql", evaluation_id),
            passes=q("passes_memory.sql", evaluation_id),
            throughput=q("throughput_bins.sql", evaluation_id, float(bin_seconds)),
            memory=q("memory_samples.sql", evaluation_id),
            failures=q("request_failures.sql", evaluation_id),
            engine_starts=q("engine_starts.sql", evaluation_id),
            contention=q("contention_intervals.sql", evaluation_id),
        )


def memory_budget_bytes(
    total_bytes: float | None, gpu_memory_utilization: float | None, slack_gib: float
) -> float | None:
    """The memory gate's bound (protocol section 7): utilization × device total + slack."""
    if total_bytes is None or gpu_memory_utilization is None:
        return None
    if any(isinstance(v, float) and math.isnan(v) for v in (total_bytes, gpu_memory_utilization)):
        return None
    from speculator_arena.rules.memory import memory_budget_bytes as budget

    return budget(float(total_bytes), float(gpu_memory_utilization), slack_gib * GIB)


def provenance(value: str | None) -> dict | str | None:
    """The evaluation's provenance JSON, or the raw string when it is not JSON."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    try:
        return json.loads(value)
    except (TypeError, ValueError):
        return value
