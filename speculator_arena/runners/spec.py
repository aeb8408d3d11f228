"""What one evaluation is asked to be (`EvaluationSpec`), and the one builder of it per source.

Why one module: a spec is built from the CLI's arguments, a task's reference (`arena demo`), a
submission's row (the queue), a calibration plan's run (and its m/c fit), a sweep's point
(`arena sweep`) and the kubernetes example pod; each source has its builder here, and nothing else calls `EvaluationSpec(...)`
(tests/runners/test_spec.py keeps it so), so that what a field means and what it defaults to
is decided in one place. The builders take plain values: the runner imports nothing of the
front door, the calibration or the backends that call them.

The spec travels as JSON, field for field (`to_json`: the `evaluation` asset's config, the
pod's `--spec`), and is run exactly as it was built.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from speculator_arena.protocol import load_protocol
from speculator_arena.protocol.model import Reference
from speculator_arena.rules.accounts import REFERENCES_ACCOUNT

# The repository this code runs from: engines named relative to it (`engines/dev-ngram`), the
# engines' PYTHONPATH and the code commit in the provenance.
REPO = Path(__file__).resolve().parents[2]


@dataclass
class EvaluationSpec:
    task_id: str
    engine: str
    split: str = "dev"
    evaluation_id: str = ""
    stock_engine: str | None = None
    label: str | None = None
    account_id: str | None = None
    submission_id: str | None = None
    is_reference: bool = False
    solution_kind: str = "other"
    speculator: str | None = None
    target: str | None = None  # a prepared target directory (default: prepare_checkpoint)
    # LowBArena: the candidate's checkpoint (a sealed quantized checkpoint; None serves the target
    # itself, BF16's A/A)
    artifact: str | None = None
    protocol_version: int | None = None
    # the calibration's m/c fit: short stock passes instead of the paired evaluation
    # (runners/fit_plan.py check_plan: workload, seconds, points)
    fit: dict | None = None

    def __post_init__(self):
        if self.split not in ("dev", "test"):
            raise ValueError(f"split must be dev or test, not {self.split!r}")
        if self.fit is not None:
            from speculator_arena.runners.fit_plan import check_plan

            self.fit = check_plan(self.fit)
            if self.split != "dev" or self.is_reference:
                raise ValueError("the m/c fit runs on the dev split and is never a reference")
        if not self.evaluation_id:
            self.evaluation_id = new_evaluation_id(self.task_id)

    def to_json(self) -> str:
        """What the `evaluation` asset's config carries: this spec, as built, field for field."""
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> EvaluationSpec:
        return cls(**json.loads(text))

    def again(self) -> EvaluationSpec:
        """The same evaluation asked again under a fresh id (a contended run made again)."""
        return replace(self, evaluation_id=new_evaluation_id(self.task_id))


def new_evaluation_id(task_id: str) -> str:
    return f"{task_id}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{uuid.uuid4().hex[:6]}"


def resolve_engine_path(path: str) -> Path:
    p = Path(path)
    if not p.is_absolute() and not p.exists() and (REPO / p).exists():
        p = REPO / p
    if not p.exists():
        raise FileNotFoundError(f"engine directory not found: {path}")
    return p.resolve()


def default_stock_engine(task_id: str, version: int | None = None) -> str:
    """The task's stock engine: its reference of kind `none` (a LowBArena task: its BF16 reference,
    the stock engine serving the target itself)."""
    from speculator_arena.protocol.lowb import is_lowb_task, load_lowb_protocol

    if is_lowb_task(task_id):
        for ref in load_lowb_protocol(version).task(task_id).references:
            if ref.kind == "bf16" and not ref.artifact:
                return ref.engine
        raise KeyError(f"LowBArena task {task_id} names no BF16 reference")
    task = load_protocol(version).tasks[task_id]
    for ref in task.references:
        if ref.kind == "none":
            return ref.engine
    raise KeyError(f"task {task_id} names no stock reference (kind: none)")


def stock_engine_of(spec: EvaluationSpec) -> str:
    """The stock engine the spec is paired with: the one it names, else its task's stock reference."""
    return spec.stock_engine or default_stock_engine(spec.task_id, spec.protocol_version)


