"""LiveCodeBench's check of a chat answer: the program taken from the answer runs on each of the
item's public test cases, in the sandbox, with the case's input on stdin; it passes when every
case's output matches. The program is the reply's last block marked Python, else its last block
(`code_reply.program_from_reply`; LiveCodeBench's own extraction takes the last fenced block),
after the standard-library imports LiveCodeBench's runner puts before every program (`_PRELUDE`).

Why this comparison: it is LiveCodeBench's own for its `stdin` cases (lcb_runner's stdio check):
both outputs are stripped and split into lines; the line counts must agree and each line must be
equal, or equal as a list of decimal numbers ("0.50" and "0.5" agree). Here each line's runs of
whitespace also count as one space (a line is equal when its words are).

Why the cases run inside one sandboxed program: `sandbox.run_program` gives a program no stdin
and returns no output (a result never carries a program's or an item's text). So the sandboxed
program is a small runner holding the cases: it writes the answer's program into its private
work folder, runs it once per case as a child process (`python -I -S`, the case's input as its
stdin, a time limit per case) and compares the output there; only its exit code comes back,
which says which case ended how (`_EXIT`). The answer's program is still confined by the
sandbox (its user, namespaces and limits are inherited); a child that exits early or kills
itself cannot make the runner exit 0.

`functional` cases (LeetCode-style: a method of `class Solution` called with JSON arguments)
need the method's name, which the item does not carry; such an item is graded `error`, saying so.
`public_test_cases` is a JSON string in the dataset (a list is taken as is).
"""

from __future__ import annotations

import json

from speculator_arena.grading.code_reply import program_from_reply
from speculator_arena.grading.result import Grade
from speculator_arena.grading.sandbox import Limits, SandboxResult, run_program

CASE_TIMEOUT_S = 6.0  # lcb_runner's default time limit per test case
# The runner's exit code: 16 * outcome + the case's number (1..15; 15 also for any later case).
_EXIT = {1: ("fail", "wrong answer"), 2: ("fail", "runtime error"), 3: ("timeout", "over the time limit")}

# The standard-library imports LiveCodeBench's runner puts before every program it tests (so a
# program that uses `deque`, `sys` or `exit` without importing them runs as it would there; the
# sandbox's `python -S` has no `exit` of its own).
_PRELUDE = (
    "from string import *\nfrom re import *\nfrom datetime import *\nfrom collections import *\n"
    "from heapq import *\nfrom bisect import *\nfrom copy import *\nfrom math import *\nfrom random import *\n"
    "from statistics import *\nfrom itertools import *\nfrom functools import *\nfrom operator import *\n"
    "from io import *\nfrom sys import *\nfrom json import *\nfrom builtins import *\nfrom typing import *\n"
    "import string\nimport re\nimport datetime\nimport collections\nimport heapq\nimport bisect\nimport copy\n"
    "import math\nimport random\nimport statistics\nimport itertools\nimport functools\nimport operator\n"
    "import io\nimport sys\nimport json\nsys.setrecursionlimit(50000)\n\n"
)

_RUNNER = r"""
import json, os, subprocess, sys
from decimal import Decimal, InvalidOperation

CASES = json.loads(%(cases)r)
SOURCE = %(source)r
TIMEOUT = %(timeout)r


def lines(text):
    return [" ".join(line.split()) for line in text.strip().split("\n")]


def decimals(line):
    try:
        return [Decimal(tok) for tok in line.split()]
    except (InvalidOperation, ValueError):
        return None


def same(got, want):
    got, want = lines(got), lines(want)
    if len(got) != len(want):
        return False
    for g, w in zip(got, want):
        if g != w and (decimals(g) is None or decimals(g) != decimals(w)):
            return False
    return True


def finish(outcome, number):
    sys.exit(16 * outcome + min(number, 15))


try:
    os.remove(__file__)  # the cases stay out of the answer's reach on disk
except OSError:
    pass
with open("solution.py", "w", encoding="utf-8") as fh:
    fh.write(SOURCE)
for number, case in enumerate(CASES, 1):
    with open("input.txt", "w", encoding="utf-8") as fh:
        fh.write(case["input"])
    with open("input.txt", "rb") as stdin, open("output.txt", "wb") as stdout:
        try:
            done = subprocess.run(
                [sys.executable, "-I", "-S", "solution.py"],
                stdin=stdin, stdout=stdout, stderr=subprocess.DEVNULL, timeout=TIMEOUT,
            )
        except subprocess.TimeoutExpired:
            finish(3, number)
    if done.returncode != 0:
        finish(3 if done.returncode in (-24, -9) else 2, number)  # SIGXCPU / the CPU limit's SIGKILL
    with open("output.txt", encoding="utf-8", errors="replace") as fh:
        if not same(fh.read(), case["output"]):
            finish(1, number)
sys.exit(0)
"""


