"""The pod's `activeDeadlineSeconds`: the longest an honest evaluation can take under the
protocol's limits, so the kubelet ends a hung runner and the GPU is freed.

It follows the harness's order (runners/harness.py): for each engine, a start (up to the health
timeout), per workload a warm-up wave and its passes (each up to its pass time plus the grace),
a stop (SIGTERM grace) and the wait for an idle device; then the probe restarts of both engines
(start, stop, idle wait each) and the probe requests, each allowed the protocol's grace; plus
one health timeout for the runner's own preparation (verifying the sealed target's manifest,
loading the tokenizer and the pool). It is a backstop: the runner's own timeouts end a healthy
run far sooner. The calibration's m/c fit (a spec with a `fit` plan) has a deadline of its own.
"""

from __future__ import annotations

import math

from speculator_arena.protocol.model import WORKLOADS, TaskProtocol


def active_deadline_seconds(task: TaskProtocol, fit: dict | None = None) -> int:
    """The deadline of an evaluation of `task`; with `fit` (a spec's m/c fit plan,
    runners/fit_plan.py) that of the fit's run: the preparation, one stock engine's cycle and
    one pass per grid point, each up to its pass time plus the grace."""
    ss, idle, grace = task.start_stop, task.device_idle, task.grace_seconds
    engine_cycle = ss.health_timeout_seconds + ss.sigterm_grace_seconds + idle.within_seconds
    if fit is not None:
        return int(math.ceil(ss.health_timeout_seconds + engine_cycle + len(fit["points"]) * (fit["seconds"] + grace)))
    waves_per_workload = task.warmup_waves + task.passes_per_workload
    timed = sum(waves_per_workload * (task.workloads[w].pass_seconds + grace) for w in WORKLOADS)
    g = task.gates
    # Candidate: greedy prompts and fidelity texts; stock: the same plus scoring both engines' replies.
    probe_requests = 2 * (g.greedy_agreement.prompts + g.target_fidelity.texts) + 2 * g.sampled_likelihood.replies
    probes = 2 * engine_cycle + probe_requests * grace
    preparation = ss.health_timeout_seconds
    return int(math.ceil(preparation + 2 * (engine_cycle + timed) + probes))
