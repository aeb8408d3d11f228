"""The records a pool hands the runner (fields fixed in docs/contributors/contracts.md)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal


@dataclass(frozen=True)
class Turn:
    """One user or tool turn. Tool outputs are sent as user messages (as mini-swe-agent does).

    `think_time_s` is the gap before this turn as sampled from the recorded traces, neither
    capped nor scaled: the runner waits min(think_time_s, cap) x c (protocol section 4).
    """

    kind: Literal["user", "tool"]
    content: str
    max_tokens: int
    think_time_s: float
    paraphrased: bool = False


@dataclass(frozen=True)
class Session:
    session_id: str
    family: Literal["agent", "chat"]
    app: str
    system_prompt: str
    tools: list[dict[str, Any]]
    turns: list[Turn]
    footprint_tokens: int
    source: str

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> Session:
        turns = [
            Turn(
                kind=t["kind"],
                content=t["content"],
                max_tokens=int(t["max_tokens"]),
                think_time_s=float(t["think_time_s"]),
                paraphrased=bool(t.get("paraphrased", False)),
            )
            for t in d["turns"]
        ]
        return cls(
            session_id=d["session_id"],
            family=d["family"],
            app=d["app"],
            system_prompt=d["system_prompt"],
            tools=list(d.get("tools") or []),
            turns=turns,
            footprint_tokens=int(d["footprint_tokens"]),
            source=d["source"],
        )


@dataclass(frozen=True)
class Probe:
    prompt_id: str
    messages: list[dict[str, str]]


@dataclass(frozen=True)
class FidelityText:
    text_id: str
    messages: list[dict[str, str]]
    reply: str


@dataclass
class SourceConversation:
    """One real conversation or trajectory a session's turns come from."""

    source_id: str
    family: str
    messages: list[dict[str, str]]
    origin: str
    meta: dict = field(default_factory=dict)

    def user_turns(self) -> list[str]:
        """Agent: the task, then every tool observation; chat: the user messages."""
        return [m["content"] for m in self.messages if m["role"] == "user"]
