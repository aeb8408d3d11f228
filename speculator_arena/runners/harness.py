"""One paired evaluation (protocol sections 4, 6 and 7), run for real.

Order: candidate start -> per workload (solo, team, busy): one warm-up wave, then its passes ->
stop, clean up, wait for an idle device -> stock start -> the same passes (same sessions,
seeds, order) -> stop -> gate probes: the candidate restarted at the probe utilization
(greedy prompts, fidelity texts), then the stock engine restarted at it (greedy prompts,
fidelity texts, and the likelihood scoring of both engines' sampled timed replies).

Every observation is a raw row, written as each pass ends, so that a runner that dies leaves
whole passes; a pass's `passes` row is written last and is what marks it whole.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import os
import signal
import socket
import stat
import sys
import sysconfig
import threading
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

from speculator_arena import settings
from speculator_arena.diskspace import DiskFull, full_disk
from speculator_arena.frontdoor.seal import sealed_provenance, verify_sealed_inputs
from speculator_arena.protocol import load_protocol
from speculator_arena.protocol.model import WORKLOADS
from speculator_arena.protocol.window import WindowRule
from speculator_arena.runners import probes as probes_mod
from speculator_arena.runners.contention import ContentionSampler
from speculator_arena.runners.lifecycle import EngineRun, EngineStartError, free_port
from speculator_arena.runners.memory import Device, MemorySampler
from speculator_arena.runners.metrics import scrape
from speculator_arena.runners.status import (
    FINAL,
    EvaluationStateError,
    current_row,
    own_identity,
    read_state,
    runner_alive,
    runs_dir,
    write_state,
    write_status,
)
from speculator_arena.runners.tokens import load_tokenizer
from speculator_arena.runners.workload import ClientConfig, RequestRecord, record_rows, run_lanes
from speculator_arena.scoring.answering import over_limit
from speculator_arena.scoring.contention import pass_rows_contended
from speculator_arena.scoring.counted import counted_row
from speculator_arena.warehouse.store import Warehouse

REPO = Path(__file__).resolve().parents[2]


class RunnerInterrupted(BaseException):
    """SIGTERM/SIGINT reached the runner: stop the engine, mark the evaluation void."""


class ArenaVoid(Exception):
    """The arena's side failed during the run (host contended): stop and mark the evaluation void."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class EngineFailure(Exception):
    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


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
    protocol_version: int | None = None

    def __post_init__(self):
        if self.split not in ("dev", "test"):
            raise ValueError(f"split must be dev or test, not {self.split!r}")
        if not self.evaluation_id:
            self.evaluation_id = new_evaluation_id(self.task_id)

    def to_json(self) -> str:
        """What the `evaluation` asset's config carries: this spec, as built, field for field."""
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> EvaluationSpec:
        return cls(**json.loads(text))


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
    task = load_protocol(version).tasks[task_id]
    for ref in task.references:
        if ref.kind == "none":
            return ref.engine
    raise KeyError(f"task {task_id} names no stock reference (kind: none)")


def tree_digest(path: Path) -> str:
    h = hashlib.sha256()
    if path.is_file():
        h.update(path.read_bytes())
        return h.hexdigest()
    for f in sorted(p for p in path.rglob("*") if p.is_file()):
        h.update(str(f.relative_to(path)).encode() + b"\0")
        h.update(f.read_bytes())
    return h.hexdigest()


def code_commit() -> str | None:
    head = REPO / ".git" / "HEAD"
    try:
        ref = head.read_text().strip()
        if ref.startswith("ref: "):
            return (REPO / ".git" / ref[5:]).read_text().strip()
        return ref
    except OSError:
        return None


def sessions_per_pass(lanes: int, interleave: int, pass_seconds: float) -> int:
    """Sessions asked of the pool per pass: every slot starts one, plus spares for fast engines.

    A lane that plays through its sessions before the pass ends sits idle, so the spares are
    generous (one more session per slot for every 20 s of pass, at least four).
    """
    return lanes * interleave * max(4, math.ceil(pass_seconds / 20))


