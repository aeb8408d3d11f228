"""The results path: raw Parquet parts from the pod, back whole into the warehouse, or nothing.

In the pod, the runner's warehouse (`Warehouse(results_dir)`, the store's own atomic writer)
writes every raw part under `<results>/raw/<table>/evaluation_id=<id>/`; when the run ends,
`write_results_manifest` lists every part (path, bytes, sha256, rows) in `results-manifest.json`,
written last and atomically. Why a manifest and a volume, not the pod's logs: logs rotate at
about 10 MiB on a real kubelet, and a part cut short must be told from a whole one.

On the launcher, `land` verifies the whole directory against the manifest (every listed part
present with its size, digest and row count, readable under its table's schema; no file the
manifest does not list) and only then lands it:

1. copy every part into `<home>/landing/<id>/<table>/` (same filesystem as raw/), fsync, hash
   the copies again;
2. write `LANDING.json` (the parts and the evaluation's final row): the commit point;
3. rename each staged table directory to its partition `raw/<table>/evaluation_id=<id>` (one
   atomic rename per table), then write the evaluation's final status row, then remove staging.

A crash before (2) leaves no rows (`recover` drops the staging); a crash after (2) is finished
by `recover` (every rename again, then the status row), so a warehouse ends with all of an
evaluation's rows or none of them. Readers see a kubernetes evaluation as `running` until its
final row is written, which is the last step.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from speculator_arena.atomic import fsync_dir, write_json_atomic
from speculator_arena.checkpoints.seal import sha256_file
from speculator_arena.errors import ArenaError
from speculator_arena.rules.status import FINAL
from speculator_arena.warehouse import generation
from speculator_arena.warehouse.parts import PREFIX, conform, part_files
from speculator_arena.warehouse.schema import TABLES
from speculator_arena.warehouse.store import Warehouse

MANIFEST = "results-manifest.json"
JOURNAL = "LANDING.json"
FORMAT = 1
STATUS_TABLE = "evaluations"


class ResultsRejected(ArenaError):
    """The results directory is not whole; nothing was landed. `reason` says why."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Part:
    table: str
    path: str  # relative to the results directory
    bytes: int
    sha256: str
    rows: int


# ---- in the pod ------------------------------------------------------------------------------
def write_results_manifest(results_dir: str | os.PathLike, evaluation_id: str) -> dict:
    """List every raw part of the evaluation under `results_dir` in the manifest (written last)."""
    root = Path(results_dir)
    parts = []
    for table in TABLES:
        for f in part_files(root, table, evaluation_id):
            parts.append(
                Part(
                    table,
                    f.relative_to(root).as_posix(),
                    f.stat().st_size,
                    sha256_file(f),
                    pq.ParquetFile(f).metadata.num_rows,
                ).__dict__
            )
    manifest = {"format": FORMAT, "evaluation_id": evaluation_id, "written_at": time.time(), "parts": parts}
    write_json_atomic(root / MANIFEST, manifest, indent=1, sort_keys=True)
    return manifest


# ---- on the launcher: verification -----------------------------------------------------------
def _read_manifest(root: Path, evaluation_id: str) -> dict:
    path = root / MANIFEST
    if not path.is_file():
        raise ResultsRejected(f"no {MANIFEST} in the results (the runner did not finish writing them)")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ResultsRejected(f"unreadable {MANIFEST}: {exc}") from None
    if (
        not isinstance(manifest, dict)
        or manifest.get("format") != FORMAT
        or not isinstance(manifest.get("parts"), list)
    ):
        raise ResultsRejected(f"{MANIFEST} is not a format-{FORMAT} results manifest")
    if manifest.get("evaluation_id") != evaluation_id:
        raise ResultsRejected(f"{MANIFEST} is for {manifest.get('evaluation_id')!r}, not {evaluation_id!r}")
    return manifest


def _part(entry, evaluation_id: str) -> Part:
    try:
        p = Part(**entry)
    except TypeError:
        raise ResultsRejected(f"malformed manifest entry: {entry!r}") from None
    want = re.fullmatch(rf"raw/([a-z_]+)/{re.escape(PREFIX + evaluation_id)}/[A-Za-z0-9_-]+\.parquet", p.path)
    if not want or want.group(1) != p.table or p.table not in TABLES:
        raise ResultsRejected(f"manifest entry {p.path!r} is not a part of {evaluation_id} of a known table")
    return p


def verify_results(results_dir: str | os.PathLike, evaluation_id: str) -> tuple[list[Part], dict]:
    """The verified parts and the evaluation's final row from the pod, or ResultsRejected."""
    root = Path(results_dir)
    manifest = _read_manifest(root, evaluation_id)
    parts = [_part(e, evaluation_id) for e in manifest["parts"]]
    listed = {p.path for p in parts}
    if len(listed) != len(parts):
        raise ResultsRejected("the manifest lists a part twice")
    found = (
        {f.relative_to(root).as_posix() for f in (root / "raw").rglob("*") if not f.is_dir()}
        if (root / "raw").is_dir()
        else set()
    )
    if found - listed:
        raise ResultsRejected(f"files the manifest does not list: {sorted(found - listed)[:5]}")
    for p in parts:
        f = root / p.path
        if p.path not in found:
            raise ResultsRejected(f"missing part {p.path}")
        if f.stat().st_size != p.bytes:
            raise ResultsRejected(f"part {p.path} has {f.stat().st_size} bytes, the manifest says {p.bytes}")
        if sha256_file(f) != p.sha256:
            raise ResultsRejected(f"part {p.path} does not match its sha256 in the manifest")
        _check_parquet(f, p)
    status_parts = [p for p in parts if p.table == STATUS_TABLE]
    if len(status_parts) != 1:
        raise ResultsRejected(f"the results hold {len(status_parts)} evaluation rows parts, not one")
    rows = pq.read_table(root / status_parts[0].path).to_pylist()
    if len(rows) != 1 or rows[0].get("status") not in FINAL:
        raise ResultsRejected("the results' evaluation row is not one final status (measured, failed or void)")
    return parts, rows[0]


