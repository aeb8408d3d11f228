"""A compacted, rebuildable snapshot of the raw `evaluations` table: listing evaluations
without opening one Parquet part per evaluation.

Why: the store keeps each evaluation's rows in its own hive partition, and opening a Parquet
part costs DuckDB or pyarrow 0.1-0.4 ms however small it is, so listing 10,000 evaluations
from their parts takes about 4 s (docs/benchmarks/board.md); the board lists them on every
first render. Statting the 10,000 partition directories takes about 0.07 s.

What: `$ARENA_HOME/catalog/evaluations.parquet` holds every evaluations row plus, per row,
the mtime of its partition directory when it was read (`_mtime_ns`) and when that mtime was
observed (`_seen_ns`). Writers keep it up to date (`Warehouse.write_rows` calls `upsert` after
each evaluations write; `refresh` rebuilds it whole).

It is never authoritative. `read_evaluations` stats every partition directory and reads from
the raw parts every partition that is new, whose directory changed (the store writes by
create-and-rename, which changes the directory's mtime), or whose mtime was observed less
than `RACY_NS` after it was set (a later write within the filesystem's clock tick would
leave the same mtime: git's "racy clean" rule); partitions that are gone are dropped. A
stale, partial or missing snapshot costs time, never a wrong row; deleting it is always safe.
Reading never writes.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from speculator_arena import settings
from speculator_arena.atomic import atomic_path
from speculator_arena.rules.status import RANKED
from speculator_arena.warehouse import parts
from speculator_arena.warehouse.schema import TABLES

TABLE = "evaluations"
RACY_NS = 2_000_000_000  # a directory must have been quiet this long before its mtime is trusted
RACY_FINE_NS = 100_000_000  # ... on filesystems with sub-second mtimes (Linux's clock tick is <= 10 ms)
STAMPS = [pa.field("_mtime_ns", pa.int64()), pa.field("_seen_ns", pa.int64())]
PREFIX = parts.PREFIX


def snapshot_path(home: str | os.PathLike) -> Path:
    return Path(home) / "catalog" / f"{TABLE}.parquet"


def _schema() -> pa.Schema:
    s = TABLES[TABLE]
    for f in STAMPS:
        s = s.append(f)
    return s


def _empty() -> pa.Table:
    return _schema().empty_table()


def partition_mtimes(raw_table_dir: Path) -> dict[str, int]:
    """evaluation_id -> mtime_ns of its partition directory (one scandir, one stat each)."""
    out: dict[str, int] = {}
    try:
        entries = os.scandir(raw_table_dir)
    except FileNotFoundError:
        return out
    with entries:
        for e in entries:
            if e.name.startswith(PREFIX) and e.is_dir():
                try:
                    out[e.name[len(PREFIX) :]] = e.stat().st_mtime_ns
                except FileNotFoundError:  # dropped while we looked
                    continue
    return out


def _read_partitions(home: str | os.PathLike, ids: list[str], mtimes: dict[str, int], seen_ns: int) -> pa.Table:
    """The rows of these partitions, read from their parts, stamped with what was observed. A
    part replaced while we read is skipped: its directory's mtime moved on, so it is re-read."""
    t = parts.read_parts(home, TABLE, ids, vanished_ok=True)
    if not t.num_rows:
        return _empty()
    eids = t.column("evaluation_id").to_pylist()
    t = t.append_column(STAMPS[0], pa.array([mtimes[e] for e in eids], pa.int64()))
    return t.append_column(STAMPS[1], pa.array([seen_ns] * len(eids), pa.int64()))


def _load(home: str | os.PathLike) -> pa.Table | None:
    try:
        t = pq.read_table(snapshot_path(home))
        return t.select(_schema().names).cast(_schema())
    except (pa.ArrowInvalid, KeyError, ValueError, OSError):  # missing, broken, or of another schema
        return None


def load_snapshot(home: str | os.PathLike) -> pa.Table:
    """The stored snapshot, or an empty one when it is missing, broken or not of the current schema."""
    t = _load(home)
    return _empty() if t is None else t


def trusted_mask(mtime_now: np.ndarray, stamped: np.ndarray, seen: np.ndarray) -> np.ndarray:
    """Rows whose partition is unchanged and was already quiet when it was observed.

    The quiet time is `RACY_NS` (2 s) on filesystems that keep whole seconds, `RACY_FINE_NS` on
    those that keep finer times (a whole-second mtime is taken as the sign of the former).
    """
    coarse = (stamped % 1_000_000_000) == 0
    window = np.where(coarse, RACY_NS, RACY_FINE_NS)
    return (mtime_now == stamped) & ((seen - stamped) > window)


def read_evaluations(home: str | os.PathLike, base: pa.Table | None = None) -> tuple[pa.Table, dict[str, int]]:
    """Every evaluations row as the raw parts hold it now, with its stamps; and how many
    partitions had to be read from their parts (`new`, `changed`, `racy`: unchanged but
    observed too soon after a write to be trusted).

    `base` is a previous result to start from instead of the stored snapshot (the board keeps
    its last one in memory). Never writes.
    """
    raw = Path(home) / "raw" / TABLE
    seen_ns = time.time_ns()
    mtimes = partition_mtimes(raw)
    snap = load_snapshot(home) if base is None else base
    stats = {"new": 0, "changed": 0, "racy": 0}
    if snap.num_rows and mtimes:
        ids = np.asarray(snap.column("evaluation_id").to_pylist(), dtype=object)
        now = np.fromiter((mtimes.get(e, -1) for e in ids), dtype=np.int64, count=len(ids))
        stamped = snap.column("_mtime_ns").to_numpy()
        ok = trusted_mask(now, stamped, snap.column("_seen_ns").to_numpy())
        bad = set(ids[~ok])  # a partition is trusted only when every one of its rows is
        keep = ok & ~np.isin(ids, list(bad)) if bad else ok
        trusted = snap.filter(pa.array(keep))
        known = dict(zip(ids, stamped))
        for e in bad:
            if e in mtimes:
                stats["changed" if known.get(e) != mtimes[e] else "racy"] += 1
    else:
        trusted = _empty()
    have = set(trusted.column("evaluation_id").to_pylist())
    todo = sorted(e for e in mtimes if e not in have)
    stats["new"] = len(todo) - stats["changed"] - stats["racy"]
    fresh = _read_partitions(home, todo, mtimes, seen_ns)
    return pa.concat_tables([trusted, fresh]), stats


