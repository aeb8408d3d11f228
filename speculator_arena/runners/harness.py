"""One paired evaluation (protocol sections 4, 6 and 7), run for real: the orchestrating `Evaluation`.

Order: candidate start -> per workload (solo, team, busy): one warm-up wave, then its passes ->
stop, clean up, wait for an idle device -> stock start -> the same passes (same sessions,
seeds, order) -> stop (a task whose version pairs them `mirrored` has each engine started twice,
candidate, stock, stock, candidate, each start serving half of every workload's passes) -> gate probes: the candidate restarted at the probe utilization
(greedy prompts, fidelity texts), then the stock engine restarted at it (greedy prompts,
fidelity texts, and the likelihood scoring of both engines' sampled timed replies).

Every observation is a raw row, written as each pass ends, so that a runner that dies leaves
whole passes; a pass's `passes` row is written last and is what marks it whole.

This module holds what decides the evaluation's status: the queued row first (queued.py), the
order of the steps, the final status and its reason, signals, a full disk, and the resume of
a runner that died. The steps are objects of their own over one typed `RunContext`
(run_context.py: what they all share): the engines' start and stop (engines.py `Engines`), the
timed passes with their warm-up (passes.py `TimedPasses`), the interleaved pairing and its
sliced pass (interleaved.py, sliced.py), the probe phase (probe_phase.py, the probe requests in
probes.py), the calibration's fit (fit_passes.py); the provenance recorded in the queued row is
provenance.py, the spec and its builders spec.py.
"""

from __future__ import annotations

import os
import signal
import stat
import sys
import threading
from pathlib import Path

from speculator_arena.diskspace import DiskFull, full_disk
from speculator_arena.rules.status import FAILED, FINAL, MEASURED, QUEUED, RUNNING, VOID
from speculator_arena.runners import interrupt, sidecar_engine
from speculator_arena.runners.engines import Engines
from speculator_arena.runners.failures import ArenaVoid, EngineFailure, IdleFault, RunnerInterrupted
from speculator_arena.runners.fit_passes import run_fit
from speculator_arena.runners.interleaved import InterleavedPasses
from speculator_arena.runners.lowb.task_view import is_lowb, task_for
from speculator_arena.runners.memory import Device
from speculator_arena.runners.passes import TimedPasses
from speculator_arena.runners.probe_phase import ProbePhase
from speculator_arena.runners.queued import queue
from speculator_arena.runners.run_context import RunContext
from speculator_arena.runners.spec import EvaluationSpec, resolve_engine_path, stock_engine_of
from speculator_arena.runners.status import (
    EvaluationStateError,
    own_identity,
    read_state,
    runner_alive,
    write_state,
    write_status,
)
from speculator_arena.runners.tokens import load_tokenizer
from speculator_arena.sealed.store import verify_sealed_inputs
from speculator_arena.warehouse.evaluations import current_row
from speculator_arena.warehouse.store import Warehouse