def _check_parquet(f: Path, p: Part) -> None:
    schema = TABLES[p.table]
    try:
        t = pq.read_table(f)
        conform(t, schema, [n for n in schema.names if n != "evaluation_id"])
    except (pa.ArrowException, OSError, ValueError, KeyError) as exc:
        raise ResultsRejected(f"part {p.path} is not a readable {p.table} part: {exc}") from None
    if t.num_rows != p.rows:
        raise ResultsRejected(f"part {p.path} holds {t.num_rows} rows, the manifest says {p.rows}")
    unknown = set(t.column_names) - set(schema.names)
    if unknown:
        raise ResultsRejected(f"part {p.path} has columns {sorted(unknown)} its table does not")


# ---- on the launcher: landing ----------------------------------------------------------------
def staging_dir(wh: Warehouse, evaluation_id: str) -> Path:
    wh.partition_dir(STATUS_TABLE, evaluation_id)  # a safe id
    return wh.home / "landing" / evaluation_id


def land(
    wh: Warehouse,
    results_dir: str | os.PathLike,
    evaluation_id: str,
    *,
    launcher_row: dict,
    provenance: dict | None = None,
    on_step=None,
) -> dict:
    """Verify the results and land them whole; returns the evaluation's final row.

    `launcher_row`: the evaluation's current row in the warehouse (queued by the launcher); its
    final row takes the pod's status and reasons, and the pod's provenance under `pod_runner`.
    `on_step(name)` is called after each step (tests use it to crash the landing part-way).
    Raises ResultsRejected (nothing landed) when the results are not whole.
    """
    step = on_step or (lambda name: None)
    recover(wh, evaluation_id)
    try:
        parts, pod_row = verify_results(results_dir, evaluation_id)
    except OSError as exc:  # e.g. a part the launcher may not read
        raise ResultsRejected(f"results unreadable: {exc}") from None
    tables = sorted({p.table for p in parts} - {STATUS_TABLE})
    occupied = [t for t in tables if part_files(wh.home, t, evaluation_id)]
    if occupied:
        raise ResultsRejected(f"the warehouse already holds {evaluation_id} rows in {occupied}: refusing to mix")
    stage = staging_dir(wh, evaluation_id)
    shutil.rmtree(stage, ignore_errors=True)
    for p in parts:
        if p.table == STATUS_TABLE:
            continue
        dest = stage / p.table / Path(p.path).name
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(Path(results_dir) / p.path, dest)
        with open(dest, "rb") as fh:
            os.fsync(fh.fileno())
        if sha256_file(dest) != p.sha256:
            shutil.rmtree(stage, ignore_errors=True)
            raise ResultsRejected(f"the copy of {p.path} does not match its sha256 (the landing disk?)")
        step(f"staged {p.path}")
    for t in tables:
        fsync_dir(stage / t)
    prov = json.loads(launcher_row.get("provenance") or "{}")
    prov.update(
        provenance or {},
        pod_runner=json.loads(pod_row.get("provenance") or "{}"),
        landed={"parts": len(parts) - 1, "rows": {t: sum(p.rows for p in parts if p.table == t) for t in tables}},
    )
    final = dict(
        launcher_row,
        status=pod_row["status"],
        void_reason=pod_row.get("void_reason"),
        failure_reason=pod_row.get("failure_reason"),
        provenance=json.dumps(prov, sort_keys=True, default=str),
    )
    write_json_atomic(
        stage / JOURNAL,
        {"evaluation_id": evaluation_id, "tables": tables, "final_row": final},
        indent=1,
        sort_keys=True,
    )
    step("committed")
    return _apply(wh, evaluation_id, step)


def _apply(wh: Warehouse, evaluation_id: str, step) -> dict:
    """Move every staged table into place, then write the final row, then drop the staging."""
    from speculator_arena.runners.status import write_status

    stage = staging_dir(wh, evaluation_id)
    journal = json.loads((stage / JOURNAL).read_text(encoding="utf-8"))
    for t in journal["tables"]:
        src = stage / t
        if not src.exists():
            continue  # moved before a crash
        dest = wh.partition_dir(t, evaluation_id)
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.rename(src, dest)
        fsync_dir(dest.parent)
        generation.bump(wh.home)  # readers re-check (warehouse/generation.py); write_status bumps again
        step(f"landed {t}")
    final = journal["final_row"]
    row = write_status(
        wh, final, final["status"], void_reason=final.get("void_reason"), failure_reason=final.get("failure_reason")
    )
    step("status written")
    shutil.rmtree(stage)
    return row


def recover(wh: Warehouse, evaluation_id: str) -> str | None:
    """Finish or drop a landing a crash interrupted: 'finished', 'dropped', or None (none there)."""
    stage = staging_dir(wh, evaluation_id)
    if not stage.exists():
        return None
    if (stage / JOURNAL).is_file():
        _apply(wh, evaluation_id, lambda name: None)
        return "finished"
    shutil.rmtree(stage)
    return "dropped"