def evaluations_table(home: str | os.PathLike) -> pa.Table:
    """The raw evaluations table (schema of `warehouse.schema`), through the snapshot."""
    t, _ = read_evaluations(home)
    return t.drop_columns([f.name for f in STAMPS])


def _write(home: str | os.PathLike, table: pa.Table) -> Path:
    path = snapshot_path(home)
    with atomic_path(path, durable=False) as tmp:  # a cache of the raw parts
        pq.write_table(table, tmp)
    return path


def refresh(home: str | os.PathLike) -> tuple[Path, int]:
    """Rebuild the snapshot (re-reading only what changed); returns its path and the number
    of partitions read. Safe to run at any time, by any writer, concurrently with readers."""
    t, stats = read_evaluations(home)
    return _write(home, t), sum(stats.values())


def upsert(home: str | os.PathLike, evaluation_id: str) -> None:
    """After a write to one evaluation's partition: replace its rows in the snapshot.

    Costs one read and one write of the snapshot (milliseconds at 10,000 rows), never a scan of
    every partition. Rows observed too soon after their partition changed are re-read here
    once they are old enough, so a burst of writes leaves only its last second untrusted.
    Without a usable snapshot (none yet, broken, another schema), builds one whole (once). Two writers racing may each drop the
    other's row from the snapshot; readers then read that partition from its parts.
    """
    snap = _load(home)
    if snap is None:
        refresh(home)
        return
    now = time.time_ns()
    eid = snap.column("evaluation_id")
    stamped = snap.column("_mtime_ns").to_numpy()
    racy = ~trusted_mask(stamped, stamped, snap.column("_seen_ns").to_numpy())
    redo = {evaluation_id} | set(pc.filter(eid, pa.array(racy)).to_pylist())
    keep = snap.filter(pc.invert(pc.is_in(eid, pa.array(sorted(redo), pa.string()))))
    mtimes = {e: m for e in redo if (m := parts.partition_mtime(home, TABLE, e)) >= 0}  # gone: dropped
    fresh = _read_partitions(home, sorted(mtimes), mtimes, now)
    _write(home, pa.concat_tables([keep, fresh]))


def latest_finished(index, keep: int = 1) -> list[str]:
    """Each account's last `keep` finished evaluations per task and split, and each reference's
    per label: what the board ranks (and, on both splits, the dev/test gap flag compares).

    `index`: a pandas frame with the evaluations index's columns. Lives here, not in the board,
    because the packer (packs.py) puts these evaluations together in its row groups.
    """
    df = index[index["status"].isin(RANKED)].copy()
    if df.empty:
        return []
    ref = df["is_reference"].fillna(False).astype(bool)
    df["group"] = (
        df["task_id"].fillna("")
        + "\x00"
        + df["account_id"].fillna("")
        + "\x00"
        + df["split"].fillna("")
        + "\x00"
        + ref.astype(str)
        + "\x00"
        + df["label"].where(ref, "").fillna("")
    )
    df = df.sort_values(["created_at", "evaluation_id"], ascending=False, na_position="last")
    return sorted(df.groupby("group", sort=False).head(keep)["evaluation_id"].tolist())


def enabled() -> bool:
    """`ARENA_CATALOG=0` turns the writers' upsert off (a bulk load then runs `refresh` once)."""
    return settings.flag("ARENA_CATALOG")


def fingerprints(home: str, evaluation_ids: list[str], now_ns: int) -> dict[str, tuple]:
    """Per evaluation, the mtimes of its partition directories (-1: none), as the stores of
    derived rows key them (board/store.py, scoring/request_store.py). The store writes by
    create-and-rename, which moves a directory's mtime; a directory changed less than the
    catalog's racy window ago is not trusted (a later write within the same clock tick would
    leave the same mtime), so its fingerprint never equals a later one and it is re-scored.
    The racy check runs once over every directory (870 x 12 at 10,000 evaluations: one numpy
    call per directory cost more than its stat)."""
    m = np.array(
        [parts.partition_mtime(home, table, eid) for eid in evaluation_ids for table in TABLES], dtype=np.int64
    ).reshape(len(evaluation_ids), len(TABLES))
    racy = ((m >= 0) & ~trusted_mask(m, m, np.int64(now_ns))).any(axis=1)
    return {eid: (object(),) if r else tuple(row) for eid, row, r in zip(evaluation_ids, m.tolist(), racy.tolist())}


if __name__ == "__main__":  # python -m speculator_arena.warehouse.catalog [ARENA_HOME]
    import sys

    h = settings.arena_home(sys.argv[1] if len(sys.argv) > 1 else None)
    t0 = time.perf_counter()
    p, n = refresh(h)
    print(f"catalog {p}: {n} partition(s) read from their parts in {time.perf_counter() - t0:.1f} s")