class Evaluation:
    """The harness for one evaluation. `run()` returns the final status.

    What its steps share is one `RunContext` (`ctx`: the spec, the warehouse, the task's
    protocol, the device, and once `_run` loaded them the target, its tokenizer and the pool;
    the engines the run holds, the counted requests per engine for the probes, the device-idle
    verdict). The steps are objects over it: `engines` (starts and stops), `passes` (the timed
    passes), and, made where the run needs them, the interleaved pairing and the probe phase. A
    spec with a `fit` plan (the calibration's m/c fit) runs runners/fit_passes.py on the same
    steps instead of the pairing.
    """

    def __init__(self, spec: EvaluationSpec, home=None, progress=None):
        self.ctx = RunContext(
            spec=spec,
            wh=Warehouse(home),
            task=task_for(spec),  # the speculator protocol's task, or a LowBArena task's view
            device=Device.open(uuid=sidecar_engine.gpu_uuid()),  # in a pod: the engine container's GPU
            progress=progress or (lambda msg: print(msg, file=sys.stderr, flush=True)),
        )
        self.engines = Engines(self.ctx)
        self.passes = TimedPasses(self.ctx, self.engines)
        self.row: dict | None = None  # the evaluation's status row, as last written

    def finish(self, status: str, *, void_reason=None, failure_reason=None) -> str:
        ctx = self.ctx
        self.row = write_status(
            ctx.wh,
            self.row,
            status,
            void_reason=void_reason,
            failure_reason=failure_reason,
            provenance={"rows_written": ctx.rows_written, "last_phase": ctx.phase},
        )
        write_state(ctx.wh, ctx.eid, phase=f"finished: {status}", engine_pgid=None, engine_uid=None)
        reason = void_reason or failure_reason
        ctx.say(f"{status}" + (f": {reason}" if reason else ""))
        return status

    # ---- the run -----------------------------------------------------------------------
    def run(self) -> str:
        ctx = self.ctx
        self.row = queue(ctx.spec, ctx.wh.home, device=ctx.device)
        if self.row["status"] in FINAL:
            raise EvaluationStateError(f"evaluation {ctx.eid} is already {self.row['status']}")
        state = read_state(ctx.wh, ctx.eid)
        if self.row["status"] == RUNNING:
            if runner_alive(state):
                raise EvaluationStateError(f"evaluation {ctx.eid} is running under pid {state.get('pid')}")
            return resume_dead(ctx.wh, ctx.eid, progress=ctx.progress)
        self.protect_home()
        write_state(ctx.wh, ctx.eid, **own_identity(), phase="starting")
        self.row = write_status(ctx.wh, self.row, RUNNING, provenance={"runner": own_identity()})
        old = self._install_signals()
        try:
            return self._run()
        except RunnerInterrupted as exc:
            self._stop_current()
            return self.finish(VOID, void_reason=f"runner interrupted ({exc}) during {ctx.phase}")
        except Exception as exc:
            full = full_disk(exc, ctx.wh.home)
            self._stop_current()
            if full is not None:
                self._disk_full(full)
            return self.finish(VOID, void_reason=f"runner error during {ctx.phase}: {type(exc).__name__}: {exc}"[:500])
        finally:
            if interrupt.requested():
                interrupt.hold()  # a later signal must not break off what records the stop
            else:
                interrupt.restore(old)

    def _stop_current(self) -> None:
        """Stop the engine that is running (both, when the interleaved pairing keeps two), recording
        its stop when the disk lets us (a full disk must not leave an engine behind)."""
        ctx = self.ctx
        for other in list(ctx.resident.values()):
            if other is not ctx.current_engine and other.stopped_at is None:
                other.stop(ctx.task.start_stop.sigterm_grace_seconds)
        er = ctx.current_engine
        if er is not None and er.stopped_at is None and er.proc is not None:
            phase = ctx.phase
            try:
                self.engines.stop(er, record=True)
            except Exception as exc:
                if er.stopped_at is None:
                    er.stop(ctx.task.start_stop.sigterm_grace_seconds)
                ctx.current_engine = None
                if full_disk(exc, ctx.wh.home) is None:
                    raise
            ctx.phase = phase

    def _disk_full(self, full: DiskFull) -> None:
        """The host's disk is full: the arena's side failed, so the evaluation is void. Say so in
        one line, mark it void if the status row still fits, and raise the DiskFull for the
        caller's one line; a row that did not fit leaves it `running`, which `--resume` (after
        space is freed) marks void. Rows already stored are whole parts and stay."""
        ctx = self.ctx
        phase = ctx.phase
        try:
            self.finish(VOID, void_reason=f"{full} during {phase}")  # says so, in one line
        except Exception as exc:
            if full_disk(exc, ctx.wh.home) is None:
                raise
        if self.row.get("status") == VOID:
            hint = f"evaluation {ctx.eid} is void (during {phase}), rows stored are kept; free space before the next"
        else:
            hint = (
                f"evaluation {ctx.eid} stays {self.row.get('status')} (during {phase}), rows stored are kept; "
                f"free space, then `arena evaluate --resume {ctx.eid}`"
            )
        raise DiskFull(full.path, full.detail, hint=hint)

    def _install_signals(self):
        """The first SIGTERM/SIGINT interrupts the run (its engines stopped, the evaluation void) and
        stays noted for the command (interrupt.py); a later one is only noted, so that it cannot
        break off the stop of the engines halfway."""
        if threading.current_thread() is not threading.main_thread():
            return None

        def handler(signum, _frame):
            if interrupt.note(signum):
                raise RunnerInterrupted(signal.Signals(signum).name)

        return {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGINT)}

    def protect_home(self) -> None:
        """The engine's user must not read the warehouse or the runner's files (section 9).

        Others get nothing; the directory's group may read `raw` and `runs`: the API, run as a user
        of its own (docs/operators/accounts-and-api.md), reads statuses and scores through it, and the engine's
        user is in no group of the arena."""
        ctx = self.ctx
        for sub, mode in (("raw", 0o750), ("runs", 0o750), ("dagster", stat.S_IRWXU)):
            d = ctx.wh.home / sub
            d.mkdir(parents=True, exist_ok=True)
            os.chmod(d, mode)

    def _run(self) -> str:
        ctx = self.ctx
        s = ctx.spec
        ctx.say(f"task {s.task_id}, split {s.split}, engine {s.engine}")
        ctx.set_phase("preparing")
        if is_lowb(ctx.task):
            return self._run_lowb()
        self._load_inputs()
        verify_sealed_inputs(s.engine, s.speculator, ctx.wh.home)
        if s.fit is not None:  # the calibration's m/c fit: short stock passes, no pairing
            return self.finish(VOID, void_reason=run_fit(ctx, self.engines, self.passes))
        cand_src = resolve_engine_path(s.engine)
        stock_src = resolve_engine_path(stock_engine_of(s))

        src = {"candidate": cand_src, "stock": stock_src}
        if ctx.task.pairing == "interleaved":
            return self._run_interleaved(src)
        started: set[str] = set()
        for engine, indices in ctx.task.pass_halves():  # C S, or C S S C (protocol model: PAIRINGS)
            try:
                self.passes.timed(engine, src[engine], indices, again=engine in started)
            except EngineFailure as exc:
                if engine == "candidate":
                    return self.finish(FAILED, failure_reason=exc.reason)
                return self.finish(VOID, void_reason=f"stock engine: {exc.reason}")
            except ArenaVoid as exc:
                return self.finish(VOID, void_reason=exc.reason)
            if not ctx.idle_ok:
                return self.finish(VOID, void_reason=ctx.idle_reason)
            started.add(engine)

        ctx.set_phase("probes")
        ok, reason = ProbePhase(ctx, self.engines).run(cand_src, stock_src)
        if not ok:
            return self.finish(VOID, void_reason=reason)
        return self.finish(MEASURED)

    def _run_interleaved(self, src: dict[str, Path]) -> str:
        """The interleaved pairing's run (interleaved.py): both engines resident through the timed
        passes and, when the version says so, the probes; the same outcomes as `_run`, and the
        idle engine's fault charged to that engine (the candidate's: failed; the stock's: void)."""
        ctx = self.ctx
        on_timed = ctx.task.interleaving.probes_on_timed_start
        pairing = InterleavedPasses(ctx, self.engines, self.passes)
        try:
            try:
                pairing.run(src)
                if not on_timed:
                    pairing.stop_resident()
                    if not ctx.idle_ok:
                        return self.finish(VOID, void_reason=ctx.idle_reason)
                ctx.set_phase("probes")
                ok, reason = ProbePhase(ctx, self.engines).run(src["candidate"], src["stock"])
            finally:
                pairing.stop_resident()
        except IdleFault as exc:
            if exc.engine == "candidate":
                return self.finish(FAILED, failure_reason=exc.reason)
            return self.finish(VOID, void_reason=f"stock engine: {exc.reason}")
        except (EngineFailure, ArenaVoid) as exc:
            return self.ended_by(exc)
        if not ok:
            return self.finish(VOID, void_reason=reason)
        if not ctx.idle_ok:
            return self.finish(VOID, void_reason=ctx.idle_reason)
        return self.finish(MEASURED)

    def _run_lowb(self) -> str:
        """A LowBArena evaluation (runners/lowb/run.py): its inputs, then its steps; the same
        outcomes as `_run` (the candidate's fault: failed; the stock engine's or the arena's: void)."""
        from speculator_arena.pools.lowb import api as items_api
        from speculator_arena.runners.lowb.run import LowbRun

        ctx, s = self.ctx, self.ctx.spec
        ctx.target = Path(s.target) if s.target else self.prepare_target()
        ctx.tokenizer = load_tokenizer(str(ctx.target))
        verify_sealed_inputs(s.engine, s.speculator, ctx.wh.home)
        verify_sealed_inputs(s.artifact, None, ctx.wh.home)
        lowb = ctx.task.lowb
        items = items_api.load_items(s.task_id, s.split, ctx.wh.home)
        kl_prompts = items_api.kl_prompts(s.task_id, s.split, ctx.wh.home, lowb.kl_probe.prompts[s.split])

        def prompts(workload, pass_index, n, prompt_tokens):
            return items_api.workload_prompts(
                s.task_id, ctx.eid, workload, pass_index, n, prompt_tokens, ctx.tokenizer, home=ctx.wh.home
            )

        src = {"candidate": resolve_engine_path(s.engine), "stock": resolve_engine_path(stock_engine_of(s))}
        run = LowbRun(
            ctx,
            self.engines,
            lowb,
            ctx.task.protocol,
            artifact=Path(s.artifact) if s.artifact else None,
            items=items,
            kl_prompts=kl_prompts,
            prompts=prompts,
        )
        try:
            run.run(src)
        except (EngineFailure, ArenaVoid) as exc:
            return self.ended_by(exc)
        return self.finish(MEASURED)

    def ended_by(self, exc: EngineFailure | ArenaVoid) -> str:
        """An engine's failure (the candidate's: failed; the stock engine's: void) or the arena's
        void, as the final status."""
        if isinstance(exc, ArenaVoid):
            return self.finish(VOID, void_reason=exc.reason)
        if exc.reason.startswith("candidate"):
            return self.finish(FAILED, failure_reason=exc.reason)
        return self.finish(VOID, void_reason=f"stock engine: {exc.reason}")

    def _load_inputs(self) -> None:
        """The target (prepared when the spec names none), its tokenizer and the pool."""
        from speculator_arena.pools.api import load_pool

        ctx = self.ctx
        s = ctx.spec
        ctx.target = Path(s.target) if s.target else self.prepare_target()
        ctx.tokenizer = load_tokenizer(str(ctx.target))
        ctx.pool = load_pool(s.task_id, s.split, home=ctx.wh.home)

    def prepare_target(self) -> Path:
        from speculator_arena.checkpoints import prepare_checkpoint

        ctx = self.ctx
        ctx.say("preparing the sealed target checkpoint")
        return Path(prepare_checkpoint(ctx.spec.task_id, home=ctx.wh.home))


