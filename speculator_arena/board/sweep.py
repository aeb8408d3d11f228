"""A sweep's curve (`arena sweep`, the Sweep page): per value of the swept setting, what its stored
evaluation scored and showed, read like every other board figure.

Why from the stored evaluations and not from what the sweep's run returned: each point is an
ordinary evaluation, so its numbers are the scorer's over its raw rows under the version read
(through `BoardMemo.scores`, which re-scores only what changed), with the board's interval
(scoring/intervals.py, widened by the task's calibrated A/A error), and they change with the
rest when a version is published. The manifest (runners/sweep_plan.py) only says which
evaluations are the sweep's.

Per value: SpecScore and its interval; r_solo, r_team, r_busy (the median of each workload's
pass ratios; the scorer gives no interval per workload, so the smallest and largest pass ratio
are shown beside it); the candidate's mean acceptance length and acceptance by draft position
(acceptance.by_position, pooled over the workloads) from its engine's counters; its peak device
memory (blank with the reason where nothing sampled it: on CPU there is no NVML); the status.
A point whose evaluations are all void or failed shows the last attempt. Sweeps are dev only:
an evaluation of another split in a manifest is refused (ExportRefused), as the export does.
"""

from __future__ import annotations

import io
import math
import os

import numpy as np
import pandas as pd

from speculator_arena.board.acceptance import by_position
from speculator_arena.board.data import board_sql, scoped_connection
from speculator_arena.board.export import ExportRefused
from speculator_arena.board.memo import BoardMemo
from speculator_arena.board.shown import ALL, read_shown
from speculator_arena.protocol.model import WORKLOADS
from speculator_arena.rules.status import MEASURED, RANKED
from speculator_arena.runners.sweep_plan import read_manifest
from speculator_arena.scoring.intervals import max_abs_error, specscore_intervals

COLUMNS = [
    "value",
    "evaluation_id",
    "attempts",
    "status",
    "why",
    "specscore",
    "interval_low",
    "interval_high",
    *[f"{p}{w}{s}" for w in WORKLOADS for p, s in (("r_", ""), ("r_", "_pass_min"), ("r_", "_pass_max"))],
    "mean_acceptance_length",
    "mean_acceptance_length_reason",
    "acceptance_by_position",
    "acceptance_reason",
    "memory_peak_bytes",
    "memory_peak_reason",
]


def point_ids(manifest: dict) -> dict[str, list[str]]:
    """value -> the evaluation ids attempted for it, in order."""
    return {str(p["value"]): list(p.get("evaluation_ids") or []) for p in manifest.get("points", [])}


def measured(scores, ids: list[str]) -> list[str]:
    """Of `ids`, those measured and scored to a number or 0 (a gate failed), not void: a sweep
    run again keeps these points and makes the rest, a void or failed one included (the
    scorer's `void` covers a contended host judged from the rows)."""
    ev = scores.evaluations if scores is not None else pd.DataFrame()
    if ev.empty:
        return []
    ok = ev[(ev["status"] == str(MEASURED)) & ~ev["void"].astype(bool)]
    return [i for i in ids if i in set(ok["evaluation_id"])]


def _stored(memo: BoardMemo, manifest: dict) -> tuple[dict[str, list[str]], pd.DataFrame]:
    index = memo.index()
    known = set(index["evaluation_id"])
    points = {v: [i for i in ids if i in known] for v, ids in point_ids(manifest).items()}
    mine = index[index["evaluation_id"].isin([i for ids in points.values() for i in ids])]
    if not (mine["split"] == "dev").all():
        raise ExportRefused("a sweep's evaluations are dev evaluations only; this manifest names another split", 403)
    return points, index


def _chosen(ev: pd.DataFrame, ids: list[str]) -> str | None:
    """The point's evaluation: its last one measured and not void, else its last attempt."""
    if not ids:
        return None
    rows = ev.set_index("evaluation_id")
    good = [i for i in ids if i in rows.index and rows.loc[i, "status"] == MEASURED and not rows.loc[i, "void"]]
    good = good or [i for i in ids if i in rows.index and rows.loc[i, "status"] in RANKED and not rows.loc[i, "void"]]
    return (good or ids)[-1]


def _figure(figures: pd.DataFrame, eid: str, name: str) -> tuple[float, str | None]:
    f = figures[
        (figures["evaluation_id"] == eid)
        & (figures["engine"] == "candidate")
        & (figures["workload"] == ALL)
        & (figures["figure"] == name)
    ]
    if f.empty:
        return np.nan, "not scored yet"
    reason = f["reason"].iloc[0]
    return float(f["value"].iloc[0]), (None if pd.isna(reason) else str(reason))


def sweep_frames(home: str | os.PathLike | None, sweep_id: str, protocol_version: int | None = None, memo=None):
    """(manifest, points frame: one row per value in COLUMNS, positions frame: by_position's
    candidate rows pooled over the workloads, protocol version read)."""
    memo = memo or BoardMemo(home)
    manifest = read_manifest(memo.wh.home, sweep_id)
    points, index = _stored(memo, manifest)
    ids = sorted({i for v in points.values() for i in v})
    scores = memo.scores(ids, protocol_version) if ids else None
    version = scores.protocol_version if scores is not None else protocol_version
    ev = scores.evaluations if scores is not None else pd.DataFrame(columns=["evaluation_id", "status", "void"])
    if scores is not None and not ev.empty:
        e = max_abs_error(scores.protocol_version, manifest["task_id"])
        ev = pd.concat([ev, specscore_intervals(ev, scores.passes, e, scores.intervals)], axis=1)
    chosen = {v: _chosen(ev, points.get(v, [])) for v in manifest["values"]}
    shown_ids = tuple(sorted({c for c in chosen.values() if c}))
    positions = pd.DataFrame(columns=["evaluation_id", "position", "accepted", "drafts", "rate", "reason"])
    if shown_ids:
        rows = read_shown(memo.wh.home, shown_ids, version, index=index)
        pos = by_position(rows)
        positions = pos[(pos["engine"] == "candidate") & (pos["workload"] == ALL)].reset_index(drop=True)
    notes = _memory_notes(memo.wh.home, list(shown_ids))
    out = [_point(v, chosen[v], points.get(v, []), ev, scores, positions, notes) for v in manifest["values"]]
    return manifest, pd.DataFrame(out, columns=COLUMNS), positions, version


