"""What a grader says of one answer: the `lowb_items` row's verdict, score and detail.

Why one small type: HumanEval and RULER grade differently (a program's exit, a string match) but
the runner writes one row shape for both (warehouse/schema.py LOWB_ITEMS), and `detail` must
never carry an item's text (the hidden items' text stays off every public surface).
"""

from __future__ import annotations

from dataclasses import dataclass

VERDICTS = ("pass", "fail", "timeout", "refused", "error")
REFUSED_VERDICT = VERDICTS[3]  # the sandbox would not run it (a grader's word, not a submission status)


@dataclass(frozen=True)
class Grade:
    verdict: str  # one of VERDICTS
    score: float  # 0..1
    detail: str  # short, without the item's or the answer's text
