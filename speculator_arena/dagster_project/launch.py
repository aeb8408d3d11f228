"""Launchers: what the commands, the queue worker and a calibration call to run the arena's
assets in-process on the Dagster instance of an ARENA_HOME, so `DAGSTER_HOME=$ARENA_HOME/dagster
dagster dev` shows every run they made.

They live beside the commands (dagster_project/commands.py), above the assets: `assets/` holds
the Dagster definitions and resources only, and no asset runs another asset inside its step
(tests/test_layers.py looks). The domains below (runners, pools, scoring) never import this module
or the assets.

One door for every evaluation: `evaluate(spec, home)`. Whoever starts one (`arena evaluate`,
`arena demo`, the queue worker, a calibration) builds its spec with its source's builder
(runners/spec.py) and calls `evaluate`, which refuses bad input before anything is stored, adds
the partition, materializes the `evaluation` asset (the harness queues the evaluation as its
first step, then runs it on the chosen backend; the asset scores it once as it lands and checks
its rows), then the analysts' database downstream of it. The path of one evaluation, each module
calling the next: `cli` -> `dagster_project/commands.py` (arguments -> spec) -> `evaluate` here ->
`assets/evaluations.py` -> `backends/` -> `runners/harness.py` -> the warehouse; `score` here ->
`assets/scores.py` -> `scoring/` -> the board's rows.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import dagster as dg

from speculator_arena import settings
from speculator_arena.assets.resources import default_resources
from speculator_arena.diskspace import full_disk_text
from speculator_arena.errors import ArenaError
from speculator_arena.rules.devices import DEVICE_TAG


def quiet(level: str = "CRITICAL") -> dict:
    """Dagster's console logger in the launchers' runs: the harness prints its own progress, and
    a failure is the caller's one line (the CLI's; the queue worker prints the run's failure),
    so Dagster's step and run failures with their stack traces stay in the run's event log
    (`dagster dev` shows them) and reach the terminal only with ARENA_DEBUG. Dagster's own events
    are DEBUG; `level="INFO"` would show the assets' `context.log.info` lines in Dagster's format,
    so the assets that report progress print it with the arena's prefix themselves (assets/pools.py `say`)."""
    level = "DEBUG" if settings.flag("ARENA_DEBUG") else level
    return {"loggers": {"console": {"config": {"log_level": level}}}}


def materialize(*args, **kwargs):
    """`dg.materialize`, every launcher's one way to run assets. When Dagster's own storage
    (sqlite under `$ARENA_HOME/dagster`) cannot be written because the disk is full, Dagster
    writes the failed statement, its parameters and a link to stderr before it raises; that
    report is dropped here (ARENA_DEBUG keeps it) because the caller says the same in one line
    (the CLI: `arena <command>: disk full: ...`, diskspace.py)."""
    if settings.flag("ARENA_DEBUG"):
        return _interruptible(*args, **kwargs)
    real = sys.stderr
    sys.stderr = _WithoutStorageReports(real)
    try:
        return _interruptible(*args, **kwargs)
    finally:
        sys.stderr = real


def _interruptible(*args, **kwargs):
    """A stop signal that reached Dagster's own handler (outside an evaluation's run, which records
    it void itself) stops the command as one there does (runners/interrupt.py)."""
    import signal

    from speculator_arena.runners import interrupt

    try:
        return dg.materialize(*args, **kwargs)
    except dg.DagsterExecutionInterruptedError as exc:
        raise interrupt.CommandInterrupted(interrupt.requested() or signal.SIGINT, "the Dagster run stopped") from exc


class _WithoutStorageReports:
    """stderr, less Dagster's report of an event-log write that failed on a full disk."""

    _PREFIX = "Exception while writing logger call to event log"

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        if text.startswith(self._PREFIX) and full_disk_text(text):
            return len(text)
        return self._stream.write(text)

    def __getattr__(self, name):
        return getattr(self._stream, name)


# The instance's settings: no telemetry, and the daemon's run queue holds one run per device (the
# `arena/device` tag's value) as a second guard beside the submission sensor's own check.
INSTANCE_YAML = """telemetry:
  enabled: false
concurrency:
  runs:
    tag_concurrency_limits:
      - key: "arena/device"
        value:
          applyLimitPerUniqueValue: true
        limit: 1
"""


