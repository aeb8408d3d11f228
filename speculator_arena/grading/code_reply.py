"""The code of a chat model's answer, for the graders that run it (HumanEval, MBPP, LiveCodeBench).

Why one reader for all three: chat models answer a coding prompt with prose around one or more
fenced blocks (```python, ```py or a bare ```), sometimes cut off before the closing fence, and
sometimes with no fence at all; each code grader must take the same block from the same reply,
so a reply is read one way whichever benchmark asked for it.

- `code_from_reply(reply, defines=name)`: the first block that defines `name` (HumanEval's entry
  point, MBPP's function under test), else the first block, else the whole reply.
- `program_from_reply(reply)`: a whole program (LiveCodeBench): the last block marked Python,
  else the last block, else the whole reply. LiveCodeBench's own extraction takes the last fenced
  block; preferring a Python-marked one skips a trailing block of sample output.
"""

from __future__ import annotations

import re

# A fenced block: its optional Python marker, then its text up to the closing fence (or the end of
# a reply cut off inside the block).
FENCE = re.compile(r"```[ \t]*(python3?|py)?[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL | re.IGNORECASE)


def code_blocks(reply: str | None) -> list[tuple[bool, str]]:
    """The reply's non-empty fenced blocks in order: (marked as Python, text)."""
    return [(bool(tag), block) for tag, block in FENCE.findall(reply or "") if block.strip()]


def code_from_reply(reply: str | None, defines: str | None = None) -> str:
    """The fenced block that defines the function `defines`, else the first fenced block, else
    the whole reply."""
    blocks = [b for _, b in code_blocks(reply)]
    if defines:
        pattern = re.compile(rf"^\s*def\s+{re.escape(defines)}\s*\(", re.MULTILINE)
        for block in blocks:
            if pattern.search(block):
                return block
    return blocks[0] if blocks else (reply or "")


def program_from_reply(reply: str | None) -> str:
    """The last block marked Python, else the last fenced block, else the whole reply."""
    blocks = code_blocks(reply)
    marked = [b for is_py, b in blocks if is_py]
    if marked:
        return marked[-1]
    return blocks[-1][1] if blocks else (reply or "")
