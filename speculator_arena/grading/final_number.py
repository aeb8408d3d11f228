"""GSM8K's final number: the number a chat answer ends on, compared to the item's.

Why it reads answers this way: a GSM8K answer field is the worked solution ending in a line
`#### 18`, the number after `####` being the reference; the prompt asks the model to end its
answer the same way. As lm-eval-harness's gsm8k task does, the reply's number is read after its
last `#### ` (its "strict-match"), else the reply's last number (its "flexible-extract"), and
commas, `$` and a trailing period are ignored ("1,000" is 1000, "$18." is 18). Here the two
numbers are then compared as numbers, not strings, so "3.50" equals "3.5" and "18.00" equals 18.
A `####` that is only a Markdown heading ("#### Step 2") is not followed by a number and is
passed over. A reply with no number fails, saying so; the detail never quotes either number.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from speculator_arena.grading.result import Grade

# A number as written in an answer: "-1,234.50", "$18", "3.5", ".5" (commas only in groups of 3).
_NUMBER = r"-?(?:\$\s*)?(?:(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+)"
_NUM = re.compile(r"(?<![\w.])(" + _NUMBER + r")(?![\d])")
_AFTER_HASHES = re.compile(r"####[\s*_$\\]*(" + _NUMBER + r")")


def to_number(text: str) -> Decimal | None:
    """The number `text` writes, without commas, `$`, spaces or a trailing period; None if it
    writes none."""
    s = re.sub(r"[,$\s]", "", str(text)).rstrip(".")
    if not re.fullmatch(r"-?(?:\d+(?:\.\d*)?|\.\d+)", s):
        return None
    try:
        return Decimal(s)
    except InvalidOperation:
        return None


def reference_number(answer) -> Decimal | None:
    """The number after the last `####` of GSM8K's answer field (a bare number is taken as is)."""
    if isinstance(answer, bool):
        return None
    text = str(answer)
    return to_number(text.rsplit("####", 1)[1] if "####" in text else text)


def reply_number(reply: str | None) -> Decimal | None:
    """The number right after the reply's last `####` followed by one, else its last number."""
    text = reply or ""
    for m in reversed(list(_AFTER_HASHES.finditer(text))):
        n = to_number(m.group(1))
        if n is not None:
            return n
    for m in reversed(list(_NUM.finditer(text))):
        n = to_number(m.group(1))
        if n is not None:
            return n
    return None


def grade_final_number(reply: str | None, answer) -> Grade:
    """Pass (1) when the reply's final number equals the reference, else fail (0); error when the
    item's answer holds no number."""
    expected = reference_number(answer)
    if expected is None:
        return Grade("error", 0.0, "the item's answer has no number after ####")
    if reply is None or not reply.strip():
        return Grade("fail", 0.0, "no answer")
    got = reply_number(reply)
    if got is None:
        return Grade("fail", 0.0, "no number found in the answer")
    if got == expected:
        return Grade("pass", 1.0, "the final number is the answer")
    return Grade("fail", 0.0, "the final number is not the answer")
