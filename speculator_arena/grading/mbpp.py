"""MBPP's check of a chat answer: the program is the code taken from the answer, then the item's
`test_list` (its assert statements, after any `test_imports`); it passes when that program exits
0 in the sandbox.

Why this program: MBPP's own evaluation (the paper's, and lm-eval-harness's and EvalPlus's after
it) executes the generated code followed by the item's three asserts; an assert that fails, or
code that does not define the function the asserts call, ends the program with an exception. As
for HumanEval, the program runs only through `sandbox.run_program` (its own user, no network,
limits), never `exec()` in the arena's process.

The code is read as HumanEval's (`code_reply.code_from_reply`): the fenced block that defines
the function the asserts call (the first name called in them that is not a builtin), else the
first block, else the whole reply. MBPP (sanitized) lists some tests' imports apart, in
`test_imports`; an item's grader may carry them under that key and they come before the asserts.
"""

from __future__ import annotations

import builtins
import re

from speculator_arena.grading.code_reply import code_from_reply
from speculator_arena.grading.result import Grade
from speculator_arena.grading.sandbox import Limits, SandboxResult, run_program

_CALL = re.compile(r"(?<![\w.])([A-Za-z_]\w*)\s*\(")


def _as_list(value) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value]


def function_under_test(tests: list[str]) -> str | None:
    """The first name the asserts call that is not a builtin (`assert f(1) == 2` -> "f")."""
    for test in tests:
        for name in _CALL.findall(test):
            if name not in ("assert", "not") and not hasattr(builtins, name):
                return name
    return None


def check_program(code: str, tests: list[str], test_imports: list[str] | None = None) -> str:
    """The answer's code, then the test imports, then the asserts, one per line."""
    lines = [*(test_imports or []), *tests]
    return code.rstrip() + "\n\n\n" + "\n".join(line.rstrip() for line in lines) + "\n"


def grade_mbpp(reply: str | None, tests, test_imports=None, *, limits: Limits | None = None, home=None) -> Grade:
    """Pass (1) when the reply's code passes every assert in the sandbox, else fail (0); timeout,
    refused and error keep their verdicts and score 0."""
    asserts = _as_list(tests)
    if not asserts:
        return Grade("error", 0.0, "the item has no tests")
    if reply is None or not reply.strip():
        return Grade("fail", 0.0, "no answer")
    code = code_from_reply(reply, function_under_test(asserts))
    program = check_program(code, asserts, _as_list(test_imports))
    result: SandboxResult = run_program(program, limits or Limits(), home=home)
    return Grade(result.verdict, 1.0 if result.verdict == "pass" else 0.0, result.detail)
