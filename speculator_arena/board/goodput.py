"""Goodput (shown, never scored): the share of an engine's timed requests that met the workload's
TTFT and TPOT objectives, as vLLM, GuideLLM and AIPerf report it.

A request is good when it counts (SCORING.md) and its TTFT (first chunk − sent) is at most the
objective's `ttft_seconds` and its TPOT ((last chunk − first chunk) / (output tokens − 1)) at most
`tpot_seconds`; a one-token reply has no TPOT and meets that objective. The share is over every
timed request of the engine, counted or not: a request that failed met nothing, so failing slow
requests cannot raise it. The objectives (goodput_objectives.py: the protocol's, else the
board's default) come with the shown rows, which judged each request against them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from speculator_arena.board.shown import ALL, Blanks, ShownRows, keys, sub
from speculator_arena.protocol.model import WORKLOADS

COLUMNS = ["evaluation_id", "engine", "workload", "requests", "good", "share", "ttft_seconds", "tpot_seconds", "reason"]


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
