"""The evaluations catalog (`warehouse/catalog.py`) the board lists evaluations through: a
snapshot that saves opening one Parquet part per evaluation, and is never trusted over the
raw parts (a stale, racy, missing or broken snapshot gives the raw rows, never its own)."""

from __future__ import annotations

import os
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from speculator_arena.board import data
from speculator_arena.warehouse import Warehouse, catalog

ROW = {
    "task_id": "local-smollm2",
    "split": "dev",
    "protocol_version": 1,
    "account_id": "acct-a",
    "is_reference": False,
    "solution_kind": "other",
    "status": "running",
    "created_at": 1.8e9,
    "updated_at": 1.8e9,
}


def _write(wh: Warehouse, eid: str, **kw) -> None:
    wh.write_rows("evaluations", eid, [dict(ROW, submission_id=eid, label=eid, **kw)], part="evaluation")


def _rows(table: pa.Table) -> dict[str, str]:
    return dict(zip(table.column("evaluation_id").to_pylist(), table.column("status").to_pylist()))


def _age(home, evaluation_id: str, seconds: float = 30.0) -> None:
    """Make a partition look quiet: its directory's mtime `seconds` in the past."""
    d = Warehouse(home).partition_dir("evaluations", evaluation_id)
    t = time.time() - seconds
    os.utime(d, (t, t))


def test_writers_keep_the_snapshot_and_readers_match_the_raw_parts(tmp_path):
    home = tmp_path / "home"
    wh = Warehouse(home)
    for i in range(3):
        _write(wh, f"ev-{i}", status="measured")
    assert catalog.snapshot_path(home).exists()
    snap = catalog.load_snapshot(home)
    assert sorted(snap.column("evaluation_id").to_pylist()) == ["ev-0", "ev-1", "ev-2"]
    got, _ = catalog.read_evaluations(home)
    assert _rows(got) == _rows(wh.read_table("evaluations")) == {f"ev-{i}": "measured" for i in range(3)}
    # the board's index is the same rows
    assert sorted(data.evaluations_index(home)["evaluation_id"]) == ["ev-0", "ev-1", "ev-2"]


def test_a_stale_snapshot_is_never_believed(tmp_path, monkeypatch):
    home = tmp_path / "home"
    wh = Warehouse(home)
    for i in range(3):
        _write(wh, f"ev-{i}", status="running")
        _age(home, f"ev-{i}")
    catalog.refresh(home)
    got, stats = catalog.read_evaluations(home)
    assert stats == {"new": 0, "changed": 0, "racy": 0}  # all three from the snapshot alone

    monkeypatch.setenv("ARENA_CATALOG", "0")  # writers that do not update it (or crashed before)
    _write(wh, "ev-0", status="measured")  # rewritten status row
    _write(wh, "ev-3", status="queued")  # a new evaluation
    wh.drop_evaluation("ev-2")  # an operator dropped one
    got, stats = catalog.read_evaluations(home)
    assert (
        _rows(got) == {"ev-0": "measured", "ev-1": "running", "ev-3": "queued"} == _rows(wh.read_table("evaluations"))
    )
    assert stats["new"] == 1 and stats["changed"] + stats["racy"] == 1


def test_the_snapshot_is_used_only_when_its_directory_was_quiet(tmp_path):
    """Plant a snapshot row that differs from the part (status 'planted') with the partition's real
    mtime: believed when the mtime was observed long after it was set, re-read when observed too
    soon (a later write within the clock's tick could have left the same mtime)."""
    home = tmp_path / "home"
    wh = Warehouse(home)
    _write(wh, "ev-0", status="measured")
    _age(home, "ev-0")
    mtime = wh.partition_dir("evaluations", "ev-0").stat().st_mtime_ns
    snap = catalog.load_snapshot(home)
    planted = snap.set_column(snap.schema.get_field_index("status"), "status", pa.array(["planted"]))

    def with_seen(seen_ns: int) -> pa.Table:
        return planted.set_column(
            planted.schema.get_field_index("_mtime_ns"), "_mtime_ns", pa.array([mtime], pa.int64())
        ).set_column(planted.schema.get_field_index("_seen_ns"), "_seen_ns", pa.array([seen_ns], pa.int64()))

    quiet, stats = catalog.read_evaluations(home, base=with_seen(mtime + 10 * catalog.RACY_NS))
    assert _rows(quiet) == {"ev-0": "planted"} and stats["racy"] == 0  # the snapshot is what was read
    racy, stats = catalog.read_evaluations(home, base=with_seen(mtime + 1))
    assert _rows(racy) == {"ev-0": "measured"} and stats["racy"] == 1


def test_reading_writes_nothing_and_a_broken_snapshot_falls_back(tmp_path):
    home = tmp_path / "home"
    wh = Warehouse(home)
    _write(wh, "ev-0", status="measured")
    catalog.snapshot_path(home).write_bytes(b"not parquet")
    before = {p: p.stat().st_mtime_ns for p in home.rglob("*")}
    got, stats = catalog.read_evaluations(home)
    assert _rows(got) == {"ev-0": "measured"} and stats["new"] == 1
    data.evaluations_index(home)
    assert {p: p.stat().st_mtime_ns for p in home.rglob("*")} == before
    # the next write replaces the broken snapshot with a whole one
    _write(wh, "ev-1", status="queued")
    assert _rows(pq.read_table(catalog.snapshot_path(home))) == {"ev-0": "measured", "ev-1": "queued"}


def test_a_snapshot_of_another_schema_is_ignored(tmp_path):
    home = tmp_path / "home"
    _write(Warehouse(home), "ev-0", status="measured")
    pq.write_table(pa.table({"evaluation_id": ["ev-x"], "status": ["planted"]}), catalog.snapshot_path(home))
    assert catalog.load_snapshot(home).num_rows == 0
    assert _rows(catalog.evaluations_table(home)) == {"ev-0": "measured"}


@pytest.mark.parametrize("coarse", [False, True])
def test_racy_window_follows_the_filesystems_resolution(coarse):
    import numpy as np

    stamped = np.array([5_000_000_000 if coarse else 5_000_000_123], dtype=np.int64)
    gap = (catalog.RACY_NS if coarse else catalog.RACY_FINE_NS) + 1
    assert catalog.trusted_mask(stamped, stamped, stamped + gap).tolist() == [True]
    assert catalog.trusted_mask(stamped, stamped, stamped + gap - 2).tolist() == [False]
    assert catalog.trusted_mask(stamped + 1, stamped, stamped + gap).tolist() == [False]  # changed since
