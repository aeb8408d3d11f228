"""Multiple choice (MMLU-Pro, ARC-Challenge, HellaSwag, GPQA Diamond): the letter a chat answer
chose, compared to the item's answer as a letter.

Why it reads answers this way: the prompt lists the options as "A. ...", "B. ..." and asks for a
letter; a chat model answers in prose. An explicit statement is looked for first, as
lm-eval-harness's MMLU-Pro filter ("answer is \\(?X\\)?") and simple-evals' ("Answer: X") do:
"answer is (C)", "Answer: D", "the correct option is B" (also **bold**, $\\boxed{C}$); of several
the last wins (theirs take the first), so a model that reconsiders is read at its final word.
Without one, the reply (or its last or first line) must be one letter ("C", "C.", "**B**",
"(C)"), or name exactly one letter in a marked form ("(C)", "**C**", "C." or "C)" opening a
line, "option C"). Letters are upper case (lower case "a" is a word, and "I think" is not option
I). Two choices ("the answer is A or B") or two different marked letters are no single clear
choice: a fail, as is a reply with no letter; the detail says which, never the letters.

The item's answer is normalised to a letter: an int is a 0-based index (MMLU-Pro's
`answer_index`), a string of digits too (HellaSwag's `label` "2" is C), a letter is itself (ARC's
`answerKey`). Where the options carry their own labels (ARC's few rows labelled "1".."4"), an
item's grader may carry them as `labels`: the answer is then found among them. A string that is
the text of one of the item's `choices` (when the grader carries them) is that option.
"""

from __future__ import annotations

import re

from speculator_arena.errors import ArenaError
from speculator_arena.grading.result import Grade

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"

_NOT_WORD = r"(?![A-Za-z0-9])"
_OPEN = r"(?:[\s*_`'\"$\\(\[{]|boxed\{|text\{|textbf\{|mathbf\{|mathrm\{)*"
# "I" read as a pronoun, not option I: "Answer: I think ...", "I'm"
_NOT_PRONOUN = r"(?!(?<=I)(?:'|\s+(?:am|think|believe|guess|would|will|can|need|must|should|have)\b))"
# "answer is (C)", "Answer: D", "**Final answer:** B", "the correct option would be $\boxed{C}$"
_EXPLICIT = re.compile(
    r"(?i:\b(?:answer|(?:correct|right|best)\s+(?:option|choice|ending|letter))\b)"
    r"[\s*_]*"
    r"(?:(?i:is|would\s+be|will\s+be|should\s+be|must\s+be)\b[\s*_]*:?|:|=)"
    r"[\s*_]*(?i:(?:therefore|thus|clearly|probably|likely|indeed|so)\s+)?"
    r"(?i:(?:option|choice|letter)\s+)?" + _OPEN + r"([A-Z])" + _NOT_WORD + _NOT_PRONOUN
)
# a second letter right after the explicit one: "A or B", "(A) and (C)."
_ALSO = re.compile(r"[\s*_`$)\]}]*(?:or|and|/|&)\s*" + _OPEN + r"[A-Z]" + _NOT_WORD + r"[\s*_`$)\]}]*(?:[.,;:!?\n]|$)")
_LONE = re.compile(_OPEN + r"([A-Z])[\s*_`'\"$)\]}.:!]*")
_MARKED = (
    re.compile(r"\(([A-Z])\)"),  # (C)
    re.compile(r"\*\*\(?([A-Z])\)?[.:)]?\*\*"),  # **C**, **C.**
    re.compile(r"\\boxed\{\s*(?:\\text\{)?\s*\(?([A-Z])" + _NOT_WORD),  # \boxed{C}
    re.compile(r"^[\s*_>#-]*([A-Z])[.)]\s", re.MULTILINE),  # "C. ..." or "C) ..." opening a line
    re.compile(r"(?i:\b(?:option|choice)\s+)\(?([A-Z])" + _NOT_WORD),  # option C
)


class _Ambiguous(ArenaError):
    """The reply names more than one choice (caught in `grade_choice`: a failed answer)."""


def chosen_letter(reply: str | None) -> str | None:
    """The one letter the reply chose, None when it names none; raises _Ambiguous when it names
    more than one. In order: the last explicit statement; the reply, its last line or its first
    line being one letter; the one letter named in a marked form."""
    text = (reply or "").strip()
    if not text:
        return None
    explicit = list(_EXPLICIT.finditer(text))
    if explicit:
        last = explicit[-1]
        if _ALSO.match(text, last.end()):
            raise _Ambiguous
        return last.group(1)
    lines = [ln for ln in text.splitlines() if ln.strip()]
    for candidate in (text, lines[-1], lines[0]):
        lone = _LONE.fullmatch(candidate)
        if lone:
            return lone.group(1)
    marked = {m.group(1) for pattern in _MARKED for m in pattern.finditer(text)}
    if len(marked) > 1:
        raise _Ambiguous
    return marked.pop() if marked else None


def answer_letter(answer, labels=None, choices=None) -> str | None:
    """The item's answer as a letter (A for the first option), None when it cannot be read."""
    if isinstance(answer, bool):
        return None
    if labels is not None:
        wanted = str(answer).strip()
        names = [str(label).strip() for label in labels]
        return LETTERS[names.index(wanted)] if wanted in names and names.index(wanted) < len(LETTERS) else None
    if isinstance(answer, int):
        return LETTERS[answer] if 0 <= answer < len(LETTERS) else None
    if not isinstance(answer, str):
        return None
    a = answer.strip()
    if a.isascii() and a.isdigit():
        return LETTERS[int(a)] if int(a) < len(LETTERS) else None
    bare = a.strip("()[]. ")
    if len(bare) == 1 and bare.upper() in LETTERS:
        return bare.upper()
    if choices is not None:
        texts = [str(c).strip() for c in choices]
        if a in texts and texts.index(a) < len(LETTERS):
            return LETTERS[texts.index(a)]
    return None


def grade_choice(reply: str | None, answer, *, labels=None, choices=None) -> Grade:
    """Pass (1) when the reply chose exactly one letter and it is the item's, else fail (0);
    error when the item's answer cannot be read as a letter."""
    expected = answer_letter(answer, labels, choices)
    if expected is None:
        return Grade("error", 0.0, "the item's answer is not a letter, an index or one of its labels")
    if reply is None or not reply.strip():
        return Grade("fail", 0.0, "no answer")
    try:
        got = chosen_letter(reply)
    except _Ambiguous:
        return Grade("fail", 0.0, "more than one choice named, no single answer")
    if got is None:
        return Grade("fail", 0.0, "no choice letter found in the answer")
    if got == expected:
        return Grade("pass", 1.0, "the chosen letter is the answer")
    return Grade("fail", 0.0, "the chosen letter is not the answer")
