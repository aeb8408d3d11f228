"""How a full disk is recognised (speculator_arena/diskspace.py), on the exceptions the libraries
really raise for it: the kernel's ENOSPC through the atomic write (a real write to a full file:
/dev/full), the warehouse's error around it, sqlite3's SQLITE_FULL as SQLAlchemy wraps it under
Dagster's storage, DuckDB's I/O error; what is not a full disk stays unrecognised. The end-to-end
checks (a filesystem filled mid-evaluation) are tests/runners/test_disk_full.py."""

from __future__ import annotations

import errno
import io
import os
import sqlite3
from pathlib import Path

import pytest

from speculator_arena.atomic import atomic_path, write_atomic
from speculator_arena.diskspace import DiskFull, full_disk, full_disk_text, space_left
from speculator_arena.warehouse.store import Warehouse, WarehouseError


def test_the_atomic_write_names_the_file_a_full_disk_refused(tmp_path):
    dest = tmp_path / "state.json"
    write_atomic(dest, "old")
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this machine")
    with pytest.raises(DiskFull) as got:
        with atomic_path(dest) as tmp:
            with open("/dev/full", "wb") as full:  # the kernel's own ENOSPC, on a real write
                full.write(b"x" * 65536)
                full.flush()
            tmp.write_text("new")
    e = got.value
    assert e.errno == errno.ENOSPC and isinstance(e, OSError) and e.path == str(dest)
    assert str(e) == f"disk full: could not write {dest} ({space_left(dest)})" and " free of " in str(e)
    assert dest.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["state.json"]
    assert full_disk(WarehouseError("could not write requests rows").with_traceback(None)) is None
    try:
        try:
            raise e
        except OSError as inner:
            raise WarehouseError("could not write requests rows of x (disk full)") from inner
    except WarehouseError as outer:
        assert full_disk(outer) is e  # the named one, found through the chain


def test_full_disk_errors_of_every_library_are_recognised(tmp_path):
    from sqlalchemy.exc import OperationalError

    home = tmp_path / "home"
    home.mkdir()
    kernel = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(home / "raw" / "x.parquet"))
    assert full_disk(kernel, home).path == str(home / "raw" / "x.parquet")
    sqlite_full = sqlite3.OperationalError("database or disk is full")
    wrapped = OperationalError("INSERT INTO event_logs ...", {}, sqlite_full)
    got = full_disk(wrapped, home)
    assert got is not None and got.path == str(home) and str(got).startswith(f"disk full: could not write {home} (")
    assert full_disk(ExceptionGroup("two", [ValueError("x"), kernel]), home) is not None
    assert full_disk(RuntimeError("IO Error: Could not write file: No space left on device"), home) is not None
    # sqlite's "disk I/O error" is a full disk only where the filesystem is full; not here
    assert full_disk(OperationalError("INSERT", {}, sqlite3.OperationalError("disk I/O error")), home) is None
    assert full_disk(OSError(errno.EACCES, "Permission denied", "/x"), home) is None
    assert full_disk(ValueError("bad input"), home) is None


def test_a_warehouse_write_on_a_full_disk_loses_nothing(tmp_path, monkeypatch):
    """ENOSPC at the last step of the atomic write (os.replace): the previous part stays, no
    temporary is left, and the error names the part."""
    wh = Warehouse(tmp_path / "home")
    wh.write_rows("evaluations", "e1", [{"evaluation_id": "e1", "status": "queued"}], part="evaluation", replace=True)
    real = os.replace

    def full(src, dst):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(WarehouseError) as got:
        wh.write_rows("evaluations", "e1", [{"evaluation_id": "e1", "status": "void"}], part="evaluation", replace=True)
    monkeypatch.setattr(os, "replace", real)
    found = full_disk(got.value, wh.home)
    assert found is not None and Path(found.path).name == "evaluation.parquet"
    assert wh.read_table("evaluations", "e1").to_pylist()[0]["status"] == "queued"
    assert not [p for p in (wh.raw / "evaluations").rglob(".tmp-*")]


def test_dagsters_report_of_a_failed_storage_write_is_left_to_the_one_line():
    from speculator_arena.dagster_project.launch import _WithoutStorageReports

    out = io.StringIO()
    err = _WithoutStorageReports(out)
    err.write(
        "Exception while writing logger call to event log: (sqlite3.OperationalError) disk I/O error\n[SQL: ...]\n"
    )
    err.write("[evaluate x] candidate solo-0: 10/10 requests counted\n")
    err.write("Exception while writing logger call to event log: something else entirely\n")
    assert out.getvalue() == (
        "[evaluate x] candidate solo-0: 10/10 requests counted\n"
        "Exception while writing logger call to event log: something else entirely\n"
    )
    assert full_disk_text("database or disk is full") and not full_disk_text("permission denied")
