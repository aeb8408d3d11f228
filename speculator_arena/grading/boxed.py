r"""MATH-500's boxed answer: the content of the reply's last `\boxed{...}`, compared to the item's
answer after a light normalisation.

Why it reads answers this way: MATH's solutions put the final answer in `\boxed{}` and its
reference grader (Hendrycks et al.'s `last_boxed_only_string` and `is_equiv`, which PRM800K's
MATH-500 keeps) takes the last one, braces balanced, and compares strings after `strip_string`.
The normalisation here follows that one: spaces, `\left`/`\right`, `\!` and the other thin
spaces, `$`, `\%` and degrees (`^\circ`) are dropped; `\dfrac`/`\tfrac` read as `\frac`,
`\frac12` as `\frac{1}{2}`, `\sqrt2` as `\sqrt{2}`; a trailing period, a short `x =` in front and
a trailing unit in `\text{...}` or `\mbox{...}` ("10\text{ cm}") go; any other `\text{...}` is
unwrapped, and a choice letter loses its parentheses ("\text{(C)}" is "C"); thousands commas go
("10,000", "10{,}000"). When both sides then read as numbers (integers, decimals, `a/b`,
`\frac{a}{b}`, signed) they are compared as exact fractions ("0.5" equals "\frac{1}{2}").

This is string-normalised equivalence, not symbolic: no sympy, no parsing of the LaTeX. It misses
answers equal only after algebra ("\frac{\sqrt3}{2}" against "\frac{1}{2}\sqrt{3}", "2\sqrt{2}"
against "\sqrt{8}", "x^2+1" against "1+x^2"), reordered sets, tuples and intervals, mixed numbers
("4\frac{2}{3}"), scientific notation, decimal approximations of exact values ("3.14" against
"\pi"), and equal matrices written differently; those fail as a wrong answer would.
"""

from __future__ import annotations

import re
from fractions import Fraction

from speculator_arena.grading.result import Grade

_BOX = re.compile(r"\\(?:boxed|fbox)\s*")


def last_boxed(text: str | None) -> str | None:
    r"""The content of the last `\boxed{...}` (or `\fbox{...}`, or `\boxed 5`), braces balanced;
    None when there is none or the last one is never closed."""
    text = text or ""
    starts = list(_BOX.finditer(text))
    if not starts:
        return None
    m = starts[-1]
    i = m.end()
    if i < len(text) and text[i] != "{":  # "\boxed 5": up to the next space or "$"
        return re.split(r"[\s$]", text[i:], maxsplit=1)[0] or None
    depth = 0
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i + 1 : j]
    return None


def _unwrap(s: str, command: str) -> str:
    """`\\command{X}` -> `X` for every such group (braces balanced)."""
    token = "\\" + command + "{"
    while token in s:
        i = s.index(token)
        depth, j = 0, i + len(token) - 1
        for j in range(i + len(token) - 1, len(s)):
            depth += {"{": 1, "}": -1}.get(s[j], 0)
            if depth == 0:
                break
        else:
            return s.replace(token, "", 1)
        s = s[:i] + s[i + len(token) : j] + s[j + 1 :]
    return s


def normalize(answer: str) -> str:
    """MATH's `strip_string`, lightly: the forms of one answer that differ only in writing."""
    s = str(answer).strip().replace("\n", "")
    for old, new in (("\\dfrac", "\\frac"), ("\\tfrac", "\\frac"), ("\\left", ""), ("\\right", "")):
        s = s.replace(old, new)
    for thin in ("\\!", "\\,", "\\;", "\\:", "\\ ", "~"):
        s = s.replace(thin, "")
    s = re.sub(r"\^\s*\{\s*\\circ\s*\}|\^\s*\\circ|°", "", s)
    s = s.replace("\\%", "").replace("%", "").replace("\\$", "").replace("$", "")
    s = s.replace("{,}", "")
    # a trailing unit: "10\text{ cm}", "5 \mbox{inches}" (not an answer that is only text)
    s = re.sub(r"(?<=\S)\s*\\(?:text|mbox|mathrm)\{\s*[A-Za-z][A-Za-z .^0-9{}]*\}\s*\.?\s*$", "", s)
    for command in ("text", "textbf", "mbox", "mathrm"):
        s = _unwrap(s, command)
    s = s.replace(" ", "").rstrip(".")
    if re.fullmatch(r"[A-Za-z]\w{0,1}=.+", s) and s.count("=") == 1:  # "x=5" -> "5"
        s = s.split("=", 1)[1]
    s = re.sub(r"\\frac(\d)(\d)", r"\\frac{\1}{\2}", s)
    s = re.sub(r"\\frac\{([^{}]*)\}(\d)", r"\\frac{\1}{\2}", s)
    s = re.sub(r"\\frac(\d)\{", r"\\frac{\1}{", s)
    s = re.sub(r"\\sqrt(\w)", r"\\sqrt{\1}", s)
    if re.fullmatch(r"\([A-Z]\)", s):  # a choice letter: "(C)" -> "C"
        s = s[1]
    if re.fullmatch(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?", s):
        s = s.replace(",", "")
    return s


def as_number(s: str) -> Fraction | None:
    """A normalised answer that is a plain number: 5, -2.5, .5, 3/4, \\frac{3}{4}, -\\frac{3}{4}."""
    m = re.fullmatch(r"(-?)\\frac\{(-?\d+(?:\.\d+)?)\}\{(-?\d+(?:\.\d+)?)\}", s) or re.fullmatch(
        r"(-?)\(?(-?\d+(?:\.\d+)?)\)?/\(?(-?\d+(?:\.\d+)?)\)?", s
    )
    try:
        if m:
            value = Fraction(m.group(2)) / Fraction(m.group(3))
            return -value if m.group(1) else value
        if re.fullmatch(r"-?(?:\d+(?:\.\d*)?|\.\d+)", s):
            return Fraction(s)
    except (ValueError, ZeroDivisionError):
        return None
    return None


def equivalent(got: str, expected: str) -> bool:
    a, b = normalize(got), normalize(expected)
    if a == b:
        return True
    x, y = as_number(a), as_number(b)
    return x is not None and y is not None and x == y


def grade_boxed(reply: str | None, answer) -> Grade:
    """Pass (1) when the reply's last boxed answer is equivalent to the reference, else fail (0);
    error when the item has no answer. A reference that is itself a solution with \\boxed{} is
    read at its last box."""
    reference = str(answer) if answer is not None and not isinstance(answer, bool) else ""
    if "\\boxed" in reference or "\\fbox" in reference:
        reference = last_boxed(reference) or ""
    if not reference.strip():
        return Grade("error", 0.0, "the item has no reference answer")
    if reply is None or not reply.strip():
        return Grade("fail", 0.0, "no answer")
    got = last_boxed(reply)
    if got is None or not got.strip():
        return Grade("fail", 0.0, "no \\boxed{} answer found")
    if equivalent(got, reference):
        return Grade("pass", 1.0, "the boxed answer matches")
    return Grade("fail", 0.0, "the boxed answer does not match")
