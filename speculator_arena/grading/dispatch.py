"""One entry for the runner: grade an item's answer by the grader its pool declared.

Why here and not in the runner: the grader kinds are the item pool's words (pools/lowb
sources.yaml `grader.kind`), and what each needs travels in the item; a kind without a grader
written yet is graded `error` with that said (the domain's rows then score nothing for either
engine, so its paired drop is 0, and the board lists the benchmark among those it lacks).

The kinds: `humaneval`, `mbpp` and `livecodebench` run the answer's code in the sandbox;
`ruler` matches strings; `final-number` (GSM8K), `boxed` (MATH-500) and `choice` (MMLU-Pro,
ARC-Challenge, HellaSwag, GPQA Diamond) read the answer's final number, box or letter.
"""

from __future__ import annotations

from speculator_arena.grading.boxed import grade_boxed
from speculator_arena.grading.choice import grade_choice
from speculator_arena.grading.final_number import grade_final_number
from speculator_arena.grading.humaneval import grade_humaneval
from speculator_arena.grading.livecodebench import grade_livecodebench
from speculator_arena.grading.mbpp import grade_mbpp
from speculator_arena.grading.result import Grade
from speculator_arena.grading.ruler import grade_ruler


def grade(item, answer: str | None) -> Grade:
    g = item.grader
    kind = g.get("kind")
    if kind == "humaneval":
        return grade_humaneval(answer, g["prompt"], g["test"], g["entry_point"])
    if kind == "ruler":
        return grade_ruler(answer, list(g["expected"]))
    if kind == "mbpp":
        return grade_mbpp(answer, g["tests"], g.get("test_imports"))
    if kind == "livecodebench":
        return grade_livecodebench(answer, g["tests"])
    if kind == "final-number":
        return grade_final_number(answer, g["answer"])
    if kind == "boxed":
        return grade_boxed(answer, g["answer"])
    if kind == "choice":
        return grade_choice(answer, g["answer"], labels=g.get("labels"), choices=g.get("choices"))
    return Grade("error", 0.0, f"no grader for kind {kind!r} yet")
