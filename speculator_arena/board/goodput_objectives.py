"""Goodput's objectives: the TTFT and TPOT a request must meet to be good, per task and workload.

The objectives are protocol data (`goodput`, per workload, over a task's own
`tasks.<t>.goodput`); a version without them (v1, v2) leaves the board's default below, and the
page says which applies. They live apart from the figure (goodput.py) because the shown rows
need them before any figure is computed: `read_shown` (shown.py) registers `objectives_frame`
as the relation its SQL joins, and the methodology page shows `objectives`; the figure reads
them back from the rows, so neither module imports the other.
"""

from __future__ import annotations

import pandas as pd

from speculator_arena.protocol.model import WORKLOADS, GoodputObjective, Protocol

# An interactive reader's needs, the same in every regime (the point of goodput is to show how
# load degrades them): the first token within 2 s, then at least 10 tokens per second.
DEFAULT = {w: GoodputObjective(ttft_seconds=2.0, tpot_seconds=0.1) for w in WORKLOADS}


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
