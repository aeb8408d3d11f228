"""Goodput (shown, never scored): the share of an engine's timed requests that met the workload's
TTFT and TPOT objectives, as vLLM, GuideLLM and AIPerf report it.

A request is good when it counts (SCORING.md) and its TTFT (first chunk − sent) is at most the
objective's `ttft_seconds` and its TPOT ((last chunk − first chunk) / (output tokens − 1)) at most
`tpot_seconds`; a one-token reply has no TPOT and meets that objective. The share is over every
timed request of the engine, counted or not: a request that failed met nothing, so failing slow
requests cannot raise it. The objectives are protocol data (`goodput`, per workload, over a
task's own `tasks.<t>.goodput`); a version without them (v1, v2) leaves the board's default
below, and the page says which applies.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from speculator_arena.board.shown import ALL, Blanks, ShownRows, keys, sub
from speculator_arena.protocol.model import WORKLOADS, GoodputObjective, Protocol

# An interactive reader's needs, the same in every regime (the point of goodput is to show how
# load degrades them): the first token within 2 s, then at least 10 tokens per second.
DEFAULT = {w: GoodputObjective(ttft_seconds=2.0, tpot_seconds=0.1) for w in WORKLOADS}
COLUMNS = ["evaluation_id", "engine", "workload", "requests", "good", "share", "ttft_seconds", "tpot_seconds", "reason"]


def objectives(proto: Protocol, task_id: str) -> tuple[dict[str, GoodputObjective], str]:
    """The task's objectives under this version, and where they come from."""
    found = proto.task(task_id).goodput if task_id in proto.tasks else None
    if found:
        return found, f"protocol v{proto.version}"
    return DEFAULT, f"the board's default: protocol v{proto.version} sets no goodput objectives"


def objectives_frame(proto: Protocol, index: pd.DataFrame) -> pd.DataFrame:
    """evaluation_id, workload, ttft_seconds, tpot_seconds, source: the relation the SQL joins."""
    rows = []
    for eid, task in zip(index["evaluation_id"], index["task_id"]):
        obj, source = objectives(proto, task)
        rows += [(eid, w, obj[w].ttft_seconds, obj[w].tpot_seconds, source) for w in WORKLOADS]
    return pd.DataFrame(rows, columns=["evaluation_id", "workload", "ttft_seconds", "tpot_seconds", "source"])


def goodput(rows: ShownRows) -> pd.DataFrame:
    """Per evaluation, engine and workload (and 'all', pooled over the workloads' requests): timed
    requests, good ones and their share, with the objectives; NaN with the reason when blank."""
    blank = Blanks(rows)
    obj = rows.objectives.set_index(["evaluation_id", "workload"])
    out = []
    for key in keys(rows, (*WORKLOADS, ALL)):
        e, _, w = key
        ttft, tpot = (obj.at[(e, w), "ttft_seconds"], obj.at[(e, w), "tpot_seconds"]) if w != ALL else (np.nan, np.nan)
        why = blank(*key)
        r = sub(rows.requests, *key)
        requests, good = int(r["requests"].sum()), int(r["good"].sum())
        if why is None and r["timing_missing"].sum() > 0:
            why = f"{int(r['timing_missing'].sum())} counted requests lack chunk times"
        if why is None and requests == 0:
            why = "no timed requests"
        share = np.nan if why else good / requests
        out.append((*key, np.nan if why else requests, np.nan if why else good, share, ttft, tpot, why))
    return pd.DataFrame(out, columns=COLUMNS)
