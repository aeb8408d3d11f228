"""The `evaluation` asset: one dynamic partition per evaluation.

Materializing a partition runs the harness (speculator_arena.runners.harness) for that
evaluation on the `backend` resource's choice: in-process (local, the default) or in a GPU pod
(kubernetes, speculator_arena/backends/kubernetes); its raw rows are the asset's data, in the
warehouse. The materialization carries the status, the row counts and the evaluation's outcome
(it is scored once as it lands, so the quota's refund needs no scorer: scoring/outcomes.py), and
two checks of the partition: its raw rows complete and its gates' inputs present
(warehouse/completeness.py). Every caller reaches it through one launcher,
`dagster_project/launch.evaluate` (the CLI, `arena demo`, the queue worker, a calibration), on the
persistent Dagster instance under `$ARENA_HOME/dagster`, so `DAGSTER_HOME=$ARENA_HOME/dagster
dagster dev` shows every evaluation that ran, downstream of the pools it drew its sessions from.
The runner package itself never imports Dagster.
"""

import dagster as dg

from speculator_arena.assets.resources import WarehouseResource
from speculator_arena.backends.resource import EvaluationBackendResource

evaluation_partitions = dg.DynamicPartitionsDefinition(name="evaluations")
CHECKS = ("raw_rows_complete", "gate_inputs_present")


class EvaluationConfig(dg.Config):
    """The harness's EvaluationSpec as JSON: built once by whoever launches the evaluation (one
    builder per source: runners/spec.py) and run exactly as it was built."""

    spec: str


def run_config(spec) -> dict:
    """The run config that materializes `spec`'s partition."""
    return {"ops": {"evaluation": {"config": {"spec": spec.to_json()}}}}


@dg.asset(
    partitions_def=evaluation_partitions,
    group_name="evaluations",
    description="One paired evaluation: candidate passes, stock passes, gate probes, as raw warehouse rows.",
    # every evaluation draws its sessions from a task's served pool (the pool build's last asset)
    deps=[dg.AssetDep("pool_data_card", partition_mapping=dg.AllPartitionMapping())],
    check_specs=[dg.AssetCheckSpec(name, asset="evaluation") for name in CHECKS],
)
def evaluation(
    context: dg.AssetExecutionContext,
    config: EvaluationConfig,
    warehouse: WarehouseResource,
    backend: EvaluationBackendResource,
) -> dg.MaterializeResult:
    from dataclasses import replace

    from speculator_arena.runners.evaluate import summary
    from speculator_arena.runners.spec import EvaluationSpec

    spec = EvaluationSpec.from_json(config.spec)
    if spec.evaluation_id != context.partition_key:
        raise ValueError(f"the spec is for {spec.evaluation_id}, the partition {context.partition_key}")
    wh = warehouse.get()
    backend.run(spec, wh.home, context, progress=progress_lines(context))
    s = replace(summary(wh.home, spec.evaluation_id), outcome=_score(wh, spec.evaluation_id, context))
    meta = {
        "status": s.status,
        "reason": s.void_reason or s.failure_reason or "",
        "task_id": spec.task_id,
        "split": spec.split,
        "engine": spec.engine,
        "backend": backend.backend,
        "summary": dg.MetadataValue.json(s.to_dict()),
    }
    if s.outcome is not None:
        o = s.outcome
        meta.update(
            specscore=dg.MetadataValue.float(o.specscore) if o.specscore is not None else "blank",
            outcome=o.reason,
            void=o.void,
        )
    meta.update({f"rows_{t}": dg.MetadataValue.int(int(n)) for t, n in s.rows.items()})
    return dg.MaterializeResult(metadata=meta, check_results=_checks(wh, spec.evaluation_id))


def _score(wh, evaluation_id: str, context):
    """The evaluation scored once, under the version in force, as it lands: its outcome is then
    on file for the quota (scoring/outcomes.py) and in this materialization's metadata. A
    scoring that fails (a full disk, a broken row) is logged; the rows stay, `arena score` redoes it."""
    from speculator_arena.board import fill
    from speculator_arena.runners.summary import Outcome
    from speculator_arena.scoring.registry import score_and_record

    if _is_lowb_row(wh, evaluation_id):
        return _score_lowb(wh, evaluation_id, context)
    try:
        ev = score_and_record(wh, None, [evaluation_id], keep=fill).evaluations
    except Exception as exc:  # noqa: BLE001 - the evaluation's own rows are whole; only the copy is missing
        context.log.warning(f"{evaluation_id} not scored as it landed ({type(exc).__name__}: {exc}); run `arena score`")
        return None
    if ev.empty:
        return None
    r = ev.iloc[0]
    return Outcome(
        specscore=float(r["specscore"]) if r["specscore"] == r["specscore"] else None,
        reason=r["specscore_reason"] if isinstance(r["specscore_reason"], str) else "",
        void=bool(r["void"]),
    )


def _is_lowb_row(wh, evaluation_id: str) -> bool:
    from speculator_arena.protocol.lowb import is_lowb_task
    from speculator_arena.warehouse.evaluations import current_row

    row = current_row(wh, evaluation_id)
    return row is not None and is_lowb_task(row["task_id"])


def _score_lowb(wh, evaluation_id: str, context):
    """A LowBArena evaluation scored as it lands, by its own scorer (scoring/lowb): its LowBScore
    and the first missed gate, in this materialization's metadata."""
    from speculator_arena.runners.summary import Outcome
    from speculator_arena.scoring.lowb import score_lowb

    try:
        ev = score_lowb(wh, evaluation_ids=[evaluation_id]).evaluations
    except Exception as exc:  # noqa: BLE001 - the rows are whole; `arena score --arena lowbarena` redoes it
        context.log.warning(f"{evaluation_id} not scored as it landed ({type(exc).__name__}: {exc})")
        return None
    if ev.empty:
        return None
    r = ev.iloc[0]
    score = float(r["lowbscore"])
    return Outcome(specscore=score if score == score else None, reason=r["reason"] or "", void=False)


def _checks(wh, evaluation_id: str) -> list[dg.AssetCheckResult]:
    """The partition's checks: a measured evaluation's raw rows and gate inputs, complete."""
    from speculator_arena.warehouse import completeness

    row, task = completeness.judged(wh, evaluation_id)
    if task is None:
        why = f"not judged: the evaluation is {row['status'] if row else 'not stored'}"
        return [dg.AssetCheckResult(check_name=c, passed=True, description=why) for c in CHECKS]
    out = []
    for name, problems in (
        ("raw_rows_complete", completeness.missing_raw_rows(wh, evaluation_id, task)),
        ("gate_inputs_present", completeness.missing_gate_inputs(wh, evaluation_id, task)),
    ):
        out.append(
            dg.AssetCheckResult(
                check_name=name,
                passed=not problems,
                description="; ".join(problems[:20]) or "complete",
                metadata={"problems": dg.MetadataValue.int(len(problems))},
            )
        )
    return out


def progress_lines(context):
    """Progress lines to the terminal (as the runner prints them) and to the Dagster run log.
    A line the run log cannot store (its sqlite on a full disk) is on the terminal already and
    must not stop the evaluation: the runner's own writes say what failed."""
    import sys

    def say(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)
        try:
            context.log.info(msg)
        except Exception:  # noqa: BLE001 - the run log is a copy of what was printed
            pass

    return say
