"""One entry for the runner: grade an item's answer by the grader its pool declared.

Why here and not in the runner: the grader kinds are the item pool's words (pools/lowb
sources.yaml `grader.kind`), and what each needs travels in the item; a kind without a grader
written yet is graded `error` with that said (the domain's rows then score nothing for either
engine, so its paired drop is 0, and the board lists the benchmark among those it lacks).
"""

from __future__ import annotations

from speculator_arena.grading.humaneval import grade_humaneval
from speculator_arena.grading.result import Grade
from speculator_arena.grading.ruler import grade_ruler


def grade(item, answer: str | None) -> Grade:
    g = item.grader
    kind = g.get("kind")
    if kind == "humaneval":
        return grade_humaneval(answer, g["prompt"], g["test"], g["entry_point"])
    if kind == "ruler":
        return grade_ruler(answer, list(g["expected"]))
    return Grade("error", 0.0, f"no grader for kind {kind!r} yet")
