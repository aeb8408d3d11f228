"""The records of a LowBArena item pool and its error type.

Why plain dataclasses: the runner sends `messages`, the grader reads `grader`, the warehouse row
keeps `item_id`, `domain` and `benchmark` only; an item's text never leaves the pool's files.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from speculator_arena.errors import ArenaError


class ItemPoolError(ValueError, ArenaError):
    """A LowBArena item pool that is not built, a declared source that cannot be read, or an item
    file that is broken (the message names the file and the line; nothing stored is changed)."""


@dataclass(frozen=True)
class Item:
    item_id: str  # opaque and stable: a digest (keyed for hidden items), never text
    domain: str
    benchmark: str
    messages: list[dict]  # the chat messages sent
    max_tokens: int
    grader: dict = field(default_factory=dict)  # {"kind": "humaneval" | "ruler" | ..., what it needs}

    def to_row(self) -> dict:
        return asdict(self)

    @classmethod
    def from_row(cls, row: dict) -> Item:
        return cls(
            item_id=str(row["item_id"]),
            domain=str(row["domain"]),
            benchmark=str(row["benchmark"]),
            messages=list(row["messages"]),
            max_tokens=int(row["max_tokens"]),
            grader=dict(row["grader"]),
        )


@dataclass(frozen=True)
class Candidate:
    """One item a source offers before the split: `source_id` names it in its source (never
    shown), `text` is its natural text for the KL probe (None: not natural text)."""

    source_id: str
    benchmark: str
    messages: list[dict]
    grader: dict
    text: str | None
