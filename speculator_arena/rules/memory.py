"""Protocol section 7's memory budget, the one home of the rule: GPU_MEMORY_UTILIZATION x the
device's total + the slack. Numbers or arrays; the memory gate and the evaluation page's plot
both use it."""

from __future__ import annotations


def memory_budget_bytes(total_bytes, gpu_memory_utilization, slack_bytes):
    return gpu_memory_utilization * total_bytes + slack_bytes
