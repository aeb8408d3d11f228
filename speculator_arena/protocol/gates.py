"""What a candidate must pass: the gates, their probes, the failure rule and the calibrated limits.

The gates' settings (section 6) with the probe sizes a task may override (`TaskGates`), the
failure rule, and the limits and speed noise a task's calibration sets (section 10). Apart from
how the engines are served (serving.py) and from the document (model.py), which only name them.
"""

from __future__ import annotations

from pydantic import Field

from speculator_arena.protocol.strict import _Strict


class GreedyProbe(_Strict):
    prompts: int = Field(ge=1)
    temperature: float = 0.0
    max_tokens: int = Field(ge=1)
    concurrency: int = 1


class LikelihoodProbe(_Strict):
    replies: int = Field(ge=2)
    context_tokens: int = Field(ge=1)
    reply_chars: int = Field(ge=1)


class FidelityProbe(_Strict):
    texts: int = Field(ge=1)


class FirstChoice(_Strict):
    """Section 6: the first-choice check reads the same replies and rows as sampled_likelihood;
    it has no settings of its own (its bound is a calibrated limit)."""


class LengthGate(_Strict):
    bound: float = Field(gt=0)  # |CI(delta)| beyond this fails


class MemoryGate(_Strict):
    slack_gib: float = Field(ge=0)
    # v2: a gap longer than this between memory samples (or the pass's ends) leaves the gate
    # "not measured"; None (v1) does not judge coverage.
    max_sample_gap_seconds: float | None = Field(default=None, gt=0)


class AnsweringGate(_Strict):
    max_unanswered_share: float = Field(ge=0, lt=1)
    # v2: an unanswered fidelity text counts its tokens at the worst per-token difference, and at
    # least this many nats; None (v1) leaves unanswered items out of the statistic.
    unanswered_fidelity_min_nats: float | None = Field(default=None, ge=0)


class Gates(_Strict):
    z: float = Field(gt=0)
    greedy_agreement: GreedyProbe
    sampled_likelihood: LikelihoodProbe
    first_choice: FirstChoice = Field(default_factory=FirstChoice)
    target_fidelity: FidelityProbe
    length: LengthGate
    memory: MemoryGate
    answering: AnsweringGate


class TaskGates(_Strict):
    """Per-task overrides of probe sizes (the embedded task uses fewer probes)."""

    greedy_agreement: GreedyProbe | None = None
    sampled_likelihood: LikelihoodProbe | None = None
    target_fidelity: FidelityProbe | None = None


class FailureRule(_Strict):
    min_excess: int = Field(ge=0)
    share_of_requests: float = Field(ge=0)


class Limits(_Strict):
    """Calibrated limits of section 10. `None` means "none": that gate always passes."""

    fidelity_ceiling: float = Field(ge=0)
    likelihood_bound: float = Field(ge=0)
    first_choice_bound: float = Field(ge=0)
    greedy_agreement_floor: float | None = Field(default=None, ge=0, le=1)


class SpeedNoise(_Strict):
    """Section 10: |SpecScore - 1| over the task's A/A evaluations (None until calibrated)."""

    mean_abs_error: float | None = Field(default=None, ge=0)
    max_abs_error: float | None = Field(default=None, ge=0)