def _memory_notes(home, ids: list[str]) -> dict[str, str]:
    """evaluation_id -> the runner's note on why device memory was not sampled (none: sampled)."""
    if not ids:
        return {}
    with scoped_connection(home, ids) as con:
        df = con.execute(board_sql("sweep_memory_notes.sql"), [ids]).fetchdf()
    return dict(zip(df["evaluation_id"], df["memory_note"], strict=True))


def _point(value: str, eid: str | None, attempts: list[str], ev, scores, positions, notes: dict) -> dict:
    row = dict.fromkeys(COLUMNS)
    row.update(value=value, evaluation_id=eid, attempts=attempts, acceptance_by_position=[])
    if eid is None:
        row.update(status="not run", why="no evaluation of this value is stored yet")
        return row
    r = ev[ev["evaluation_id"] == eid]
    if r.empty:
        row.update(status="not scored", why="the scorer returned no row for it")
        return row
    r = r.iloc[0]
    why = [w for w in (r.get(k) for k in ("void_reason", "failure_reason")) if isinstance(w, str) and w]
    scorer = r.get("specscore_reason")
    if isinstance(scorer, str) and scorer and not any(w in scorer for w in why):
        why.append(scorer)  # the scorer's reason, unless it only repeats the runner's
    row.update(
        status=("void (scorer)" if r["status"] == MEASURED and bool(r["void"]) else str(r["status"])),
        why="; ".join(why) or None,
        specscore=r.get("specscore"),
        interval_low=r.get("interval_low"),
        interval_high=r.get("interval_high"),
    )
    p = scores.passes
    for w in WORKLOADS:
        ratios = p[(p["evaluation_id"] == eid) & (p["workload"] == w)]["ratio"].astype(float)
        row[f"r_{w}"] = r.get(f"r_{w}")
        row[f"r_{w}_pass_min"] = ratios.min() if len(ratios) else np.nan
        row[f"r_{w}_pass_max"] = ratios.max() if len(ratios) else np.nan
    row["mean_acceptance_length"], row["mean_acceptance_length_reason"] = _figure(
        scores.figures, eid, "mean_acceptance_length"
    )
    peak, why = _figure(scores.figures, eid, "memory_peak_bytes")
    if why and notes.get(eid):
        why = f"{why}: {notes[eid]}"  # the runner's note: why nothing sampled it
    row["memory_peak_bytes"], row["memory_peak_reason"] = peak, why
    mine = positions[positions["evaluation_id"] == eid].sort_values("position")
    if mine.empty:
        row["acceptance_reason"] = "not read"
    elif mine["reason"].notna().any():
        row["acceptance_reason"] = str(mine["reason"].dropna().iloc[0])
    else:
        row["acceptance_by_position"] = [float(x) for x in mine["rate"]]
    return row


def _plain(v):
    """A JSON value: NaN and pandas' missing values are null, numpy scalars Python's."""
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA:
        return None
    return v.item() if isinstance(v, np.generic) else v


def sweep_document(home, sweep_id: str, protocol_version: int | None = None, memo=None) -> dict:
    """What `arena sweep` prints and the JSON export holds: the manifest's fields, the version the
    points were scored under, and one object per value (COLUMNS)."""
    manifest, points, _, version = sweep_frames(home, sweep_id, protocol_version, memo)
    keep = ("sweep_id", "task_id", "engine", "setting", "values", "label", "created_at")
    return {
        **{k: manifest.get(k) for k in keep},
        "protocol_version": version,
        "points": [{k: _plain(v) for k, v in r.items()} for r in points.to_dict("records")],
    }


def sweep_parquet(doc: dict) -> bytes:
    """The points of `sweep_document` as Parquet, one row per value (acceptance by position a list
    column), with the sweep's id, task, setting and version on every row."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [
        {
            "sweep_id": doc["sweep_id"],
            "task_id": doc["task_id"],
            "setting": doc["setting"],
            "protocol_version": doc["protocol_version"],
            **p,
        }
        for p in doc["points"]
    ]
    table = pa.Table.from_pylist(rows, schema=_schema())
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


def _schema():
    import pyarrow as pa

    text = {"sweep_id", "task_id", "setting", "value", "evaluation_id", "status", "why"}
    text |= {c for c in COLUMNS if c.endswith("_reason")}
    fields = [pa.field(c, pa.string()) for c in ("sweep_id", "task_id", "setting")]
    fields.append(pa.field("protocol_version", pa.int64()))
    for c in COLUMNS:
        if c in text:
            fields.append(pa.field(c, pa.string()))
        elif c == "attempts":
            fields.append(pa.field(c, pa.list_(pa.string())))
        elif c == "acceptance_by_position":
            fields.append(pa.field(c, pa.list_(pa.float64())))
        else:
            fields.append(pa.field(c, pa.float64()))
    return pa.schema(fields)


def sweeps(home) -> list[dict]:
    """The manifests of the home's sweeps, newest first (the Sweep page's list)."""
    from speculator_arena.runners.sweep_plan import list_sweeps

    return list_sweeps(home)
