"""Which evaluations a task's calibration runs (protocol section 10, SCORING.md "Calibration").

At least four A/A evaluations (the task's stock reference, `kind: none`, submitted as the
candidate), every other reference of section 11 the task has, and, where the task is served by
the development engine (it plants the attacks of section 9), those planted attacks as negative
controls. Each run has a fixed evaluation id, `cal-<task>-v<candidate>-<name>`, so that a
calibration interrupted half-way and started again reuses what is stored and runs only the rest.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from speculator_arena.protocol import load_protocol

MIN_AA = 4

# name -> (engine directory, the gates of section 9 that should catch it, quantized?)
# (SCORING.md: the fidelity ceiling and the greedy agreement floor are set against the
# *quantized* controls; every control is reported as caught or not by the candidate's limits.)
CONTROLS: dict[str, tuple[str, tuple[str, ...], bool]] = {
    "loose-accept": ("engines/attacks/dev-loose-accept-all", ("sampled_likelihood", "first_choice"), False),
    "force-greedy": ("engines/attacks/dev-force-greedy", ("first_choice",), False),
    "other-sampling": ("engines/attacks/dev-other-sampling", ("first_choice", "sampled_likelihood", "length"), False),
    "quantized": ("engines/attacks/dev-quantized", ("target_fidelity",), True),
    "cut-half": ("engines/attacks/dev-cut-half", ("length",), False),
    "empty-probe-replies": ("engines/attacks/dev-empty-probe-replies", ("greedy_agreement",), False),
    "garbage-logprob-ids": ("engines/attacks/dev-garbage-logprob-ids", ("target_fidelity", "answering"), False),
}
# The memory hog needs a device to sample (section 7); on a CPU task the memory gate is not
# measured, so it cannot be a control there. skip_probe_items needs 11 or more fidelity texts.
DEV_ENGINE_PREFIX = "engines/dev-"


@dataclass(frozen=True)
class PlannedRun:
    name: str  # aa-1 .. aa-N, a reference's name, or a control's name
    role: str  # aa | reference | control
    engine: str
    honest: bool  # A/A and references meant to be lossless
    quantized: bool = False
    catches: tuple[str, ...] = ()  # controls: the gates that should catch it
    solution_kind: str = "none"

    def evaluation_id(self, task_id: str, candidate_version: int) -> str:
        return f"cal-{task_id}-v{candidate_version}-{self.name}"


@dataclass
class Plan:
    task_id: str
    base_version: int  # the version the runs are made and scored under
    candidate_version: int  # the version the candidate will be when published
    runs: list[PlannedRun] = field(default_factory=list)

    def ids(self) -> dict[str, str]:
        return {r.name: r.evaluation_id(self.task_id, self.candidate_version) for r in self.runs}

    def honest(self) -> list[PlannedRun]:
        return [r for r in self.runs if r.honest]

    def controls(self) -> list[PlannedRun]:
        return [r for r in self.runs if r.role == "control"]


def next_version() -> int:
    from speculator_arena.protocol import available_versions

    return available_versions()[-1] + 1


def plan(
    task_id: str,
    base_version: int | None = None,
    candidate_version: int | None = None,
    aa_runs: int = MIN_AA,
    controls: bool | None = None,
    not_honest: tuple[str, ...] = (),
) -> Plan:
    """The runs of one task's calibration.

    `controls`: None runs the planted attacks where the task is served by the development engine.
    `not_honest`: references known not to be lossless (the pinned vLLM's n-gram on qwen35-27b,
    section 10), which stay in the evidence but do not widen the honest runs' limits.
    """
    if aa_runs < MIN_AA:
        raise ValueError(f"a calibration needs at least {MIN_AA} A/A evaluations (section 10), not {aa_runs}")
    proto = load_protocol(base_version)
    task = proto.task(task_id).task
    stock = [r for r in task.references if r.kind == "none"]
    if not stock:
        raise KeyError(f"task {task_id} names no stock reference (kind: none): nothing to run as A/A")
    unknown = set(not_honest) - {r.name for r in task.references}
    if unknown:
        raise ValueError(f"--not-honest names no reference of {task_id}: {sorted(unknown)}")
    runs = [PlannedRun(f"aa-{i}", "aa", stock[0].engine, True) for i in range(1, aa_runs + 1)]
    runs += [
        PlannedRun(r.name, "reference", r.engine, r.name not in not_honest, solution_kind=r.kind)
        for r in task.references
        if r.kind != "none"
    ]
    if controls is None:
        controls = stock[0].engine.startswith(DEV_ENGINE_PREFIX)
    if controls:
        runs += [
            PlannedRun(name, "control", engine, False, quantized, catches, "other")
            for name, (engine, catches, quantized) in CONTROLS.items()
        ]
    return Plan(task_id, proto.version, candidate_version or next_version(), runs)
