"""An evaluation's first row: `queued`, written once, before any engine runs.

Why a function of its own: the row is written by the harness (`Evaluation.run()` calls `queue`
first) and, where a launcher needs it before the harness starts elsewhere, by that launcher
(the kubernetes backend, before its pod starts; the pod's own runner); nobody else writes it.
It is idempotent: an evaluation already stored keeps its row, whatever its status, and
`queue` returns it, so a second caller can neither reset a running or finished evaluation nor
write a second row. Bad input is refused before anything is stored (`preflight`), which a
launcher may also call alone, without writing, before it starts anything.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from speculator_arena.rules.status import QUEUED
from speculator_arena.runners.lowb.task_view import is_lowb, task_for
from speculator_arena.runners.memory import Device
from speculator_arena.runners.provenance import provenance
from speculator_arena.runners.spec import EvaluationSpec, resolve_engine_path, stock_engine_of
from speculator_arena.warehouse.evaluations import current_row
from speculator_arena.warehouse.store import Warehouse


def _check_inputs(spec: EvaluationSpec, home: Path) -> None:
    """Bad input fails here, with a clear error, before anything is stored."""
    from speculator_arena.pools.api import load_pool

    resolve_engine_path(spec.engine)
    resolve_engine_path(stock_engine_of(spec))
    if spec.target and not Path(spec.target).is_dir():
        raise FileNotFoundError(f"target directory not found: {spec.target}")
    if spec.speculator and not Path(spec.speculator).is_dir():
        raise FileNotFoundError(f"speculator directory not found: {spec.speculator}")
    if spec.artifact and not Path(spec.artifact).is_dir():
        raise FileNotFoundError(f"checkpoint directory (ARTIFACT) not found: {spec.artifact}")
    if is_lowb(task_for(spec)):
        from speculator_arena.pools.lowb.api import load_items

        load_items(spec.task_id, spec.split, home)
        return
    load_pool(spec.task_id, spec.split, home=home)


def preflight(spec: EvaluationSpec, home=None) -> None:
    """`queue`'s refusals without its write: an unknown task or version, a missing engine,
    target or speculator, a pool not built or short. An evaluation already stored passes (it was
    checked when it was queued; what may happen to it now is `Evaluation.run()`'s to say)."""
    wh = Warehouse(home)
    task_for(spec)
    if current_row(wh, spec.evaluation_id) is None:
        _check_inputs(spec, wh.home)


def queue(spec: EvaluationSpec, home=None, *, device: Device | None = None) -> dict:
    """The evaluation's current row: the stored one when there is one, else its `queued` row,
    written now (after `preflight`'s checks) with the provenance of what it will run."""
    wh = Warehouse(home)
    task = task_for(spec)
    existing = current_row(wh, spec.evaluation_id)
    if existing is not None:
        return existing
    _check_inputs(spec, wh.home)
    device = device or Device.open()
    now = time.time()
    row = {
        "evaluation_id": spec.evaluation_id,
        "task_id": spec.task_id,
        "split": spec.split,
        "protocol_version": task.protocol.version if is_lowb(task) else task.protocol_version,
        "submission_id": spec.submission_id or spec.evaluation_id,
        "account_id": spec.account_id,
        "is_reference": spec.is_reference,
        "label": spec.label or Path(spec.engine).name,
        "solution_kind": spec.solution_kind,
        "status": QUEUED,
        "void_reason": None,
        "failure_reason": None,
        "created_at": now,
        "updated_at": now,
        "provenance": json.dumps(provenance(spec, wh.home, device, task), sort_keys=True),
    }
    wh.write_rows("evaluations", spec.evaluation_id, [row], part="evaluation", replace=True)
    return row