def dagster_instance(home) -> dg.DagsterInstance:
    """The persistent instance of this ARENA_HOME (what `dagster dev` opens with DAGSTER_HOME)."""
    d = Path(home) / "dagster"
    d.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("DAGSTER_HOME", str(d))  # for Dagster itself, in this process
    yaml_path = d / "dagster.yaml"
    if not yaml_path.exists():
        yaml_path.write_text(INSTANCE_YAML)
    return dg.DagsterInstance.from_config(str(d))


def evaluate(
    spec, home, *, backend: str = "", progress=None, tags=None, rerun_contended: int = 0, analysts: bool = True
):
    """The one door: run one evaluation through its asset and return its `EvaluationSummary`
    (runners/summary.py: status, reasons, row counts, `outcome`: the scorer's verdict as it
    landed), then refresh the analysts' database downstream of it.

    Every run is tagged with the device it uses (`rules/devices.py`, `ARENA_DEVICE`),
    whoever starts it (`arena evaluate`, `arena demo`, a calibration, the queue), so the queue's
    one-run-per-device check sees every evaluation in flight; `tags` add to it.

    `rerun_contended`: how many times an evaluation voided because the host was contended is made
    again under a fresh evaluation id (SCORING.md "Host contention": the operator re-runs it; the
    void one stays stored, refunded). The summary of the last attempt is returned, with
    `attempts`, every attempt's id and how it ended. `analysts=False`: the caller refreshes the
    analysts' database itself (the queue's runs in processes of their own, which would race for
    its file)."""
    from speculator_arena.backends import preflight
    from speculator_arena.frontdoor.queue import device_name
    from speculator_arena.runners import interrupt, queued

    tags = {DEVICE_TAG: device_name(), **(tags or {})}
    attempts = []
    while True:
        preflight(backend, spec, home)
        queued.preflight(spec, home)  # the harness queues it first thing; a refusal stores nothing
        summary = _materialize_evaluation(spec, home, backend, tags)
        attempts.append(summary)
        # a SIGINT/SIGTERM stopped it (recorded void): the whole command stops (runners/interrupt.py)
        interrupt.check(f"evaluation {spec.evaluation_id} {summary.status}: {summary.why}")
        if rerun_contended <= 0 or not summary.contended:
            break
        rerun_contended -= 1
        if progress:
            progress(f"[evaluate {spec.evaluation_id}] void, host contended: {summary.why}; making it again")
        spec = spec.again()
    if analysts:
        refresh_analysts(home)
    return summary.with_attempts(attempts)


def _materialize_evaluation(spec, home, backend: str, tags):
    from speculator_arena.assets.evaluations import evaluation, evaluation_partitions, run_config
    from speculator_arena.runners.summary import EvaluationSummary

    instance = dagster_instance(home)
    instance.add_dynamic_partitions(evaluation_partitions.name, [spec.evaluation_id])
    result = materialize(
        [evaluation],
        partition_key=spec.evaluation_id,
        instance=instance,
        tags=tags,
        run_config={**run_config(spec), **quiet()},
        resources=default_resources(home, backend),
        raise_on_error=True,
    )
    (event,) = result.asset_materializations_for_node("evaluation")
    return EvaluationSummary.from_dict(event.metadata["summary"].value)


def refresh_analysts(home) -> None:
    """Materialize the analysts' database, downstream of the evaluations: a failure is a warning
    (the file is a rebuildable copy; `arena warehouse analysts` catches up), never the evaluation's."""
    from speculator_arena.assets.analysts import analysts_db

    result = materialize(
        [analysts_db],
        instance=dagster_instance(home),
        resources=default_resources(home),
        run_config=quiet(),
        raise_on_error=False,
    )
    if not result.success:
        print(f"[analysts] not refreshed ({_failure(result)}); run `arena warehouse analysts`", file=sys.stderr)


def score(home, version: int | None = None):
    """Materialize the `scores` asset of a protocol version (the latest when None) and return
    the scores it computed (scored once)."""
    from speculator_arena.assets.scores import scores
    from speculator_arena.protocol import load_protocol

    version = load_protocol(version).version
    result = materialize(
        [scores],
        partition_key=str(version),
        instance=dagster_instance(home),
        resources=default_resources(home),
        raise_on_error=True,
        run_config=quiet(),
    )
    return result.asset_value(scores.key)


class PoolBuildFailed(RuntimeError, ArenaError):
    """A build that failed; the served pool is the one before it, whole."""


