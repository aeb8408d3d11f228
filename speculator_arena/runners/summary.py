"""What one evaluation came to, as the one door (`dagster_project/launch.evaluate`) returns it.

Why typed (issue 34): the door's callers (`arena evaluate`, `arena demo`, a calibration, the queue,
`benchmarks/aa_noise.py`) each read the summary, and as a dict parsed by key every one of them
spelled out its own `summary.get("outcome") or {}` and its own idea of "why"; a key renamed in one
place failed elsewhere at run time. Here the fields are named once, with the three questions every
caller asks (`why`, `contended`, `scored`), and the dict form (`to_dict`/`from_dict`) is only the
wire format: the evaluation asset's Dagster metadata and `arena evaluate`'s JSON.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

from speculator_arena.rules.status import RANKED, VOID

CONTENDED = "host contended"  # the words of a void for host contention (runner's and scorer's)


@dataclass(frozen=True)
class Outcome:
    """The scorer's verdict as the evaluation landed: a SpecScore, 0 or void, with the reason."""

    specscore: float | None
    reason: str
    void: bool


@dataclass(frozen=True)
class Attempt:
    """One attempt of an evaluation the door made again (a contended void), and how it ended."""

    evaluation_id: str
    status: str | None
    why: str


@dataclass(frozen=True)
class EvaluationSummary:
    """One evaluation's stored status, reasons and row counts; its outcome once scored (None when
    the landing could not score it: `arena score` redoes it); `attempts`, every attempt's id and
    how it ended (the door fills it: one entry unless a contended run was made again)."""

    evaluation_id: str
    status: str | None
    void_reason: str | None = None
    failure_reason: str | None = None
    rows: dict[str, int] = field(default_factory=dict)
    home: str = ""
    outcome: Outcome | None = None
    attempts: tuple[Attempt, ...] = ()

    @property
    def why(self) -> str:
        """Its reason in one line: the runner's, else the scorer's."""
        return self.void_reason or self.failure_reason or (self.outcome.reason if self.outcome else "") or ""

    @property
    def contended(self) -> bool:
        """Void because the host was contended (the runner's stop, or the scorer's judgment of its
        stored passes): an operator makes such a run again (SCORING.md "Host contention")."""
        runner = self.status == VOID and CONTENDED in self.why
        scorer = self.outcome is not None and self.outcome.void and CONTENDED in self.outcome.reason
        return runner or scorer

    @property
    def scored(self) -> bool:
        """Measured (or failed: 0), and scored to a number or 0 (not void) as it landed."""
        return self.status in RANKED and not (self.outcome is not None and self.outcome.void)

    def with_attempts(self, attempts: list[EvaluationSummary]) -> EvaluationSummary:
        return replace(self, attempts=tuple(Attempt(a.evaluation_id, a.status, a.why) for a in attempts))

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> EvaluationSummary:
        o = d.get("outcome")
        return cls(
            evaluation_id=d["evaluation_id"],
            status=d.get("status"),
            void_reason=d.get("void_reason"),
            failure_reason=d.get("failure_reason"),
            rows=dict(d.get("rows") or {}),
            home=d.get("home") or "",
            outcome=Outcome(**o) if o else None,
            attempts=tuple(Attempt(**a) for a in d.get("attempts") or ()),
        )
