"""Packs: compacted, rebuildable copies of finished evaluations' raw rows, one file per table.

Why: the store keeps each evaluation's rows in a partition of their own (one Parquet part per
table and write), which is what makes writes atomic and an evaluation removable alone. But a
reader that needs 870 evaluations (the board's first render at 10,000 evaluations) then opens
about 8,000 small files, and opening a Parquet part costs 0.3-0.5 ms however small it is
(docs/benchmarks/board.md). A pack holds many finished evaluations in one file per table, one
row group per group of evaluations, so the same read is a few dozen row groups of a few files.

What: `$ARENA_HOME/packs/<pack>/<table>.parquet` (every column of the table, `evaluation_id`
included, rows of one group of evaluations per row group) and `manifest.parquet`: per
evaluation and table, the row group holding its rows (-1: none) and the mtime of its raw
partition directory when it was read (-1: no partition).

It is never authoritative, exactly like the evaluations catalog (catalog.py): an evaluation is
read from a pack only while every one of its partition directories still has the mtime the
pack recorded (the store writes by create-and-rename, which moves the directory's mtime), and
only evaluations whose partitions had been quiet for the catalog's racy window are packed.
Anything else is read from its parts. A stale, partial or missing pack costs time, never a
wrong row; deleting `packs/` is always safe. `pack()` is the only writer (`arena warehouse
pack`, the Dagster asset `raw_packs`); readers never write.

`replies` is not packed: nobody reads reply text in bulk (the scorer and the board never do),
and a second copy of hidden text is a copy more to protect.
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from speculator_arena import settings
from speculator_arena.atomic import atomic_path
from speculator_arena.rules.status import FINAL, current_frame
from speculator_arena.warehouse import catalog, generation, parts
from speculator_arena.warehouse.schema import TABLES

PACKED_TABLES = tuple(t for t in TABLES if t != "replies")
GROUP_SIZE = 32  # evaluations per row group: what a reader of one evaluation decodes with it
MAX_PACKS = 8  # more live packs than this and `pack()` rewrites them as one
RETIRED_GRACE_S = 600  # a replaced pack stays this long for readers that resolved it before
MANIFEST = pa.schema(
    [("evaluation_id", pa.string()), ("table", pa.string()), ("row_group", pa.int64()), ("mtime_ns", pa.int64())]
)


def enabled() -> bool:
    """`ARENA_PACKS=0` makes readers ignore the packs (every row from its part: a benchmark's
    baseline, or an operator ruling the packs out)."""
    return settings.flag("ARENA_PACKS")


def packs_dir(home: str | os.PathLike) -> Path:
    return Path(home) / "packs"


def _live_packs(home) -> list[Path]:
    """Packs readers may use, newest first (a pack's name starts with its creation time)."""
    root = packs_dir(home)
    try:
        names = [e for e in os.scandir(root) if e.is_dir() and e.name.startswith("pack-")]
    except FileNotFoundError:
        return []
    live = [
        Path(e.path)
        for e in names
        if not (Path(e.path) / "RETIRED").exists() and (Path(e.path) / "manifest.parquet").exists()
    ]
    return sorted(live, key=lambda p: p.name, reverse=True)


@dataclass
class Resolved:
    """Where each wanted evaluation's rows are: {pack: {evaluation_id: {table: row_group}}}, and
    the evaluations to read from their parts."""

    packed: dict[Path, dict[str, dict[str, int]]] = field(default_factory=dict)
    unpacked: list[str] = field(default_factory=list)

    @property
    def packed_ids(self) -> list[str]:
        return sorted(e for per in self.packed.values() for e in per)

    def without(self, ids) -> Resolved:
        """The same places less the evaluations `ids` (those the scorer need not read again)."""
        drop = set(ids)
        packed = {pack: {e: g for e, g in per.items() if e not in drop} for pack, per in self.packed.items()}
        return Resolved({pack: per for pack, per in packed.items() if per}, [e for e in self.unpacked if e not in drop])


def resolve(home: str | os.PathLike, ids: list[str], *, honour_env: bool = True) -> Resolved:
    """Which of `ids` a live pack holds as their partitions are now (checked per table).
    `honour_env=False`: whatever ARENA_PACKS says (the packer must know what is packed)."""
    home = Path(home)
    out = Resolved()
    todo = set(ids)
    for pack in _live_packs(home) if enabled() or not honour_env else []:
        if not todo:
            break
        try:
            m = pq.read_table(pack / "manifest.parquet").cast(MANIFEST)
        except (OSError, pa.ArrowInvalid, ValueError):
            continue  # unreadable or of another layout: as if it were not there
        m = m.filter(pc.is_in(m["evaluation_id"], pa.array(sorted(todo), pa.string())))
        if not m.num_rows:
            continue
        eids = m["evaluation_id"].to_pylist()
        tables = m["table"].to_pylist()
        groups = m["row_group"].to_pylist()
        stamped = m["mtime_ns"].to_pylist()
        here: dict[str, dict[str, int]] = {}
        bad = set()
        for eid, table, rg, mt in zip(eids, tables, groups, stamped):
            if eid in bad:
                continue
            if parts.partition_mtime(home, table, eid) != mt:
                bad.add(eid)
                continue
            here.setdefault(eid, {})[table] = rg
        here = {e: per for e, per in here.items() if e not in bad and len(per) == len(PACKED_TABLES)}
        if here:
            out.packed[pack] = here
            todo -= set(here)
    out.unpacked = sorted(todo)
    return out


def read_rows(
    home: str | os.PathLike,
    table: str,
    ids: list[str] | None,
    columns: list[str] | None = None,
    resolved: Resolved | None = None,
) -> pa.Table:
    """Every raw row of `table` for the evaluations `ids` (None: all), as the raw parts hold them
    now: from packs where they are current, from the parts otherwise. Rows are grouped by
    evaluation; their order within an evaluation is the parts' order."""
    home, schema = Path(home), TABLES[table]
    columns = list(columns or schema.names)
    if ids is None:
        ids = sorted(catalog.partition_mtimes(home / "raw" / table))
    if resolved is None:
        resolved = resolve(home, ids) if table in PACKED_TABLES else Resolved(unpacked=sorted(set(ids)))
    pieces = [read_packed(pack, table, per, columns) for pack, per in resolved.packed.items()]
    pieces.append(parts.read_parts(home, table, resolved.unpacked, columns))
    return pa.concat_tables([p for p in pieces if p.num_rows] or [pieces[-1]])


def read_packed(pack: Path, table: str, per: dict[str, dict[str, int]], columns: list[str]) -> pa.Table:
    """The rows of these evaluations from one pack: only the row groups that hold them."""
    schema = TABLES[table]
    groups = sorted({g[table] for g in per.values() if g.get(table, -1) >= 0})
    if not groups:
        return pa.schema([schema.field(c) for c in columns]).empty_table()
    pf = pq.ParquetFile(pack / f"{table}.parquet")
    t = pf.read_row_groups(groups, columns=[c for c in columns if c in pf.schema_arrow.names], use_threads=True)
    wanted = pc.is_in(t["evaluation_id"], pa.array(sorted(per), pa.string()))
    if not pc.all(wanted).as_py():  # row groups of only wanted evaluations (the usual case) are not copied
        t = t.filter(wanted)
    return parts.conform(t, schema, columns)


def duck_select(con, home: str | os.PathLike, table: str, resolved: Resolved) -> str:
    """A SELECT (for a view on `con`) of every column of `table` for the resolved evaluations:
    their row groups of the packs plus the unpacked evaluations' parts. Binding it reads one
    footer per pack and one per unpacked part, not one per part of every evaluation."""
    from speculator_arena.warehouse.store import column_list, empty_select, quote, warehouse_sql

    schema = TABLES[table]
    cols = column_list(schema)
    empty = empty_select(schema)
    selects = []
    for k, (pack, per) in enumerate(sorted(resolved.packed.items())):
        name = f"_pack_ids_{table}_{k}"
        con.register(name, pa.table({"evaluation_id": pa.array(sorted(per), pa.string())}))
        selects.append(
            warehouse_sql("packed_rows.sql", columns=cols, empty=empty, path=quote(pack / f"{table}.parquet"), ids=name)
        )
    from_parts = parts_select(home, table, resolved.unpacked)
    if from_parts is not None:
        selects.append(from_parts)
    if not selects:
        return empty
    return " UNION ALL ".join(selects)


def parts_select(home: str | os.PathLike, table: str, ids: list[str]) -> str | None:
    """A SELECT of every column of `table` from the parts of the evaluations `ids`, one file
    list DuckDB reads in its own threads, evaluation by evaluation in `ids` order (None: they
    have no part). What `duck_select` reads for the unpacked evaluations, and how the scorer
    reads their small tables."""
    from speculator_arena.warehouse.store import column_list, empty_select, quote, warehouse_sql

    files = [f for eid in ids for f in parts.part_files(home, table, eid)]
    if not files:
        return None
    schema = TABLES[table]
    listed = "[" + ", ".join(quote(f) for f in files) + "]"
    return warehouse_sql("raw_parts.sql", columns=column_list(schema), empty=empty_select(schema), paths=listed)


# ---- writing --------------------------------------------------------------------------------


@dataclass
class PackReport:
    packed: int  # evaluations written into the new pack
    pack: str | None  # its directory, when one was written
    rewritten: bool  # all live packs were rewritten as one
    retired: int  # packs marked retired now
    removed: int  # retired packs removed (older than RETIRED_GRACE_S)
    skipped_recent: int  # finished evaluations written too recently to trust their mtimes
    seconds: float


def _quiet(now_ns: int, mtimes: dict[str, int]) -> bool:
    stamped = np.array(list(mtimes.values()), dtype=np.int64)
    stamped = stamped[stamped >= 0]
    seen = np.full(len(stamped), now_ns, dtype=np.int64)
    return bool(catalog.trusted_mask(stamped, stamped, seen).all())


def _order(index: pa.Table, ids: list[str]) -> list[str]:
    """Each account's latest evaluations first (what the board reads together), then the rest;
    oldest first within each."""
    df = (
        index.select(
            ["evaluation_id", "task_id", "account_id", "split", "is_reference", "label", "status", "created_at"]
            + ["updated_at"]
        )
        .to_pandas()
        .pipe(current_frame)
    )
    hot = set(catalog.latest_finished(df))  # over the whole warehouse, not only what this pack holds
    df = df[df["evaluation_id"].isin(set(ids))]
    df["cold"] = ~df["evaluation_id"].isin(hot)
    return df.sort_values(["cold", "created_at", "evaluation_id"], na_position="last")["evaluation_id"].tolist()


def pack(
    home: str | os.PathLike,
    *,
    full: bool = False,
    group_size: int = GROUP_SIZE,
    max_packs: int = MAX_PACKS,
    progress=None,
) -> PackReport:
    """Pack the finished evaluations no live pack holds as they are now.

    With `full`, or when that would leave more than `max_packs` live packs, every finished
    evaluation goes into one new pack and the others are retired (left for `RETIRED_GRACE_S`
    so readers that resolved them just before can finish, then removed by a later `pack()`).
    `progress(done, total)` is called as evaluations are read.
    """
    t0 = time.monotonic()
    home = Path(home)
    root = packs_dir(home)
    removed = _remove_retired(root)
    index = catalog.evaluations_table(home)
    status = dict(zip(index["evaluation_id"].to_pylist(), index["status"].to_pylist()))
    finished = sorted(e for e, s in status.items() if s in FINAL)
    live = _live_packs(home)
    covered = set(resolve(home, finished, honour_env=False).packed_ids) if live and not full else set()
    rewrite = full or (len(live) >= max_packs and len(set(finished) - covered) > 0)
    todo = finished if rewrite else [e for e in finished if e not in covered]
    now = time.time_ns()
    stamps, skipped = {}, 0
    for eid in todo:
        m = {t: parts.partition_mtime(home, t, eid) for t in PACKED_TABLES}
        if _quiet(now, m):
            stamps[eid] = m
        else:
            skipped += 1
    if not stamps:
        return PackReport(0, None, False, 0, removed, skipped, time.monotonic() - t0)
    order = _order(index, list(stamps))
    path = _write_pack(home, order, stamps, group_size, progress)
    retired = 0
    if rewrite:
        for old in live:
            (old / "RETIRED").write_text(str(time.time()), encoding="utf-8")
            retired += 1
    generation.bump(home)  # the rows read the same, but readers that cache what they read re-check
    return PackReport(len(order), str(path), rewrite, retired, removed, skipped, time.monotonic() - t0)


def _write_pack(home: Path, order: list[str], stamps: dict[str, dict[str, int]], group_size: int, progress) -> Path:
    """Write the pack in a temporary directory and rename it into place (readers see all or none)."""
    root = packs_dir(home)
    root.mkdir(parents=True, exist_ok=True)
    name = f"pack-{time.time_ns():020d}-{uuid.uuid4().hex[:8]}"
    dest = root / name
    with atomic_path(dest) as tmp:
        tmp.mkdir()
        groups = [order[i : i + group_size] for i in range(0, len(order), group_size)]
        writers = {t: pq.ParquetWriter(tmp / f"{t}.parquet", TABLES[t]) for t in PACKED_TABLES}
        next_rg = dict.fromkeys(PACKED_TABLES, 0)
        manifest = {c: [] for c in MANIFEST.names}
        done = 0
        for g in groups:
            for table in PACKED_TABLES:
                rows = parts.read_parts(home, table, g)
                rg = -1
                if rows.num_rows:
                    writers[table].write_table(rows, row_group_size=max(rows.num_rows, 1))
                    rg = next_rg[table]
                    next_rg[table] += 1
                present = set(rows["evaluation_id"].to_pylist()) if rows.num_rows else set()
                for eid in g:
                    manifest["evaluation_id"].append(eid)
                    manifest["table"].append(table)
                    manifest["row_group"].append(rg if eid in present else -1)
                    manifest["mtime_ns"].append(stamps[eid][table])
            done += len(g)
            if progress is not None:
                progress(done, len(order))
        for w in writers.values():
            w.close()
        pq.write_table(pa.table(manifest, schema=MANIFEST), tmp / "manifest.parquet")
    return dest


def _remove_retired(root: Path) -> int:
    n = 0
    try:
        entries = list(os.scandir(root))
    except FileNotFoundError:
        return 0
    for e in entries:
        marker = Path(e.path) / "RETIRED"
        if e.name.startswith(".tmp-") and time.time() - e.stat().st_mtime > RETIRED_GRACE_S:
            shutil.rmtree(e.path, ignore_errors=True)  # left by a packer that was killed
            n += 1
            continue
        try:
            since = float(marker.read_text(encoding="utf-8"))
        except (FileNotFoundError, ValueError, NotADirectoryError):
            continue
        if time.time() - since > RETIRED_GRACE_S:
            shutil.rmtree(e.path, ignore_errors=True)
            n += 1
    return n
