"""The window rule of protocol section 4, the one home of its arithmetic: the client counts a
prompt's tokens with the target's tokenizer plus `overhead_fraction` and `overhead_tokens` for
what the chat template adds; a prompt whose estimate and reply budget would not fit
`max_model_len` has its history after the first message cut to `cut_to_fraction` of the window.

The runner's workload client cuts histories with it, and the pool builder sizes turns so that
they fit a cut history (pools/builder/context.py), so both apply the same estimate.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class WindowRule:
    max_model_len: int
    overhead_fraction: float
    overhead_tokens: int
    cut_to_fraction: float

    @classmethod
    def of(cls, task) -> WindowRule:
        """The rule of a `TaskProtocol`."""
        w = task.window
        return cls(task.task.max_model_len, w.overhead_fraction, w.overhead_tokens, w.cut_to_fraction)

    def estimate(self, content_tokens: int) -> int:
        """Prompt tokens as the client counts them: contents plus what the template adds."""
        return int(content_tokens * (1 + self.overhead_fraction) + self.overhead_tokens)

    def fits(self, content_tokens: int, max_tokens: int) -> bool:
        """Whether a prompt of these content tokens and its reply budget fit the whole window."""
        return self.estimate(content_tokens) + max_tokens <= self.max_model_len

    @property
    def cut_target(self) -> int:
        """The estimate a cut history is brought down to."""
        return int(self.cut_to_fraction * self.max_model_len)

    def room_after_cut(self, max_tokens: int) -> float:
        """Content tokens a prompt may hold in a cut-down window beside its reply budget."""
        return (self.max_model_len * self.cut_to_fraction - self.overhead_tokens - max_tokens) / (
            1.0 + self.overhead_fraction
        )
