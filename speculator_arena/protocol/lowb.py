"""LowBArena's protocol as versioned, validated data (lowb_versions/pN.yaml), apart from the speculator's.

Why a model of its own and not sections of `Protocol`: the two arenas' rules change on their own
schedules, and a change of LowBArena's rules must re-score LowBArena evaluations and nothing else
(issue 50). So its versions are their own files, numbered in their own series (`p28` is the rules'
"protocol 28"), found in the same three places as the speculator's versions, in the same order:
shipped with the package (`lowb_versions/pN.yaml`), published by an operator
(`$ARENA_HOME/protocol/lowb_versions/pN.yaml`), staged by hand (`$ARENA_PROTOCOL_DIR/lowb-pN.yaml`,
named apart so that a staged speculator version `vN.yaml` beside it is never read as one of these).
A later place may add a version, never replace one: versions are immutable.

Every model is strict (strict.py): a misspelt constant fails at load, never scores with a default.
"""

from __future__ import annotations

import math
import re
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, model_validator

from speculator_arena import settings
from speculator_arena.protocol.serving import Contention, DeviceIdle, StartStop
from speculator_arena.protocol.strict import _Strict
from speculator_arena.protocol.version_files import document_digest

ENGINES = ("candidate", "stock")  # stock: BF16 of the task's model, served beside the candidate


class LowbScoreRule(_Strict):
    """LowBScore = g * T^a_T * P^a_P * A^a_A; g is 1, `missed_gate_factor` or (a zero gate missed) 0."""

    axis_exponents: dict[Literal["T", "P", "A"], float]
    missed_gate_factor: float = Field(ge=0, le=1)
    contract_or_engine_rule_score: float = Field(ge=0)
    zero_score_gates: list[str]

    @model_validator(mode="after")
    def _every_axis(self) -> LowbScoreRule:
        if set(self.axis_exponents) != {"T", "P", "A"}:
            raise ValueError(f"axis_exponents must name T, P and A, got {sorted(self.axis_exponents)}")
        return self


class Throughput(_Strict):
    """T's workloads; those in `single_speed_workloads` are timed per output token, the others by
    output tokens per second of the whole pass."""

    workloads: list[str]
    batch_speed: Literal["output_tokens_per_second"]
    single_speed: Literal["time_per_output_token"]
    single_speed_workloads: list[str]


class Capacity(_Strict):
    workloads: list[str]
    charge_every_request_in_flight: bool


class Accuracy(_Strict):
    """D = drop_weight * drop + kl_weight * points_per_nat * KL; A = exp(-max(D, 0) / scale)."""

    drop_weight: float
    kl_weight: float
    points_per_nat: float
    scale: float = Field(gt=0)
    runs_scored: int = Field(ge=1)
    runs_dev: int = Field(ge=1)
    kl_top_k: int = Field(ge=1)
    kl_probability_floor: float = Field(gt=0, lt=1)


class AccuracyGate(_Strict):
    z_one_sided: float = Field(gt=0)
    max_drop_points: dict[str, float]  # by tier


class SpeedGate(_Strict):
    """Passes when speed_gmean - z * noise / sqrt(workloads_root) >= the task's speed floor."""

    z_one_sided: float = Field(gt=0)
    noise: float = Field(ge=0)
    workloads_root: int = Field(ge=1)

    @property
    def margin(self) -> float:
        return self.z_one_sided * self.noise / math.sqrt(self.workloads_root)


class LengthGate(_Strict):
    max_relative_change: float = Field(gt=0)


class ContractGate(_Strict):
    max_other_tensor_share: float = Field(ge=0, le=1)
    max_kl_nats_per_token: float = Field(gt=0)
    companion_suffixes: list[str]
    unquantized_dtypes: list[str]
    decoder_linear_pattern: str
    exempt_reference_kinds: list[str]

    @model_validator(mode="after")
    def _pattern_compiles(self) -> ContractGate:
        re.compile(self.decoder_linear_pattern)
        return self


class EngineRulesGate(_Strict):
    answer_every_kl_prompt: bool
    unprivileged: bool


