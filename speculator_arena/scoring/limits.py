"""The protocol values the scorer's SQL needs, as small relations registered on the connection.

Why relations and not literals or string formatting: the queries in sql/ join these like any
table, so a new protocol version changes a limit by changing data only, and every task's
limits are applied in one pass over all evaluations.
"""

from __future__ import annotations

import pandas as pd

from speculator_arena.protocol.model import WORKLOADS, Protocol

GIB = 1 << 30


def protocol_limits(proto: Protocol) -> pd.DataFrame:
    rows = []
    for task_id in proto.tasks:
        tp = proto.task(task_id)
        g = tp.gates
        rows.append(
            dict(
                task_id=task_id,
                public=bool(tp.task.public),
                z=float(g.z),
                failure_min_excess=float(tp.failure_rule.min_excess),
                failure_share=float(tp.failure_rule.share_of_requests),
                likelihood_bound=float(tp.limits.likelihood_bound),
                first_choice_bound=float(tp.limits.first_choice_bound),
                fidelity_ceiling=float(tp.limits.fidelity_ceiling),
                greedy_floor=(
                    float(tp.limits.greedy_agreement_floor) if tp.limits.greedy_agreement_floor is not None else None
                ),
                length_bound=g.length.bound,
                memory_slack_bytes=g.memory.slack_gib * GIB,
                gpu_memory_utilization=float(tp.engine_environment.gpu_memory_utilization),
                max_unanswered_share=g.answering.max_unanswered_share,
                # SCORING.md "Probe items the candidate does not answer" (from v2): worst values
                unanswered_worst=g.answering.unanswered_fidelity_min_nats is not None,
                unanswered_min_nats=_or_nan(g.answering.unanswered_fidelity_min_nats),
                max_sample_gap_seconds=_or_nan(g.memory.max_sample_gap_seconds),
                count_slack_tokens=int(tp.count_slack_tokens),
                max_foreign_cpu_share=float(tp.contention.max_foreign_cpu_share) if tp.contention else float("nan"),
                max_steal_share=float(tp.contention.max_steal_share) if tp.contention else float("nan"),
                steal_correction=bool(tp.steal_correction),
                dev_test_gap=float(tp.dev_test_gap),
                passes=int(tp.passes_per_workload),
            )
        )
    return pd.DataFrame(rows)


def _or_nan(value: float | None) -> float:
    """A value a version may lack (None), as NaN in the relation's float column."""
    return float("nan") if value is None else float(value)


def protocol_workloads(proto: Protocol) -> pd.DataFrame:
    rows = []
    for task_id in proto.tasks:
        tp = proto.task(task_id)
        for w in WORKLOADS:
            rows.append(
                dict(task_id=task_id, workload=w, speed_kind=tp.workloads[w].speed, passes=int(tp.passes_per_workload))
            )
    return pd.DataFrame(rows)


def passes_run(evaluations: pd.DataFrame, proto: Protocol) -> pd.Series:
    """Per evaluation row, the passes per workload it was run with: its run version's value for its
    task, else (run version unknown, or without the task) the scoring version's.

    Why the run version's and not `proto`'s: a version may change how many passes the runner makes
    (v4 made the embedded task's three passes two), and re-scoring under it must neither drop a
    pass that was run (a v3 evaluation's third) nor wait for one that never will be (a v4
    evaluation scored under v3). The limits, gates and rules stay the scoring version's; the
    warehouse's completeness check (warehouse/completeness.py) counts passes the same way.
    """
    from speculator_arena.protocol import available_versions, load_protocol

    known = set(available_versions())
    own = {t: proto.task(t).passes_per_workload for t in proto.tasks}
    cache: dict[tuple, int | None] = {}

    def one(task_id, run_version) -> float:
        key = (task_id, run_version)
        if key not in cache:
            run = load_protocol(int(run_version)) if pd.notna(run_version) and int(run_version) in known else None
            in_run = run is not None and task_id in run.tasks
            cache[key] = run.task(task_id).passes_per_workload if in_run else own.get(task_id)
        value = cache[key]
        return float("nan") if value is None else float(value)

    versions = evaluations["protocol_version"] if "protocol_version" in evaluations else [None] * len(evaluations)
    return pd.Series(
        [one(t, v) for t, v in zip(evaluations["task_id"], versions)], index=evaluations.index, dtype=float
    )