def public_cases(tests) -> list[dict]:
    """The item's test cases: a JSON string (as in the dataset) or a list of
    {"input", "output", "testtype"}; ValueError when unreadable."""
    cases = json.loads(tests) if isinstance(tests, str) else tests
    if not isinstance(cases, list) or not all(isinstance(c, dict) for c in cases):
        raise ValueError("test cases must be a list of objects")
    for c in cases:
        if not isinstance(c.get("input"), str) or not isinstance(c.get("output"), str):
            raise ValueError("a test case needs string `input` and `output`")
    return cases


def runner_program(source: str, cases: list[dict], timeout_s: float = CASE_TIMEOUT_S) -> str:
    """The sandboxed runner for one answer's program and the item's stdin cases."""
    slim = [{"input": c["input"], "output": c["output"]} for c in cases]
    return _RUNNER % {"cases": json.dumps(slim), "source": _PRELUDE + source, "timeout": float(timeout_s)}


def _limits(cases: list[dict], timeout_s: float) -> Limits:
    """Room for every case's run (wall clock) and for its input and output files."""
    biggest = max(len(c["input"].encode()) + len(c["output"].encode()) for c in cases)
    base = Limits()
    file_bytes = max(base.file_bytes, 2 * biggest + (64 << 10))
    return Limits(
        wall_s=timeout_s * len(cases) + 5,
        cpu_s=int(timeout_s) + 1,
        file_bytes=file_bytes,
        work_bytes=max(base.work_bytes, 4 * file_bytes + (1 << 20)),
    )


def grade_livecodebench(
    reply: str | None,
    tests,
    *,
    timeout_s: float = CASE_TIMEOUT_S,
    limits: Limits | None = None,
    home=None,
) -> Grade:
    """Pass (1) when the reply's program gives every public case's output, else fail (0), or
    timeout (a case over its time limit); error when the item's cases cannot be run."""
    try:
        cases = public_cases(tests)
    except (ValueError, TypeError):
        return Grade("error", 0.0, "the item's test cases are not readable")
    if not cases:
        return Grade("error", 0.0, "the item has no public test cases")
    kinds = {c.get("testtype", "stdin") for c in cases}
    if kinds != {"stdin"}:
        return Grade("error", 0.0, "functional (LeetCode-style) test cases are not graded yet; only stdin cases")
    if reply is None or not reply.strip():
        return Grade("fail", 0.0, "no answer")
    program = runner_program(program_from_reply(reply), cases, timeout_s)
    result: SandboxResult = run_program(program, limits or _limits(cases, timeout_s), home=home)
    if result.verdict == "pass":
        return Grade("pass", 1.0, f"{len(cases)}/{len(cases)} public cases passed")
    code = result.exit_code
    if result.verdict == "fail" and code is not None and 16 <= code < 64:
        verdict, what = _EXIT[code // 16]
        number = code % 16
        where = f"case {number}" if number < 15 else "case 15 or later"
        return Grade(verdict, 0.0, f"{where} of {len(cases)}: {what}")
    return Grade(result.verdict, 0.0, result.detail)