class LowbGates(_Strict):
    accuracy: AccuracyGate
    speed: SpeedGate
    length: LengthGate
    contract: ContractGate
    engine_rules: EngineRulesGate
    order: list[str]

    @model_validator(mode="after")
    def _order_names_every_gate(self) -> LowbGates:
        gates = {"accuracy", "speed", "length", "contract", "engine_rules"}
        if sorted(self.order) != sorted(gates):
            raise ValueError(f"gates.order must list each of {sorted(gates)} once, got {self.order}")
        return self


class Memory(_Strict):
    sample_interval_seconds: float = Field(gt=0)
    idle_seconds: float = Field(gt=0)


class LowbSampling(_Strict):
    temperature: float = Field(ge=0)
    top_p: float = Field(gt=0, le=1)
    top_k: int
    seed_per_request: bool


class Domain(_Strict):
    benchmarks: list[str]
    gated: bool


class KlProbe(_Strict):
    prompts: dict[Literal["dev", "test"], int]


class TaskKlProbe(KlProbe):
    max_prompt_tokens: int = Field(ge=1)


class DeviceHours(_Strict):
    counted: str
    not_counted: list[str]


class LowbWorkload(_Strict):
    requests: int = Field(ge=1)
    prompt_tokens: int = Field(ge=1)
    generated_tokens: int = Field(ge=1)
    at_once: int = Field(ge=1)
    passes: int = Field(ge=1)


class Items(_Strict):
    max_tokens: int = Field(ge=1)
    per_domain: dict[Literal["dev", "test"], int | None]  # None: every item of the declared sources
    ruler_context_tokens: int = Field(ge=1)


class LowbReference(_Strict):
    name: str
    kind: str
    engine: str
    artifact: str | None = None


class AaNoise(_Strict):
    """BF16 beside itself on the task's machine, several times (`arena calibrate`, calibration/lowb.py): the
    largest |1 - LowBScore| and |1 - speed gains' geometric mean| over the runs. The board flags
    an A/A outside it; a measurement noise, not a rule of the score."""

    runs: int = Field(ge=2)
    max_abs_error: float = Field(ge=0)
    speed_max_abs_error: float = Field(ge=0)
    evidence: str


class LowbTask(_Strict):
    public: bool
    model: str
    revision: str
    gpu: str
    device: Literal["cpu", "cuda"]
    tier: str
    speed_floor: float = Field(gt=0)
    dtype: str
    max_model_len: int = Field(gt=0)
    scaling: str | None = None  # how a task scaled to a smaller machine derives from the rules' sizes
    workloads: dict[str, LowbWorkload]
    items: Items
    kl_probe: TaskKlProbe
    references: list[LowbReference]
    aa_noise: AaNoise | None = None  # None: not calibrated on its machine yet


class Runner(_Strict):
    """How the runner serves both engines (the same machinery as the speculator arena's runner,
    with the same section types): start and stop limits, the device-idle wait after a stop, the
    host-contention rule of a timed pass, the engines' memory utilization and prefix caching,
    and how long one pass may take before its unanswered requests are failures."""

    start_stop: StartStop
    device_idle: DeviceIdle
    contention: Contention
    gpu_memory_utilization: float = Field(gt=0, le=1)
    prefix_caching: int
    pass_timeout_seconds: float = Field(gt=0)


