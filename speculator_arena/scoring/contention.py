"""SCORING.md "Host contention" over the stored rows: which evaluations had a contended timed pass,
judged pass by pass with the rule of rules/contention.py (`why_contended`). An evaluation with a
contended pass is void (the arena's side: the operator re-runs it). A timed
pass with no usable contention rows is void too when the version the evaluation ran under
recorded them (its runner should have); evaluations run before any version recorded them are
not judged (the reason says so on their page, through `pass_contention`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from speculator_arena.rules.contention import why_contended
from speculator_arena.scoring import frames


def pass_contention(contention: pd.DataFrame) -> pd.DataFrame:
    """Per timed pass and engine: the foreign CPU share of one core, the steal share and the
    foreign device processes (the rows of sql/contention_passes.sql plus the shares)."""
    c = contention.copy()
    c["foreign_cpu_share"] = c["foreign_cpu_seconds"] / c["seconds"].where(c["seconds"] > 0)
    c["steal_share"] = c["steal_seconds"] / c["total_cpu_seconds"].where(c["total_cpu_seconds"] > 0)
    return c


def _judged_passes(contention: pd.DataFrame, lim: pd.DataFrame) -> pd.DataFrame:
    c = pass_contention(contention).merge(lim, on="evaluation_id")
    c["why"] = [
        why_contended(f, s, g, mf, ms)
        for f, s, g, mf, ms in zip(
            c["foreign_cpu_share"].to_numpy(dtype=float),
            c["steal_share"].to_numpy(dtype=float),
            c["foreign_gpu_processes"].fillna(0).to_numpy(dtype=float),
            c["max_foreign_cpu_share"],
            c["max_steal_share"],
        )
    ]
    c["contended"] = c["why"].notna()
    return c


def pooled_per_workload(contention: pd.DataFrame, ids) -> pd.DataFrame:
    """The rows of the evaluations `ids` summed over each workload's passes of both engines (the
    interleaved pairing's `contention_per_workload`: docs/scoring.md "Pairing"), as rows of
    (evaluation, workload as pass_id, engine "both"); every other evaluation's rows as they are."""
    pooled = contention["evaluation_id"].isin(set(ids))
    if not pooled.any():
        return contention
    p = contention[pooled].assign(pass_id=contention.loc[pooled, "pass_id"].str.rsplit("-", n=1).str[0], engine="both")
    sums = ["intervals", "failed_reads", "seconds", "foreign_cpu_seconds", "steal_seconds", "total_cpu_seconds"]
    maxes = ["foreign_gpu_processes", "foreign_gpu_bytes"]
    p = p.groupby(["evaluation_id", "pass_id", "engine"], as_index=False).agg(
        {**dict.fromkeys(sums, "sum"), **dict.fromkeys(maxes, "max")}
    )
    return pd.concat([contention[~pooled], p], ignore_index=True)


def contention_void_reasons(
    ev: pd.DataFrame,
    contention: pd.DataFrame,
    timed_passes: pd.DataFrame,
    lim_e: pd.DataFrame,
    run_records: np.ndarray,
    per_workload: np.ndarray | None = None,
) -> np.ndarray:
    """Per evaluation row: why it is void for host contention (None where it is not).

    `contention`: sql/contention_passes.sql rows; `timed_passes`: (evaluation_id, pass_id, engine)
    of the stored timed passes; `lim_e`: each row's limits (NaN limits: the version scored under
    does not judge contention); `run_records`: per row, whether the version it ran under recorded
    contention rows; `per_workload`: per row, whether the version it ran under judges contention
    over each workload's passes pooled (the interleaved pairing) instead of pass by pass.
    """
    n = len(ev)
    out = frames.objects(n)
    judged = ~np.isnan(lim_e["max_foreign_cpu_share"].to_numpy(dtype=float))
    if not judged.any():
        return out
    ids = ev["evaluation_id"].to_numpy()
    lim = pd.DataFrame(
        {
            "evaluation_id": ids,
            "max_foreign_cpu_share": lim_e["max_foreign_cpu_share"].to_numpy(),
            "max_steal_share": lim_e["max_steal_share"].to_numpy(),
        }
    ).drop_duplicates("evaluation_id")
    texts: dict[str, list[str]] = {}
    if len(contention):
        judged_rows = contention[contention["intervals"] > 0]
        if per_workload is not None and per_workload.any():
            judged_rows = pooled_per_workload(judged_rows, ids[per_workload])
        c = _judged_passes(judged_rows, lim)
        for eid, pid, eng, why in c.loc[c["contended"], ["evaluation_id", "pass_id", "engine", "why"]].itertuples(
            index=False
        ):
            texts.setdefault(eid, []).append(f"{eng} {pid}: {why}")
    recorded = set()
    if len(contention):
        ok = contention[contention["intervals"] > 0]
        recorded = set(zip(ok["evaluation_id"], ok["pass_id"], ok["engine"]))
    missing: dict[str, list[str]] = {}
    for eid, pid, eng in timed_passes[["evaluation_id", "pass_id", "engine"]].itertuples(index=False):
        if (eid, pid, eng) not in recorded:
            missing.setdefault(eid, []).append(f"{eng} {pid}")
    for i in np.flatnonzero(judged):
        eid = ids[i]
        if eid in texts:
            out[i] = "host contended (" + "; ".join(texts[eid]) + ")"
        elif run_records[i] and eid in missing:
            out[i] = "host contention not recorded on " + ", ".join(missing[eid])
    return out