# ---- one builder per source ----------------------------------------------------------------
def spec_from_args(args) -> EvaluationSpec:
    """`arena evaluate` and `python -m speculator_arena.runners.evaluate` (runners/evaluate.py's arguments)."""
    if not args.task or not args.engine:
        raise ValueError("--task and --engine are required (or --resume ID)")
    fit = None
    if getattr(args, "fit", None):
        from speculator_arena.runners.fit_plan import plan_from_text

        seconds = args.fit_seconds or load_protocol(None).task(args.task).workloads["busy"].pass_seconds
        fit = plan_from_text(args.fit, seconds)
    return EvaluationSpec(
        fit=fit,
        task_id=args.task,
        engine=args.engine,
        split=args.split,
        evaluation_id=args.evaluation_id or "",
        stock_engine=args.stock_engine,
        label=args.label,
        account_id=args.account,
        is_reference=args.reference,
        solution_kind=args.kind,
        speculator=args.speculator,
        target=args.target,
    )


def reference_spec(task_id: str, ref: Reference, target: str, artifact: str | None = None) -> EvaluationSpec:
    """One of a task's references against the stock engine on the dev split (`arena demo`);
    `artifact`: a LowBArena reference's checkpoint, made from the target (checkpoints/quantize.py)."""
    return EvaluationSpec(
        artifact=artifact,
        task_id=task_id,
        engine=ref.engine,
        split="dev",
        label=ref.name,
        is_reference=True,
        solution_kind=ref.kind,
        account_id=REFERENCES_ACCOUNT,
        speculator=None,
        target=target,
    )


def submission_spec(
    *,
    task_id: str,
    engine_dir: str,
    split: str,
    evaluation_id: str,
    account_name: str,
    account_id: str,
    submission_id: str,
    solution_kind: str,
    speculator_dir: str | None,
    artifact_dir: str | None = None,
) -> EvaluationSpec:
    """An accepted submission (the front door's row, field by field): its sealed engine and
    speculator (a LowBArena submission: its sealed quantized checkpoint as `artifact`), the id
    fixed at intake, labelled with the account's name."""
    return EvaluationSpec(
        artifact=artifact_dir or None,
        task_id=task_id,
        engine=engine_dir,
        split=split,
        evaluation_id=evaluation_id,
        label=account_name,
        account_id=account_id,
        submission_id=submission_id,
        is_reference=False,
        solution_kind=solution_kind,
        speculator=speculator_dir or None,
    )


def calibration_spec(
    *,
    task_id: str,
    engine: str,
    evaluation_id: str,
    label: str,
    account_id: str,
    protocol_version: int | None,
    target: str | None,
    solution_kind: str = "other",
    fit: dict | None = None,
) -> EvaluationSpec:
    """A calibration's run (a planned run, or with `fit` the m/c fit's stock passes), made under
    the plan's base version on the dev split, never a reference."""
    return EvaluationSpec(
        fit=fit,
        task_id=task_id,
        engine=engine,
        evaluation_id=evaluation_id,
        label=label,
        account_id=account_id,
        is_reference=False,
        solution_kind=solution_kind,
        target=target,
        protocol_version=protocol_version,
    )


def sweep_spec(
    *, task_id: str, engine: str, evaluation_id: str, label: str, solution_kind: str, target: str | None
) -> EvaluationSpec:
    """One point of `arena sweep` (runners/sweep_plan.py): the point's engine copy against the
    stock engine on the dev split (a sweep never reads the hidden pool), under its fixed id,
    never a reference."""
    return EvaluationSpec(
        task_id=task_id,
        engine=engine,
        split="dev",
        evaluation_id=evaluation_id,
        label=label,
        is_reference=False,
        solution_kind=solution_kind,
        target=target,
    )


def example_pod_spec(task_id: str, version: int | None, target: str) -> EvaluationSpec:
    """The example evaluation of `arena k8s manifests`: the task's stock reference against itself."""
    stock = default_stock_engine(task_id, version)
    return EvaluationSpec(
        task_id=task_id,
        engine=stock,
        stock_engine=stock,
        evaluation_id=f"{task_id}-example",
        label="example",
        target=target,
        protocol_version=version,
    )
