"""RULER's scoring of a long-context answer: the share of the expected strings the answer holds.

Why RULER's own rule: the rules gate the long-context domain on "RULER 16K"; RULER scores its
synthetic tasks (niah, variable tracking, common words) with `string_match_all`: each expected
string found in the answer, case-insensitively, counts 1/n, so a partial answer earns partial
credit and the score is 0..1. The answer is cleaned as RULER's post-processing does (control
characters removed) before matching.
"""

from __future__ import annotations

import re

from speculator_arena.grading.result import Grade

_NON_PRINTABLE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]")


def clean(answer: str) -> str:
    """RULER's post-processing: drop non-printable control characters, trim."""
    return _NON_PRINTABLE.sub("\n", answer or "").strip()


def ruler_score(answer: str, expected: list[str]) -> float:
    """string_match_all: the fraction of `expected` found in `answer` (case-insensitive)."""
    if not expected:
        raise ValueError("a RULER item needs at least one expected answer")
    text = clean(answer).lower()
    return sum(1.0 for e in expected if str(e).lower() in text) / len(expected)


def grade_ruler(answer: str | None, expected: list[str]) -> Grade:
    if answer is None:
        return Grade("fail", 0.0, "no answer")
    score = ruler_score(answer, expected)
    found = round(score * len(expected))
    return Grade("pass" if score == 1.0 else "fail", score, f"{found}/{len(expected)} expected found")