class LowbProtocol(_Strict):
    arena: Literal["lowbarena"]
    version: int = Field(ge=1)
    published: str
    notes: str = ""
    score: LowbScoreRule
    throughput: Throughput
    capacity: Capacity
    accuracy: Accuracy
    gates: LowbGates
    memory: Memory
    sampling: LowbSampling
    domains: dict[str, Domain]
    quotas: dict[str, dict[Literal["dev", "test"], int]]
    kl_probe: KlProbe
    device_hours: DeviceHours
    shown_not_scored: list[str]
    runner: Runner
    tasks: dict[str, LowbTask]

    @model_validator(mode="after")
    def _consistent(self) -> LowbProtocol:
        workloads = set(self.throughput.workloads)
        if (
            not set(self.capacity.workloads) <= workloads
            or not set(self.throughput.single_speed_workloads) <= workloads
        ):
            raise ValueError("capacity and single-speed workloads must be throughput workloads")
        if not set(self.score.zero_score_gates) <= set(self.gates.order):
            raise ValueError(f"zero_score_gates {self.score.zero_score_gates} must be gates of {self.gates.order}")
        for name, t in self.tasks.items():
            if set(t.workloads) != workloads:
                raise ValueError(
                    f"task {name}: workloads must be exactly {sorted(workloads)}, got {sorted(t.workloads)}"
                )
            if t.tier not in self.gates.accuracy.max_drop_points:
                raise ValueError(f"task {name}: tier {t.tier!r} has no max_drop_points")
        return self

    def task(self, task_id: str) -> LowbTask:
        if task_id not in self.tasks:
            raise KeyError(f"LowBArena protocol p{self.version} has no task {task_id!r}; tasks: {sorted(self.tasks)}")
        return self.tasks[task_id]

    def max_drop_points(self, task_id: str) -> float:
        """The accuracy gate's limit for the task's tier."""
        return float(self.gates.accuracy.max_drop_points[self.task(task_id).tier])

    def gated_domains(self) -> list[str]:
        return [d for d, spec in self.domains.items() if spec.gated]

    def quota(self, account_kind: str, split: str) -> int:
        return int(self.quotas[account_kind][split])


# ---- where the versions are ------------------------------------------------------------------


def _version_dirs() -> list[tuple[Any, str]]:
    """(directory, file-name pattern) in reading order: shipped, published, staged."""
    dirs: list[tuple[Any, str]] = [
        (resources.files("speculator_arena.protocol") / "lowb_versions", r"p(\d+)\.yaml"),
        (settings.arena_home() / "protocol" / "lowb_versions", r"p(\d+)\.yaml"),
    ]
    staged = settings.get("ARENA_PROTOCOL_DIR")
    if staged:
        dirs.append((Path(staged), r"lowb-p(\d+)\.yaml"))
    return dirs


def lowb_version_files() -> dict[int, Any]:
    """Version number -> its file; the first place that has a version keeps it."""
    found: dict[int, Any] = {}
    for d, pattern in _version_dirs():
        if not d.is_dir():
            continue
        for entry in d.iterdir():
            m = re.fullmatch(pattern, entry.name)
            if m:
                found.setdefault(int(m.group(1)), entry)
    return found


def lowb_available_versions() -> list[int]:
    return sorted(lowb_version_files())


def _text(version: int) -> str:
    path = lowb_version_files().get(version)
    if path is None:
        raise KeyError(f"no LowBArena protocol version {version}; available: {lowb_available_versions()}")
    return path.read_text(encoding="utf-8")


def load_lowb_protocol(version: int | None = None) -> LowbProtocol:
    """Load and validate a LowBArena version (the latest when `version` is None)."""
    if version is None:
        versions = lowb_available_versions()
        if not versions:
            raise KeyError("no LowBArena protocol version found")
        version = versions[-1]
    return _parse(version, _text(version))


@lru_cache(maxsize=32)
def _parse(version: int, text: str) -> LowbProtocol:
    proto = LowbProtocol.model_validate(yaml.safe_load(text))
    if proto.version != version:
        raise ValueError(f"LowBArena p{version}.yaml declares version {proto.version}")
    return proto


def lowb_task_ids() -> list[str]:
    """Every LowBArena task of any version: what tells a LowBArena evaluation from a speculator one."""
    return sorted({t for v in lowb_available_versions() for t in load_lowb_protocol(v).tasks})


def is_lowb_task(task_id: str) -> bool:
    return task_id in lowb_task_ids()


def lowb_protocol_document(version: int | None = None) -> dict[str, Any]:
    """What `GET /api/protocol` serves for LowBArena: every constant of the version as JSON, its
    digest (sha256 of the YAML's canonical JSON, as the speculator's versions are pinned), and the
    figures the rules quote that are derived from constants (the speed gate's margin)."""
    proto = load_lowb_protocol(version)
    doc = proto.model_dump(mode="json")
    doc["digest"] = document_digest(yaml.safe_load(_text(proto.version)))
    doc["derived"] = {"speed_gate_margin": proto.gates.speed.margin}
    return doc
