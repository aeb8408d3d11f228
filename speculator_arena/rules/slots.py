"""Protocol section 4's live sessions: a workload of `L` lanes, each holding `m` sessions, keeps
L x m sessions live (in the prefix cache). The pool builder sizes its pass blocks by them and the
pool hands each pass a block in proportion to them."""

from __future__ import annotations


def live_slots(task) -> dict[str, int]:
    """Per workload of a `TaskProtocol`: lanes x interleave."""
    return {w: task.lanes[w] * task.workloads[w].interleave for w in task.workloads}
