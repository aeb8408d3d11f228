"""The memory gate (SCORING.md "Gates", protocol section 7): the candidate's device memory peak
against the budget (rules/memory.py).
"""

from __future__ import annotations

import numpy as np

from speculator_arena.rules.memory import memory_budget_bytes
from speculator_arena.scoring import frames
from speculator_arena.scoring.gates.columns import EvaluationRows, gate_columns
from speculator_arena.scoring.result import ENGINES
from speculator_arena.scoring.rows import ScoringRows


def gate(rows: ScoringRows, on: EvaluationRows) -> dict:
    """Memory: the candidate's peak against utilization x device total + slack (the stock
    engine's peak is a figure).

    From protocol v2 on the samples must cover the timed passes: a failed read, or a gap between
    samples (or a pass's ends) over `max_sample_gap_seconds`, leaves a gate that would pass "not
    measured" with the reason; a peak already over the budget fails whatever the coverage."""
    memory, lim_e, public = rows.memory, on.limits, on.public
    mem_pos = frames.positions(memory, ["evaluation_id", "engine"], (on.uniques, ENGINES))[on.codes]
    n = len(mem_pos)
    util, slack = lim_e["gpu_memory_utilization"].to_numpy(), lim_e["memory_slack_bytes"].to_numpy()
    max_gap = lim_e["max_sample_gap_seconds"].to_numpy(dtype=float)
    stat, limit = np.full(n, np.nan), np.full(n, np.nan)
    verdict = frames.objects(n, "not measured")
    detail = frames.objects(n, "no device memory samples (no GPU to sample)")
    detail[~public] = "no device memory samples (no GPU to sample); does not block on this non-public task"
    rows = np.flatnonzero(mem_pos[:, 0] >= 0)
    if len(rows):
        m = memory.iloc[mem_pos[rows, 0]]
        peak, total = m["peak_bytes"].to_numpy(dtype=float), m["total_bytes"].to_numpy(dtype=float)
        u, s = util[rows], slack[rows]
        allowed = memory_budget_bytes(total, u, s)
        stat[rows], limit[rows] = peak, allowed
        over = peak > allowed
        failed = m["failed_reads"].fillna(0).to_numpy()
        gap = m["max_gap"].to_numpy(dtype=float)
        judged = ~np.isnan(max_gap[rows])
        uncovered = judged & ((failed > 0) | ~(gap <= max_gap[rows]))
        verdict[rows] = np.where(over, "fail", np.where(uncovered | np.isnan(peak), "not measured", "pass")).astype(
            object
        )
        detail[rows] = [
            f"peak {p / 2**30:.2f} GiB of {a / 2**30:.2f} GiB allowed ({uu} x {t / 2**30:.2f} GiB + "
            f"{ss / 2**30:.1f} GiB)"
            + (
                f"; samples do not cover the timed passes ({int(fr)} failed reads, largest gap {g:.2f} s over {mg:g} s)"
                if unc and not o
                else ""
            )
            for p, a, uu, t, ss, unc, o, fr, g, mg in zip(
                peak, allowed, u, total, s, uncovered, over, failed, gap, max_gap[rows]
            )
        ]
    return gate_columns(n, limit, verdict, detail, statistic=stat)