def resume_dead(wh: Warehouse, evaluation_id: str, progress=None) -> str:
    """A `running` evaluation whose runner is gone: clean up after it and mark it void.

    Why void and not continue: the pairing needs both engines to serve the same passes in the
    same pod under the same conditions, and the candidate's state (its caches, its warm-up) at
    the crash cannot be rebuilt; continuing would pair passes measured under different
    conditions. The rows already stored are kept as they are (whole Parquet parts).
    """
    say = progress or (lambda m: print(m, file=sys.stderr, flush=True))
    row = current_row(wh, evaluation_id)
    if row is None:
        raise EvaluationStateError(f"no evaluation {evaluation_id} in {wh.home}")
    if row["status"] in FINAL:
        say(f"[evaluate {evaluation_id}] already {row['status']}: nothing to resume")
        return row["status"]
    state = read_state(wh, evaluation_id) or {}
    if row["status"] == RUNNING and runner_alive(state):
        raise EvaluationStateError(f"evaluation {evaluation_id} is still running under pid {state.get('pid')}")
    if row["status"] == QUEUED:
        raise EvaluationStateError(f"evaluation {evaluation_id} is queued, not started: run it instead of resuming")
    _kill_leftovers(state, evaluation_id)
    phase = state.get("phase") or "an unknown phase"
    write_status(wh, row, VOID, void_reason=f"runner died during {phase}", provenance={"resumed_by": own_identity()})
    write_state(wh, evaluation_id, phase="finished: void (runner died)", engine_pgid=None, engine_workspace=None)
    say(f"[evaluate {evaluation_id}] void: runner died during {phase}; stored rows kept")
    return VOID


def _kill_leftovers(state: dict, evaluation_id: str) -> None:
    from speculator_arena.runners.lifecycle import kill_user_processes, remove_shm

    pgid = state.get("engine_pgid")
    if pgid:
        from speculator_arena.runners import reaper

        if reaper.is_reaper(int(pgid)):  # the engine's reaper still runs: what left its group dies first
            reaper.kill_descendants(int(pgid))
        try:
            os.killpg(int(pgid), signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    ws = state.get("engine_workspace")
    if ws and Path(ws).name.startswith("arena-engine-"):
        import shutil

        shutil.rmtree(ws, ignore_errors=True)
    if os.geteuid() == 0:  # the interleaved pairing's engines, each in control groups of its own
        from speculator_arena.runners.interleaved import leftover_cgroups

        for group in leftover_cgroups(evaluation_id):
            group.remove()
    uid = state.get("engine_uid")
    if uid is not None and os.geteuid() == 0:
        import pwd

        try:
            name = pwd.getpwuid(int(uid)).pw_name
        except KeyError:
            return
        kill_user_processes(name, int(uid))
        remove_shm(owner_uid=int(uid))