def build_pools(
    task: str,
    *,
    data: str = "",
    production_stats: str = "",
    cc_traces: str = "",
    write_repo_card: bool = False,
    home: str = "",
    sources: str = "",
):
    """Materialize every pool asset of one task in-process. A failure (a bad source file, a
    blocking check such as a pool short of sessions) raises `PoolBuildFailed` naming the cause,
    after the run's build folder is removed: the served pool stays the previous one."""
    from speculator_arena.assets.pools import POOL_ASSETS, POOL_TASKS
    from speculator_arena.pools.builder.folders import discard_build
    from speculator_arena.pools.layout import builds_dir
    from speculator_arena.protocol import target_task

    task = target_task(task)  # a task serving another's sessions builds (and serves) that task's pools
    if task not in POOL_TASKS.get_partition_keys():
        raise KeyError(f"unknown task {task!r}; tasks: {POOL_TASKS.get_partition_keys()}")
    cfg = {
        "data_dir": data,
        "production_stats": production_stats,
        "cc_traces": cc_traces,
        "sources": sources,
        "write_repo_data_card": write_repo_card,
    }
    run_config = {"ops": {a.op.name: {"config": cfg} for a in POOL_ASSETS}, **quiet()}  # progress: assets/pools.py say
    builds = builds_dir(task, settings.arena_home(home or None))
    before = set(builds.iterdir()) if builds.is_dir() else set()
    try:
        res = materialize(
            POOL_ASSETS,
            partition_key=task,
            run_config=run_config,
            resources=default_resources(home or None),
            raise_on_error=False,
        )
    finally:
        for d in (set(builds.iterdir()) if builds.is_dir() else set()) - before:
            discard_build(d)
    if not res.success:
        raise PoolBuildFailed(f"the {task} pool build failed; the served pool is unchanged. " + _failure(res))
    return res


def _failure(res) -> str:
    """The causes of a failed run: failed checks with their description, failed steps with
    their error (a reader's error names the file, line and record)."""
    out = [
        f"check {c.check_name} failed: {c.description or c.metadata}"
        for c in res.get_asset_check_evaluations()
        if not c.passed and c.severity.value == "ERROR"
    ]
    for e in res.all_events:
        if e.is_step_failure:
            err = e.step_failure_data.error
            while err is not None and err.cause is not None and "dagster" in (err.cls_name or "").lower():
                err = err.cause
            out.append(
                f"step {e.step_key}: {err.cls_name}: {err.message.strip()}" if err else f"step {e.step_key} failed"
            )
    return "; ".join(out) or "see the Dagster events"


def work_queue_once(home=None, say=print) -> list[str]:
    """`arena queue work`: the queue's sensors ticked in-process and the runs they request run
    here, on the ARENA_HOME instance (for a machine without the Dagster daemon, and tests).
    Returns the evaluation ids run, and `calibrate <task>` for a calibration's assets (none:
    nothing waited).

    The queued calibrations first (`calibration_queue`: an operator's work), the accepted
    submissions when they request nothing (`submission_queue`), so one tick never gives a device
    twice. One evaluation: it runs in this process. Several (several free devices): one process
    per run (`queue_run.py`), started together and waited for, then the analysts' database
    refreshed once. Why processes and not threads: each run is a Dagster run of its own with its
    own launcher, and two in one process would share stderr and Dagster's in-process state. The
    next tick waits for every run of this one; under the daemon each device's next run starts
    as soon as it frees."""
    from speculator_arena.assets.calibration import calibration_job, calibration_queue
    from speculator_arena.assets.submissions import submission_queue
    from speculator_arena.runners.spec import EvaluationSpec

    home = settings.arena_home(home)
    instance = dagster_instance(home)
    for sensor in (calibration_queue, submission_queue):
        with dg.build_sensor_context(instance=instance, resources=default_resources(home)) as context:
            result = sensor(context)
        if isinstance(result, dg.SensorResult) and result.run_requests:
            break
        say(f"queue: {getattr(result, 'skip_message', result)}")
    else:
        return []
    done = []
    for r in [r for r in result.run_requests if r.job_name == calibration_job.name]:
        say(f"queue: calibrating {r.partition_key} (its evaluations are stored)")
        _materialize_calibration(r, home, say)
        done.append(f"calibrate {r.partition_key}")
    runs = [
        (r, EvaluationSpec.from_json(r.run_config["ops"]["evaluation"]["config"]["spec"]))
        for r in result.run_requests
        if r.job_name != calibration_job.name
    ]
    for request, _ in runs:
        whose = request.tags.get("arena/submission")
        whose = f"submission {whose}" if whose else f"calibration of {request.tags.get('arena/calibration')}"
        say(f"queue: evaluating {request.partition_key} ({whose}) on {request.tags[DEVICE_TAG]}")
    if len(runs) == 1:
        ((request, spec),) = runs
        try:
            evaluate(spec, home, tags=request.tags)
        except Exception as exc:  # noqa: BLE001 - one submission's failure is reported; the worker goes on
            say(run_failed(request.partition_key, exc))
        return done + [request.partition_key]
    from speculator_arena.runners import interrupt

    children: list = []
    old = interrupt.forward_to(children)  # a stop signal reaches each run's process, which records it void
    try:
        children += [_start_run_process(spec, home, request.tags) for request, spec in runs]
        for (request, _), child in zip(runs, children, strict=True):
            if child.wait() != 0:
                say(f"queue: {request.partition_key} failed (its process exited {child.returncode}; its lines above)")
    finally:
        interrupt.restore(old)
    if runs:
        refresh_analysts(home)
    interrupt.check(f"the queue's runs {', '.join(r.partition_key for r, _ in runs)} ended")
    return done + [request.partition_key for request, _ in runs]