class Evaluation:
    """The harness for one evaluation. `run()` returns the final status."""

    def __init__(self, spec: EvaluationSpec, home=None, progress=None):
        self.spec = spec
        self.wh = Warehouse(home)
        self.eid = spec.evaluation_id
        self.progress = progress or (lambda msg: print(msg, file=sys.stderr, flush=True))
        self.proto = load_protocol(spec.protocol_version)
        self.task = self.proto.task(spec.task_id)
        self.device = Device.open()
        self.records: dict[str, list[RequestRecord]] = {"candidate": [], "stock": []}
        self.rows_written: dict[str, int] = {}
        self.start_counter = 0
        self.phase = "queued"
        self.current_engine: EngineRun | None = None
        self.row: dict | None = None
        self._idle_ok, self._idle_reason = True, None

    # ---- bookkeeping -------------------------------------------------------------------
    def say(self, msg: str) -> None:
        self.progress(f"[evaluate {self.eid}] {msg}")

    def write(self, table: str, rows: list[dict]) -> None:
        if rows:
            self.wh.write_rows(table, self.eid, rows)
            self.rows_written[table] = self.rows_written.get(table, 0) + len(rows)

    def set_phase(self, phase: str) -> None:
        self.phase = phase
        eng = self.current_engine
        write_state(
            self.wh,
            self.eid,
            phase=phase,
            engine_pgid=eng.proc.pid if eng and eng.proc else None,
            engine_uid=eng.uid if eng and eng.unprivileged else None,
            engine_workspace=str(eng.workspace) if eng and eng.workspace else None,
        )

    def preflight(self) -> None:
        """Bad input fails here, with a clear error, before anything is stored."""
        from speculator_arena.pools.api import load_pool

        s = self.spec
        resolve_engine_path(s.engine)
        resolve_engine_path(s.stock_engine or default_stock_engine(s.task_id, s.protocol_version))
        if s.target and not Path(s.target).is_dir():
            raise FileNotFoundError(f"target directory not found: {s.target}")
        if s.speculator and not Path(s.speculator).is_dir():
            raise FileNotFoundError(f"speculator directory not found: {s.speculator}")
        load_pool(s.task_id, s.split, home=self.wh.home)

    def queue(self) -> dict:
        """Write the evaluation's row as queued (before any engine runs)."""
        existing = current_row(self.wh, self.eid)
        if existing is not None:
            self.row = existing
            return existing
        self.preflight()
        s = self.spec
        now = time.time()
        row = {
            "evaluation_id": self.eid,
            "task_id": s.task_id,
            "split": s.split,
            "protocol_version": self.proto.version,
            "submission_id": s.submission_id or self.eid,
            "account_id": s.account_id,
            "is_reference": s.is_reference,
            "label": s.label or Path(s.engine).name,
            "solution_kind": s.solution_kind,
            "status": "queued",
            "void_reason": None,
            "failure_reason": None,
            "created_at": now,
            "updated_at": now,
            "provenance": json.dumps(self._provenance(), sort_keys=True),
        }
        self.wh.write_rows("evaluations", self.eid, [row], part="evaluation", replace=True)
        self.row = row
        return row

    def _provenance(self) -> dict:
        s = self.spec
        eng = resolve_engine_path(s.engine)
        stock = resolve_engine_path(s.stock_engine or default_stock_engine(s.task_id, s.protocol_version))
        return {
            "engine_path": str(eng),
            "engine_digest": tree_digest(eng),
            "stock_engine_path": str(stock),
            "stock_engine_digest": tree_digest(stock),
            "speculator": s.speculator,
            **sealed_provenance(s.engine, s.speculator, self.wh.home),
            "host": socket.gethostname(),
            "code_commit": code_commit(),
            "runner_user": os.environ.get("USER") or str(os.geteuid()),
            "runner_is_root": os.geteuid() == 0,
            "device": {
                "nvml": self.device.available,
                "reason": self.device.reason,
                "name": self.device.name,
                "total_bytes": self.device.total_bytes,
            },
            "pass_order": "per workload (solo, team, busy): one warm-up wave, then its passes in order",
        }

    def finish(self, status: str, *, void_reason=None, failure_reason=None) -> str:
        self.row = write_status(
            self.wh,
            self.row,
            status,
            void_reason=void_reason,
            failure_reason=failure_reason,
            provenance={"rows_written": self.rows_written, "last_phase": self.phase},
        )
        write_state(self.wh, self.eid, phase=f"finished: {status}", engine_pgid=None, engine_uid=None)
        reason = void_reason or failure_reason
        self.say(f"{status}" + (f": {reason}" if reason else ""))
        return status

    # ---- the run -----------------------------------------------------------------------
    def run(self) -> str:
        self.queue()
        if self.row["status"] in FINAL:
            raise EvaluationStateError(f"evaluation {self.eid} is already {self.row['status']}")
        state = read_state(self.wh, self.eid)
        if self.row["status"] == "running":
            if runner_alive(state):
                raise EvaluationStateError(f"evaluation {self.eid} is running under pid {state.get('pid')}")
            return resume_dead(self.wh, self.eid, progress=self.progress)
        self.protect_home()
        write_state(self.wh, self.eid, **own_identity(), phase="starting")
        self.row = write_status(self.wh, self.row, "running", provenance={"runner": own_identity()})
        old = self._install_signals()
        try:
            return self._run()
        except RunnerInterrupted as exc:
            self._stop_current()
            return self.finish("void", void_reason=f"runner interrupted ({exc}) during {self.phase}")
        except Exception as exc:
            full = full_disk(exc, self.wh.home)
            self._stop_current()
            if full is not None:
                self._disk_full(full)
            return self.finish(
                "void", void_reason=f"runner error during {self.phase}: {type(exc).__name__}: {exc}"[:500]
            )
        finally:
            self._restore_signals(old)

    def _stop_current(self) -> None:
        """Stop the engine that is running, recording its stop when the disk lets us (a full disk
        must not leave an engine behind)."""
        er = self.current_engine
        if er is not None and er.stopped_at is None and er.proc is not None:
            phase = self.phase
            try:
                self.stop_engine(er, record=True)
            except Exception as exc:
                if er.stopped_at is None:
                    er.stop(self.task.start_stop.sigterm_grace_seconds)
                self.current_engine = None
                if full_disk(exc, self.wh.home) is None:
                    raise
            self.phase = phase

    def _disk_full(self, full: DiskFull) -> None:
        """The host's disk is full: the arena's side failed, so the evaluation is void. Say so in
        one line, mark it void if the status row still fits, and raise the DiskFull for the
        caller's one line; a row that did not fit leaves it `running`, which `--resume` (after
        space is freed) marks void. Rows already stored are whole parts and stay."""
        phase = self.phase
        try:
            self.finish("void", void_reason=f"{full} during {phase}")  # says so, in one line
        except Exception as exc:
            if full_disk(exc, self.wh.home) is None:
                raise
        if self.row.get("status") == "void":
            hint = f"evaluation {self.eid} is void (during {phase}), rows stored are kept; free space before the next"
        else:
            hint = (
                f"evaluation {self.eid} stays {self.row.get('status')} (during {phase}), rows stored are kept; "
                f"free space, then `arena evaluate --resume {self.eid}`"
            )
        raise DiskFull(full.path, full.detail, hint=hint)

    def _install_signals(self):
        if threading.current_thread() is not threading.main_thread():
            return None

        def handler(signum, _frame):
            raise RunnerInterrupted(signal.Signals(signum).name)

        return {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGINT)}

    @staticmethod
    def _restore_signals(old) -> None:
        for s, h in (old or {}).items():
            signal.signal(s, h)

    def protect_home(self) -> None:
        """The engine's user must not read the warehouse or the runner's files (section 9).

        Others get nothing; the directory's group may read `raw` and `runs`: the API, run as a user
        of its own (docs/operators.md), reads statuses and scores through it, and the engine's
        user is in no group of the arena."""
        for sub, mode in (("raw", 0o750), ("runs", 0o750), ("dagster", stat.S_IRWXU)):
            d = self.wh.home / sub
            d.mkdir(parents=True, exist_ok=True)
            os.chmod(d, mode)

    def _run(self) -> str:
        s = self.spec
        self.say(f"task {s.task_id}, split {s.split}, engine {s.engine}")
        self.set_phase("preparing")
        target = Path(s.target) if s.target else self.prepare_target()
        self.target = target
        self.tokenizer = load_tokenizer(str(target))
        from speculator_arena.pools.api import load_pool

        self.pool = load_pool(s.task_id, s.split, home=self.wh.home)
        verify_sealed_inputs(s.engine, s.speculator, self.wh.home)
        cand_src = resolve_engine_path(s.engine)
        stock_src = resolve_engine_path(s.stock_engine or default_stock_engine(s.task_id, s.protocol_version))

        try:
            self._timed("candidate", cand_src)
        except EngineFailure as exc:
            return self.finish("failed", failure_reason=exc.reason)
        except ArenaVoid as exc:
            return self.finish("void", void_reason=exc.reason)
        if not self._idle_ok:
            return self.finish("void", void_reason=self._idle_reason)
        try:
            self._timed("stock", stock_src)
        except EngineFailure as exc:
            return self.finish("void", void_reason=f"stock engine: {exc.reason}")
        except ArenaVoid as exc:
            return self.finish("void", void_reason=exc.reason)
        if not self._idle_ok:
            return self.finish("void", void_reason=self._idle_reason)

        self.set_phase("probes")
        ok, reason = self._probes(cand_src, stock_src)
        if not ok:
            return self.finish("void", void_reason=reason)
        return self.finish("measured")

    def prepare_target(self) -> Path:
        from speculator_arena.checkpoints import prepare_checkpoint

        self.say("preparing the sealed target checkpoint")
        return Path(prepare_checkpoint(self.spec.task_id, home=self.wh.home))

    # ---- engines -----------------------------------------------------------------------
    def _env(self, gpu_util: float) -> dict[str, str]:
        t = self.task
        speculator = self.spec.speculator
        if not speculator:
            empty = runs_dir(self.wh, self.eid).parent.parent / "empty-speculator"
            empty.mkdir(parents=True, exist_ok=True)
            os.chmod(empty, 0o755)
            speculator = str(empty)
        py = sys.executable
        env = {
            "TARGET": str(self.target),
            "ARTIFACT": str(self.target),
            "SPECULATOR": speculator,
            "TOKENIZER": str(self.target),
            "GENERATION_CONFIG": str(self.target),
            "SERVED_NAME": t.task.model,
            "MAX_MODEL_LEN": str(t.task.max_model_len),
            "MAX_NUM_SEQS": str(t.max_num_seqs),
            "GPU_MEMORY_UTILIZATION": f"{gpu_util:.2f}",
            "PREFIX_CACHING": str(t.engine_environment.prefix_caching),
            "PATH": f"{Path(py).parent}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "PYTHONPATH": str(REPO),
            "ARENA_PYTHON": py,
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "LANG": "C.UTF-8",
            "PYTHONUNBUFFERED": "1",
        }
        if t.task.language_model_only:
            env["LANGUAGE_MODEL_ONLY"] = "1"
        for k in ("CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS", "LD_LIBRARY_PATH", "NVIDIA_VISIBLE_DEVICES"):
            if k in os.environ:
                env[k] = os.environ[k]
        return env

    def _readable(self) -> list[Path]:
        import speculator_arena

        return [
            Path(sys.executable).resolve(),
            Path(speculator_arena.__file__).parent,
            Path(sysconfig.get_paths()["purelib"]),
        ]

    def start_engine(self, name: str, src: Path, purpose: str, gpu_util: float) -> EngineRun:
        self.start_counter += 1
        er = EngineRun(
            engine=name,
            purpose=purpose,
            start_index=self.start_counter,
            src=src,
            env_vars=self._env(gpu_util),
            port=free_port(),
            private_root=runs_dir(self.wh, self.eid),
            drop_privileges=not settings.flag("ARENA_NO_PRIVILEGE_DROP"),
        )
        self.current_engine = er
        self.say(f"starting {name} engine ({purpose}, utilization {gpu_util:.2f})")
        try:
            er.start(self._readable())
        except EngineStartError as exc:
            er.cleanup()
            self.current_engine = None
            self.write("engine_starts", [er.row(self.eid, idle_ok=None, idle_s=None)])
            raise EngineFailure(f"{name} engine cannot start: {exc}") from exc
        self.set_phase(f"{name} {purpose}: waiting for /health")
        if not er.wait_healthy(self.task.start_stop.health_timeout_seconds):
            why = (
                "exited before answering /health"
                if er.died
                else f"did not answer /health within {self.task.start_stop.health_timeout_seconds:g} s"
            )
            er.died = False  # not serving yet: a failed start, not a death
            self.stop_engine(er, record=True)
            raise EngineFailure(f"{name} engine {why}")
        self.say(
            f"{name} engine healthy after {er.healthy_at - er.started_at:.1f} s"
            + ("" if er.unprivileged else f" (not unprivileged: {er.privilege_note})")
        )
        return er

    def stop_engine(self, er: EngineRun, *, record: bool) -> None:
        er.stop(self.task.start_stop.sigterm_grace_seconds)
        di = self.task.device_idle
        ok, secs = self.device.wait_idle(di.max_gib, di.within_seconds)
        self._idle_ok = ok is not False
        self._idle_reason = (
            None
            if self._idle_ok
            else (
                f"device held {di.max_gib:g} GiB or more {di.within_seconds:g} s after the {er.engine} engine stopped"
            )
        )
        if record:
            self.write("engine_starts", [er.row(self.eid, idle_ok=ok, idle_s=secs)])
        self.current_engine = None
        self.set_phase(f"{er.engine} {er.purpose}: stopped")

    # ---- timed passes ------------------------------------------------------------------
    def client_config(self, engine: str, er: EngineRun) -> ClientConfig:
        t = self.task
        return ClientConfig(
            base_url=er.base_url,
            served_name=t.task.model,
            evaluation_id=self.eid,
            engine=engine,
            sampling={"temperature": t.sampling.temperature, "top_p": t.sampling.top_p, "top_k": t.sampling.top_k},
            window=WindowRule.of(t),
            think_cap_s=t.think_time.cap_seconds,
            think_scale=t.think_time.scale_c,
            max_tokens_cap=t.max_tokens_cap,
            tokenizer=self.tokenizer,
        )

    def _timed(self, engine: str, src: Path) -> None:
        self._idle_ok, self._idle_reason = True, None
        er = self.start_engine(engine, src, "timed", self.task.engine_environment.gpu_memory_utilization)
        cfg = self.client_config(engine, er)
        for w in WORKLOADS:
            self._warmup(engine, er, cfg, w)
            for i in range(self.task.passes_per_workload):
                self._pass(engine, er, cfg, w, i)
        self.stop_engine(er, record=True)

    def _warmup(self, engine: str, er: EngineRun, cfg: ClientConfig, w: str) -> None:
        """The protocol's warm-up waves before a workload's passes: each lane sends `warmup_waves`
        requests of warm-up sessions (none when the version says 0)."""
        waves = self.task.warmup_waves
        if waves == 0:
            return
        L = self.task.lanes[w]
        pass_id = f"warmup-{w}"
        self.set_phase(f"{engine} {pass_id}")
        sessions = self.pool.warmup(self.eid, w, L)
        now = time.time()
        wl = self.task.workloads[w]
        records = asyncio.run(
            run_lanes(
                cfg,
                sessions,
                L,
                1,
                pass_id,
                now + wl.pass_seconds,
                now + wl.pass_seconds + self.task.grace_seconds,
                max_requests_per_lane=waves,
                stop_check=lambda: not er.alive(),
            )
        )
        rows = [
            record_rows(
                r,
                evaluation_id=self.eid,
                engine=engine,
                pass_id=pass_id,
                workload=w,
                pass_index=None,
                tokenizer=self.tokenizer,
            )[0]
            for r in records
        ]
        self.write("requests", rows)
        if not er.alive():
            er.died = True
            self.stop_engine(er, record=True)
            raise EngineFailure(f"{engine} engine died during {pass_id}")
        self.say(f"{engine} {pass_id}: {sum(bool(r['done']) for r in rows)}/{len(rows)} requests answered")

    def _pass_size(self, w: str, i: int, L: int, wl) -> int:
        """What to ask of the pool: the spares we want, at most what the pass's block holds."""
        n = sessions_per_pass(L, wl.interleave, wl.pass_seconds)
        blocks = getattr(self.pool, "blocks", None)
        if callable(blocks):
            start, end = blocks()[(w, i)]
            n = min(n, end - start)
        return n

    def _pass(self, engine: str, er: EngineRun, cfg: ClientConfig, w: str, i: int) -> None:
        t = self.task
        L, wl = t.lanes[w], t.workloads[w]
        pass_id = f"{w}-{i}"
        self.set_phase(f"{engine} {pass_id}")
        sessions = self.pool.passes(self.eid, w, i, self._pass_size(w, i, L, wl))
        metrics_before = scrape(er.base_url, evaluation_id=self.eid, pass_id=pass_id, engine=engine, phase="before")
        sampler = MemorySampler(self.device, t.device_idle.memory_sample_interval_seconds, er.pids).start()
        contention = (
            ContentionSampler(t.contention.sample_interval_seconds, er.pids, self.device).start()
            if t.contention is not None
            else None
        )
        started = time.time()
        ends, grace_ends = started + wl.pass_seconds, started + wl.pass_seconds + t.grace_seconds
        error = None
        try:
            records = asyncio.run(
                run_lanes(cfg, sessions, L, wl.interleave, pass_id, ends, grace_ends, stop_check=lambda: not er.alive())
            )
        finally:
            samples = sampler.stop()
            host = contention.stop() if contention is not None else []
        finished = time.time()
        died = not er.alive()
        if died:
            er.died = True
            error = f"{engine} engine died during the pass"
        metrics_after = (
            [] if died else scrape(er.base_url, evaluation_id=self.eid, pass_id=pass_id, engine=engine, phase="after")
        )
        req_rows, reply_rows = [], []
        for r in records:
            a, b = record_rows(
                r,
                evaluation_id=self.eid,
                engine=engine,
                pass_id=pass_id,
                workload=w,
                pass_index=i,
                tokenizer=self.tokenizer,
            )
            req_rows.append(a)
            reply_rows.append(b)
        is_counted = [
            counted_row(row, slack=t.count_slack_tokens, ends_at=ends, grace_ends_at=grace_ends) for row in req_rows
        ]
        self.records[engine].extend(r for r, c in zip(records, is_counted) if c)
        self.write("requests", req_rows)
        self.write("replies", reply_rows)
        self.write("memory", [dict(s, evaluation_id=self.eid, pass_id=pass_id, engine=engine) for s in samples])
        self.write("contention", [dict(h, evaluation_id=self.eid, pass_id=pass_id, engine=engine) for h in host])
        self.write("metrics", metrics_before + metrics_after)
        self.write(
            "sessions",
            [
                {"pass_id": pass_id, "engine": engine, "session_id": s.session_id, "family": s.family, "app": s.app}
                for s in sessions
            ],
        )
        self.write(
            "passes",
            [
                {
                    "evaluation_id": self.eid,
                    "pass_id": pass_id,
                    "engine": engine,
                    "workload": w,
                    "pass_index": i,
                    "lanes": L,
                    "interleave": wl.interleave,
                    "started_at": started,
                    "ends_at": ends,
                    "grace_ends_at": grace_ends,
                    "finished_at": finished,
                    "status": "aborted" if died else "complete",
                    "error": error,
                    "memory_status": "sampled" if self.device.available else "unavailable",
                    "memory_note": None if self.device.available else self.device.reason,
                    "device_total_bytes": self.device.total_bytes,
                    "gpu_memory_utilization": t.engine_environment.gpu_memory_utilization,
                }
            ],
        )
        toks = sum(r["output_tokens"] for r, c in zip(req_rows, is_counted) if c)
        peak = max((s["used_bytes"] for s in samples if s["used_bytes"] is not None), default=None)
        foreign = sum(h.get("foreign_cpu_seconds") or 0.0 for h in host) / max(finished - started, 1e-9)
        self.say(
            f"{engine} {pass_id}: {sum(is_counted)}/{len(req_rows)} requests counted, {toks} tokens"
            + (f", peak device memory {peak / 2**30:.2f} GiB" if peak is not None else "")
            + (f", foreign CPU {foreign:.2f} cores" if host else "")
        )
        if died:
            self.stop_engine(er, record=True)
            raise EngineFailure(f"{engine} engine died during {pass_id}")
        why = pass_rows_contended(host, t.contention) if t.contention is not None else None
        if why:
            self.stop_engine(er, record=True)
            raise ArenaVoid(f"host contended ({engine} {pass_id}: {why})")

    # ---- probes ------------------------------------------------------------------------
    def _probes(self, cand_src: Path, stock_src: Path) -> tuple[bool, str | None]:
        util = self.task.engine_environment.probe_gpu_memory_utilization
        g = self.task.gates
        greedy = self.pool.greedy_prompts(g.greedy_agreement.prompts)
        texts = self.pool.fidelity_texts(g.target_fidelity.texts)
        samples = {
            e: probes_mod.sample_replies(self.records[e], g.sampled_likelihood.replies, self.eid)
            for e in ("candidate", "stock")
        }
        runner = probes_mod.ProbeRunner(self.eid, self.tokenizer, self.task, self.say)

        # Candidate: its greedy replies and fidelity scores.
        try:
            er = self.start_engine("candidate", cand_src, "probe", util)
        except EngineFailure as exc:
            self.write("probe_greedy", runner.unanswered_greedy("candidate", greedy, exc.reason))
            self.write("probe_fidelity", runner.unanswered_fidelity("candidate", texts, exc.reason))
        else:
            self.set_phase("candidate probes")
            self.write("probe_greedy", runner.greedy("candidate", er.base_url, greedy, alive=er.alive))
            self.write("probe_fidelity", runner.fidelity("candidate", er.base_url, texts, alive=er.alive))
            self.stop_engine(er, record=True)
        if not self._idle_ok:
            return False, self._idle_reason

        # Stock: its greedy replies, fidelity scores, and the scoring of both engines' replies.
        try:
            er = self.start_engine("stock", stock_src, "probe", util)
        except EngineFailure as exc:
            return False, f"stock engine (probes): {exc.reason}"
        self.set_phase("stock probes")
        rows_g = runner.greedy("stock", er.base_url, greedy, alive=er.alive)
        rows_f = runner.fidelity("stock", er.base_url, texts, alive=er.alive)
        rows_s = []
        for reply_engine in ("candidate", "stock"):
            rows_s += runner.scored(reply_engine, er.base_url, samples[reply_engine], alive=er.alive)
        self.write("probe_greedy", rows_g)
        self.write("probe_fidelity", rows_f)
        self.write("probe_scored", rows_s)
        self.stop_engine(er, record=True)
        limit = self.task.gates.answering.max_unanswered_share
        for check, rows in (("greedy agreement", rows_g), ("target fidelity", rows_f), ("likelihood scoring", rows_s)):
            if over_limit(sum(not r["answered"] for r in rows), len(rows), limit)[0]:
                return False, f"stock engine left more than {limit:.0%} of the {check} probes unanswered"
        if not self._idle_ok:
            return False, self._idle_reason
        return True, None


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
    if row["status"] == "running" and runner_alive(state):
        raise EvaluationStateError(f"evaluation {evaluation_id} is still running under pid {state.get('pid')}")
    if row["status"] == "queued":
        raise EvaluationStateError(f"evaluation {evaluation_id} is queued, not started: run it instead of resuming")
    _kill_leftovers(state)
    phase = state.get("phase") or "an unknown phase"
    write_status(wh, row, "void", void_reason=f"runner died during {phase}", provenance={"resumed_by": own_identity()})
    write_state(wh, evaluation_id, phase="finished: void (runner died)", engine_pgid=None, engine_workspace=None)
    say(f"[evaluate {evaluation_id}] void: runner died during {phase}; stored rows kept")
    return "void"


def _kill_leftovers(state: dict) -> None:
    from speculator_arena.runners.lifecycle import kill_user_processes, remove_shm

    pgid = state.get("engine_pgid")
    if pgid:
        try:
            os.killpg(int(pgid), signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    ws = state.get("engine_workspace")
    if ws and Path(ws).name.startswith("arena-engine-"):
        import shutil

        shutil.rmtree(ws, ignore_errors=True)
    uid = state.get("engine_uid")
    if uid is not None and os.geteuid() == 0:
        import pwd

        try:
            name = pwd.getpwuid(int(uid)).pw_name
        except KeyError:
            return
        kill_user_processes(name, int(uid))
        remove_shm(owner_uid=int(uid))
