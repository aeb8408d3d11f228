"""Pydantic model of a protocol version and the per-task view that code reads limits from.

Why per-task resolution: the public tasks share most values, while the embedded
`local-smollm2` task overrides pass times and probe counts; code asks `protocol.task(task_id)`
and never merges by hand. Here: the document (`Protocol`), its tasks (`Task`), the per-task
view (`TaskProtocol`) and loading a version (`load_protocol`). The sections they name are
models of their own modules: how the engines are served (serving.py), the gates and limits
(gates.py), on one strict base (strict.py); where the versions are and their digests,
version_files.py.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Literal

import yaml
from pydantic import Field, model_validator

from speculator_arena.protocol.gates import FailureRule, Gates, Limits, SpeedNoise, TaskGates
from speculator_arena.protocol.serving import (
    Contention,
    DeviceIdle,
    EngineEnvironment,
    Interleaving,
    Sampling,
    StartStop,
    ThinkTime,
    Window,
    Workload,
)
from speculator_arena.protocol.strict import _Strict
from speculator_arena.protocol.version_files import _raw_text, available_versions, protocol_digest

WORKLOADS = ("solo", "team", "busy")

# How the two engines take turns on the machine (the pairing of protocol section 4):
# - sequential: the candidate serves every pass, then the stock engine (one start each);
# - mirrored: candidate, stock, stock, candidate; each engine's first start serves the first
#   half of every workload's passes and its second start the other half, so each pass pair has
#   the candidate first in one half and the stock first in the other, and whatever favours an
#   engine for being started first, or later, falls on both alike (docs/benchmarks/aa_noise.md);
# - interleaved (CPU tasks: local-smollm2 from v8, local-smollm2-vllm from v14): both engines
#   started once and resident, each as a user and in control groups of its own; every pass is served by one, then the other, the idle one frozen,
#   in the order A B, B A, B A, A B, ... (A drawn per evaluation), so the machine's drift over
#   minutes falls on both engines alike (runners/interleaved.py, docs/scoring.md "Pairing").
PAIRINGS = ("sequential", "mirrored", "interleaved")
# The engine variables a task may fix for both engines alike (the CPU allocator's huge pages,
# the CPU threads): the runner's placement variables (runners/engines.py) that a version may set.
TASK_PLACEMENT_VARIABLES = ("THP_MEM_ALLOC_ENABLE", "OMP_NUM_THREADS")


class GoodputObjective(_Strict):
    """Goodput's objectives for one workload (shown, never scored): a request is good when it is
    counted, its TTFT is at most `ttft_seconds` and its TPOT at most `tpot_seconds` (vLLM's,
    GuideLLM's and AIPerf's goodput). Absent in v1 and v2: the board then uses its own default
    (board/goodput.py) and says so."""

    ttft_seconds: float = Field(gt=0)
    tpot_seconds: float = Field(gt=0)


def _every_workload_objective(goodput: dict[str, GoodputObjective] | None) -> None:
    if goodput is not None and set(goodput) != set(WORKLOADS):
        raise ValueError(f"goodput must name exactly {WORKLOADS}, got {sorted(goodput)}")


class Submission(_Strict):
    inline_engine_max_chars: int
    repository_engine_max_mib: int
    speculator_max_share_of_target_bytes: float
    speculator_allowed_files: list[str]
    kinds: list[str]


class Reference(_Strict):
    name: str
    kind: str
    engine: str
    speculator: str | None = None


class Task(_Strict):
    public: bool
    model: str
    revision: str
    gpu: str
    max_model_len: int = Field(gt=0)
    language_model_only: bool
    dtype: str
    lanes: dict[str, int]
    kv_cache_tokens: int
    mean_session_footprint_tokens: int
    limits: Limits
    speed_noise: SpeedNoise
    references: list[Reference]
    workloads: dict[str, Workload] | None = None
    passes_per_workload: int | None = None
    grace_seconds: float | None = None
    max_tokens_cap: int | None = None
    think_time: ThinkTime | None = None
    gates: TaskGates | None = None
    start_stop: StartStop | None = None
    device_idle: DeviceIdle | None = None
    # set by a task's calibration (5 x its worst A/A noise); the protocol's value otherwise
    dev_test_gap: float | None = Field(default=None, ge=0, lt=1)
    goodput: dict[str, GoodputObjective] | None = None  # this task's objectives, over the protocol's
    pairing: Literal[PAIRINGS] | None = None  # sequential when absent
    interleaving: Interleaving | None = None  # required by the interleaved pairing
    placement: dict[str, str] | None = None  # engine variables fixed for both engines (v4 on)
    # another task of the version whose sealed target, tokenizer and session pools this task uses
    # (v6 on: local-smollm2-vllm serves local-smollm2's model and sessions with another stock engine)
    target_task: str | None = None
    # each engine's time on a timed pass less the CPU time the hypervisor took from the machine
    # meanwhile (v11 on, the embedded CPU task; docs/scoring.md "Steal correction")
    steal_correction: bool = False

    @model_validator(mode="after")
    def _every_workload_has_lanes(self) -> Task:
        if set(self.lanes) != set(WORKLOADS):
            raise ValueError(f"lanes must name exactly {WORKLOADS}, got {sorted(self.lanes)}")
        _every_workload_objective(self.goodput)
        unknown = sorted(set(self.placement or {}) - set(TASK_PLACEMENT_VARIABLES))
        if unknown:
            raise ValueError(f"placement may set only {TASK_PLACEMENT_VARIABLES}, got {unknown}")
        if (self.pairing == "interleaved") != (self.interleaving is not None):
            raise ValueError("the interleaved pairing and its `interleaving` values go together")
        return self


class Protocol(_Strict):
    version: int = Field(ge=1)
    published: str
    notes: str = ""
    engine_environment: EngineEnvironment
    sampling: Sampling
    window: Window
    think_time: ThinkTime
    workloads: dict[str, Workload]
    passes_per_workload: int = Field(ge=1)
    warmup_waves: int = Field(ge=0)
    grace_seconds: float = Field(ge=0)
    gates: Gates
    failure_rule: FailureRule
    start_stop: StartStop
    device_idle: DeviceIdle
    submission: Submission
    quotas: dict[str, dict[str, int]]
    dev_test_gap: float = Field(ge=0, lt=1)
    # SCORING.md "Counted requests": a reply counts up to max_tokens + this slack (v1: 0).
    count_slack_tokens: int = Field(default=0, ge=0)
    contention: Contention | None = None
    # goodput's TTFT and TPOT objectives per workload (shown, never scored); absent in v1 and v2
    goodput: dict[str, GoodputObjective] | None = None
    tasks: dict[str, Task]

    @model_validator(mode="after")
    def _workloads_complete(self) -> Protocol:
        if set(self.workloads) != set(WORKLOADS):
            raise ValueError(f"workloads must be exactly {WORKLOADS}, got {sorted(self.workloads)}")
        _every_workload_objective(self.goodput)
        for name, t in self.tasks.items():
            src = self.tasks.get(t.target_task) if t.target_task else t
            if src is None or src.target_task or (src.model, src.revision) != (t.model, t.revision):
                raise ValueError(
                    f"task {name}: target_task {t.target_task!r} must name a task of this version with its own "
                    "target and the same model and revision"
                )
        return self

    def task(self, task_id: str) -> TaskProtocol:
        if task_id not in self.tasks:
            raise KeyError(f"protocol v{self.version} has no task {task_id!r}; tasks: {sorted(self.tasks)}")
        return TaskProtocol.resolve(self, task_id)

    def quota(self, account_kind: str, split: str) -> int:
        """Section 8: submissions an account of this kind may make per task and split."""
        if account_kind not in self.quotas or split not in self.quotas[account_kind]:
            raise KeyError(f"protocol v{self.version} sets no quota for {account_kind!r} on {split!r}")
        return int(self.quotas[account_kind][split])

    def public_tasks(self) -> list[str]:
        return [t for t, spec in self.tasks.items() if spec.public]

    def as_document(self) -> dict[str, Any]:
        """What `GET /api/protocol` serves and `arena protocol --json` prints."""
        doc = self.model_dump(mode="json")
        doc["digest"] = protocol_digest(self.version)
        return doc


class TaskProtocol(_Strict):
    """Every value one task's evaluation needs, with the task's overrides applied."""

    protocol_version: int
    task_id: str
    task: Task
    engine_environment: EngineEnvironment
    sampling: Sampling
    window: Window
    think_time: ThinkTime
    workloads: dict[str, Workload]
    lanes: dict[str, int]
    passes_per_workload: int
    warmup_waves: int
    grace_seconds: float
    max_tokens_cap: int | None
    gates: Gates
    limits: Limits
    failure_rule: FailureRule
    start_stop: StartStop
    device_idle: DeviceIdle
    dev_test_gap: float
    count_slack_tokens: int
    contention: Contention | None
    goodput: dict[str, GoodputObjective] | None = None  # the task's, else the protocol's, else none
    pairing: Literal[PAIRINGS] = "sequential"
    interleaving: Interleaving | None = None
    placement: dict[str, str] = {}
    steal_correction: bool = False

    @model_validator(mode="after")
    def _mirrored_halves(self) -> TaskProtocol:
        if self.pairing == "mirrored" and self.passes_per_workload % 2:
            raise ValueError(
                f"{self.task_id}: mirrored pairing splits each workload's passes in two halves, "
                f"so passes_per_workload must be even (got {self.passes_per_workload})"
            )
        if self.steal_correction and self.contention is None:
            raise ValueError(f"{self.task_id}: the steal correction is bounded by the contention limits; set them")
        return self

    def pass_halves(self) -> list[tuple[str, range]]:
        """The timed starts in order, each (engine, the pass indices it serves in every workload)."""
        n = self.passes_per_workload
        if self.pairing == "interleaved":
            raise ValueError(f"{self.task_id}: the interleaved pairing has no halves (runners/interleaved.py)")
        if self.pairing == "sequential":
            return [("candidate", range(n)), ("stock", range(n))]
        first, second = range(n // 2), range(n // 2, n)
        return [("candidate", first), ("stock", first), ("stock", second), ("candidate", second)]

    @classmethod
    def resolve(cls, p: Protocol, task_id: str) -> TaskProtocol:
        t = p.tasks[task_id]
        gates = p.gates
        if t.gates is not None:
            gates = gates.model_copy(
                update={
                    k: getattr(t.gates, k)
                    for k in ("greedy_agreement", "sampled_likelihood", "target_fidelity")
                    if getattr(t.gates, k) is not None
                }
            )
            # model_copy(update=) keeps plain dicts; re-validate so nested models are models.
            gates = Gates.model_validate(gates.model_dump())
        return cls(
            protocol_version=p.version,
            task_id=task_id,
            task=t,
            engine_environment=p.engine_environment,
            sampling=p.sampling,
            window=p.window,
            think_time=t.think_time or p.think_time,
            workloads=t.workloads or p.workloads,
            lanes=t.lanes,
            passes_per_workload=t.passes_per_workload or p.passes_per_workload,
            warmup_waves=p.warmup_waves,
            grace_seconds=t.grace_seconds if t.grace_seconds is not None else p.grace_seconds,
            max_tokens_cap=t.max_tokens_cap,
            gates=gates,
            limits=t.limits,
            failure_rule=p.failure_rule,
            start_stop=t.start_stop or p.start_stop,
            device_idle=t.device_idle or p.device_idle,
            dev_test_gap=t.dev_test_gap if t.dev_test_gap is not None else p.dev_test_gap,
            count_slack_tokens=p.count_slack_tokens,
            contention=p.contention,
            goodput=t.goodput if t.goodput is not None else p.goodput,
            pairing=t.pairing or "sequential",
            interleaving=t.interleaving,
            placement=t.placement or {},
            steal_correction=t.steal_correction,
        )

    @property
    def max_num_seqs(self) -> int:
        return max(self.lanes.values())


def load_protocol(version: int | None = None) -> Protocol:
    """Load and validate a protocol version (the latest when `version` is None)."""
    if version is None:
        version = available_versions()[-1]
    return _load_text(version, _raw_text(version))


@lru_cache(maxsize=32)
def _load_text(version: int, text: str) -> Protocol:
    data = yaml.safe_load(text)
    proto = Protocol.model_validate(data)
    if proto.version != version:
        raise ValueError(f"v{version}.yaml declares version {proto.version}")
    return proto


def target_task(task_id: str) -> str:
    """The task whose sealed target, tokenizer and session pools `task_id` uses: its `target_task`
    in the latest version that has it, else itself (a task unknown to every version too, so that
    the caller's own error names it). Checkpoints, pools and tokenizers are kept per target task:
    a task that only pairs another stock engine with the same model and sessions (v6's
    local-smollm2-vllm) reuses them rather than building a copy that could drift apart."""
    for version in reversed(available_versions()):
        tasks = load_protocol(version).tasks
        if task_id in tasks:
            return tasks[task_id].target_task or task_id
    return task_id
