"""SCORING.md "Host contention", the one home of the rule for one pass: a pass (of either engine)
is contended when, over its sampled intervals, processes outside the engine's and the runner's
trees used more than `max_foreign_cpu_share` of one core on average, steal exceeded
`max_steal_share` of all CPU time, or another process held the device.

The runner calls `pass_rows_contended` at the end of each timed pass to stop a contended
evaluation at once (void, the operator re-runs it) instead of spending the rest of its device
time; the scorer (scoring/contention.py) judges every stored pass with `why_contended`.
"""

from __future__ import annotations


def why_contended(
    foreign_cpu_share: float,
    steal_share: float,
    foreign_gpu_processes: float,
    max_foreign_cpu_share: float,
    max_steal_share: float,
) -> str | None:
    """The rule for one pass: why it is contended, or None. NaN shares (nothing sampled) judge nothing."""
    why = [
        text
        for text, on in (
            (f"foreign CPU {foreign_cpu_share:.2f} of a core", foreign_cpu_share > max_foreign_cpu_share),
            (f"steal {steal_share:.1%}", steal_share > max_steal_share),
            (f"{int(foreign_gpu_processes)} other process(es) on the device", foreign_gpu_processes > 0),
        )
        if on
    ]
    return ", ".join(why) or None


def pass_rows_contended(rows: list[dict], rule) -> str | None:
    """The runner's check of one pass's raw contention rows (runners/contention.py) under the
    protocol's `contention` rule, with the same sums as scoring/sql/contention_passes.sql."""
    ok = [r for r in rows if r.get("error") is None]
    if not ok:
        return None
    seconds = sum(r["ended_at"] - r["started_at"] for r in ok)
    total = sum(r["total_cpu_seconds"] for r in ok)
    foreign = sum(r["foreign_cpu_seconds"] for r in ok) / seconds if seconds > 0 else float("nan")
    steal = sum(r["steal_seconds"] for r in ok) / total if total > 0 else float("nan")
    gpu = max((r.get("foreign_gpu_processes") or 0) for r in ok)
    return why_contended(foreign, steal, gpu, rule.max_foreign_cpu_share, rule.max_steal_share)