def _materialize_calibration(request, home, say) -> None:
    """A queued calibration's three assets, as its `calibration` run request asks (partition,
    config, tags); a failure is the worker's line, as a run's is."""
    from speculator_arena.assets.calibration import calibration_fit, calibration_runs, protocol_candidate

    try:
        materialize(
            [calibration_runs, calibration_fit, protocol_candidate],
            partition_key=request.partition_key,
            instance=dagster_instance(home),
            tags=request.tags,
            run_config={**request.run_config, **quiet()},
            resources=default_resources(home),
            raise_on_error=True,
        )
    except Exception as exc:  # noqa: BLE001 - reported; the worker goes on
        say(run_failed(f"calibration of {request.partition_key}", exc))


def run_failed(evaluation_id: str, exc: Exception) -> str:
    """The worker's line for a requested run that raised (in this process or in `queue_run.py`'s)."""
    return f"queue: {evaluation_id} failed: {type(exc).__name__}: {str(exc)[:300]}"


def _start_run_process(spec, home, tags: dict):
    """`queue_run.py` in a process of its own for one requested run (by module name: that module
    imports this one)."""
    import json
    import subprocess

    payload = json.dumps({"spec": spec.to_json(), "home": str(home), "tags": tags})
    return subprocess.Popen(
        [sys.executable, "-m", "speculator_arena.dagster_project.queue_run", payload], stdin=subprocess.DEVNULL
    )


def calibration_evaluations(task_id: str, config: dict, home, backend: str = "", progress=None) -> dict:
    """A calibration's planned evaluations not stored yet, and the m/c fit's grid points not
    stored yet (one fit evaluation), each run through `evaluate` (an `evaluation` partition like
    any other, on `backend`, tagged with the device as every evaluation is), tagged with the task
    calibrated. Returns run name -> evaluation id (None: none measured).

    Why here and not in the `calibration_runs` asset: an asset that ran the `evaluation` asset
    inside its step made the assets and the launchers import each other; the asset now records
    what is stored (calibration/calibrate.py step_runs)."""
    from speculator_arena.assets.calibration import CALIBRATION_TAG, CalibrationConfig
    from speculator_arena.calibration.calibrate import run_evaluations
    from speculator_arena.warehouse import Warehouse

    tags = {CALIBRATION_TAG: task_id}

    def through_the_door(spec, wh, say) -> str:
        return evaluate(spec, wh.home, backend=backend, progress=say, tags=tags).status

    opts = CalibrationConfig(**config).options(task_id)
    say = progress or (lambda m: print(m, file=sys.stderr, flush=True))
    return run_evaluations(Warehouse(home), opts, through_the_door, say)


def calibrate(task_id: str, config: dict, home, backend: str = "", progress=None) -> dg.ExecuteInProcessResult:
    """What `arena calibrate` runs: the calibration's evaluations (`calibration_evaluations`, on
    `backend`: local or kubernetes), then the three calibration assets of the task, which record
    the stored runs, fit m and c, and derive the candidate."""
    from speculator_arena.assets.calibration import (
        CALIBRATION_ASSETS,
        calibration_fit,
        calibration_runs,
        protocol_candidate,
    )

    calibration_evaluations(task_id, config, home, backend, progress)
    ops = {name: {"config": config} for name in CALIBRATION_ASSETS}
    return materialize(
        [calibration_runs, calibration_fit, protocol_candidate],
        partition_key=task_id,
        instance=dagster_instance(home),
        run_config={"ops": ops, **quiet()},
        resources=default_resources(home, backend),
        raise_on_error=True,
    )
