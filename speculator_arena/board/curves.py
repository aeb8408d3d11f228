"""Throughput against interactivity (SPEED-Bench's and InferenceX's curves), shown, never scored.

The arena's three workloads are the curve's points: solo (one lane), team and busy (the task's
lanes), each pooling its passes' busy windows (SCORING.md): throughput = tokens of counted
requests' chunks inside the busy window / the window's seconds, per-user speed = throughput /
lanes (tokens per second per lane). Each engine of an evaluation has its own curve, so the
candidate's lies beside the stock engine's measured on the same sessions.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from speculator_arena.board.shown import Blanks, ShownRows, keys

COLUMNS = ["evaluation_id", "engine", "workload", "lanes", "throughput", "per_user", "reason"]


def interactivity_points(rows: ShownRows) -> pd.DataFrame:
    """One row per evaluation, engine and workload: lanes, throughput and per-user speed (tokens
    per second), or NaN with the reason."""
    blank = Blanks(rows)
    busy = rows.busy.set_index(["evaluation_id", "engine", "workload"])
    lanes = rows.passes.set_index(["evaluation_id", "engine", "workload"])["lanes"]
    out = []
    for key in keys(rows):
        why = blank(*key)
        n_lanes = lanes.get(key, np.nan)
        value = (np.nan, np.nan)
        if why is None:
            b = busy.loc[key] if key in busy.index else None
            if b is None or pd.isna(b["throughput"]):
                why = "no busy window: its lanes were never all in flight"
            else:
                value = (float(b["throughput"]), float(b["per_user"]))
        out.append((*key, n_lanes, *value, why))
    return pd.DataFrame(out, columns=COLUMNS)
