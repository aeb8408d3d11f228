"""An engine started in another container of the pod, through that container's supervisor.

Why: in a Kubernetes pod under Pod Security `restricted` the runner cannot switch users, so the
engine runs in a container of its own, under a uid of its own, which mounts only the sealed
target, the speculator and the engine, read-only (backends/kubernetes/manifests.py). The runner
still starts and stops every engine (the candidate, the stock engine, their probe restarts), so
that container runs a small supervisor (backends/kubernetes/engine_sidecar.py) which the runner
drives over the pod's loopback (`ARENA_ENGINE_SIDECAR`): start this engine on this port with this
environment, stop it and hand back its log. What the arena measures stays outside the engine's
reach: `/health` and every request go from the runner to the engine's port directly, the runner
reads the engine's processes from /proc itself (the pod shares one process namespace) and the
device through NVML itself (the GPU the supervisor reported before any engine ran).

The supervisor runs under the engine's uid, so an engine can kill or replace it. The runner
trusts only what it checks: the supervisor's identity (pid, uid and start time, read from /proc)
is taken before any engine runs and compared on every call, and after every stop the runner
lists the engine uid's processes itself. A changed supervisor, or a process left but the
supervisor, voids the evaluation (a leftover could slow the stock engine), as a device still held
after a stop does (engines.py).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from speculator_arena import settings
from speculator_arena.errors import ArenaError
from speculator_arena.runners.failures import ArenaVoid
from speculator_arena.runners.lifecycle import EngineRun, EngineStartError, _proc_pids, user_name

# The device variables come from the engine's container (the device plugin sets them there),
# never from the runner's.
DEVICE_VARIABLES = ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES")


class SidecarError(RuntimeError, ArenaError):
    """The supervisor did not answer, answered what it must not, or is not the one it was."""


class SidecarRefused(SidecarError):
    """The supervisor could not start the engine (no launch.sh, a bad archive): the engine's fault."""


def address() -> str | None:
    return settings.get("ARENA_ENGINE_SIDECAR")


def identity(pid: int) -> tuple[int, int] | None:
    """(uid, start time in clock ticks) of a live process as /proc shows it, else None."""
    try:
        uid = Path(f"/proc/{pid}").stat().st_uid
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    if fields[0] == "Z":
        return None
    return uid, int(fields[19])  # field 22 of stat: starttime


@dataclass(frozen=True)
class Supervisor:
    url: str
    pid: int
    uid: int
    started: int  # /proc/<pid>/stat starttime
    gpu: dict  # what NVML showed the supervisor at its start: uuid, name, reason

    @classmethod
    def connect(cls, where: str, timeout_s: float) -> Supervisor:
        """Wait for the supervisor's hello; check it against /proc before any engine runs."""
        url = f"http://{where}"
        deadline = time.time() + timeout_s
        last = None
        while True:
            try:
                hello = httpx.get(f"{url}/hello", timeout=5.0, trust_env=False).json()
                break
            except (httpx.HTTPError, ValueError) as exc:
                last = exc
            if time.time() >= deadline:
                raise SidecarError(f"the engine sidecar at {where} did not answer within {timeout_s:g} s: {last}")
            time.sleep(0.25)
        pid, uid = int(hello["pid"]), int(hello["uid"])
        seen = identity(pid)
        if seen is None or seen[0] != uid:
            raise SidecarError(
                f"the engine sidecar's process {pid} (uid {uid}) is not visible here: the pod must share "
                "its process namespace (shareProcessNamespace)"
            )
        if hello.get("starts"):
            raise SidecarError(f"the engine sidecar started {hello['starts']} engine(s) before the runner asked")
        return cls(url, pid, uid, seen[1], hello.get("gpu") or {})

    def check(self) -> None:
        if identity(self.pid) != (self.uid, self.started):
            raise SidecarError(f"the engine sidecar's supervisor (pid {self.pid}) is gone or was replaced")

    def call(self, method: str, path: str, body: dict | None = None, timeout_s: float = 30.0) -> dict:
        self.check()
        try:
            r = httpx.request(method, f"{self.url}{path}", json=body, timeout=timeout_s, trust_env=False)
            out = r.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise SidecarError(f"the engine sidecar did not answer {method} {path}: {exc}") from exc
        if r.status_code == 422:
            raise SidecarRefused(str(out.get("error")))
        if r.status_code != 200:
            raise SidecarError(f"the engine sidecar answered {method} {path} with {r.status_code}: {out}")
        self.check()
        return out

    def engine_pids(self) -> list[int]:
        """Every live process of the engine's uid (the supervisor among them), from /proc."""
        return _proc_pids(uid=self.uid)


_connected: dict[str, Supervisor | SidecarError] = {}


def supervisor(timeout_s: float = 60.0) -> Supervisor | None:
    """This process's supervisor (connected once; a failed connection fails again at once), or
    None when engines run here."""
    where = address()
    if not where:
        return None
    if where not in _connected:
        try:
            _connected[where] = Supervisor.connect(where, timeout_s)
        except SidecarError as exc:
            _connected[where] = exc
    found = _connected[where]
    if isinstance(found, SidecarError):
        raise found
    return found


def gpu_uuid() -> str | None:
    """The engine's GPU as its container's NVML named it (None: no sidecar, none reachable, or no
    GPU there; an unreachable supervisor voids the evaluation when an engine is to start)."""
    try:
        sup = supervisor()
    except SidecarError:
        return None
    return (sup.gpu or {}).get("uuid") if sup else None


class _RemoteProcess:
    """The engine's process group leader in the other container, as `EngineRun` polls it: alive
    while /proc shows it; its exit code, once gone, from the supervisor (its parent)."""

    def __init__(self, sup: Supervisor, pid: int):
        self.sup, self.pid, self.returncode = sup, pid, None

    def poll(self) -> int | None:
        if self.returncode is None and identity(self.pid) is None:
            try:
                code = self.sup.call("GET", "/engine").get("exit_code")
            except SidecarError:
                code = None
            self.returncode = -1 if code is None else int(code)
        return self.returncode

    def wait(self, timeout=None) -> int | None:
        return self.poll()


@dataclass
class SidecarEngineRun(EngineRun):
    """`EngineRun` with its process in the engine's container; see the module's docstring."""

    supervisor: Supervisor | None = None
    log: str = ""
    sidecar_error: str | None = field(default=None, repr=False)

    def start(self, readable: list[Path]) -> None:
        sup = self.supervisor
        self.user, self.uid = user_name(sup.uid), sup.uid
        self.unprivileged = sup.uid != os.geteuid()
        if not self.unprivileged:
            self.privilege_note = "the engine's container runs under the runner's uid"
        self.started_at = time.time()
        try:
            out = sup.call(
                "POST",
                "/start",
                {
                    "src": str(self.src),
                    "env": self.env_vars,
                    "port": self.port,
                    "name": f"{self.engine}-{self.purpose}-{self.start_index}",
                },
                timeout_s=120.0,
            )
        except SidecarRefused as exc:
            raise EngineStartError(str(exc)) from exc
        except SidecarError as exc:
            raise ArenaVoid(f"engine sidecar: {exc}") from exc
        self.proc = _RemoteProcess(sup, int(out["pgid"]))

    def pids(self) -> list[int]:
        if self.proc is None:
            return []
        if not self.unprivileged:  # the runner's own processes share the uid: the group only
            return _proc_pids(pgid=self.proc.pid)
        return self.supervisor.engine_pids()

    def stop(self, sigterm_grace_s: float) -> None:
        """The supervisor stops the engine; the runner then checks that nothing of it is left."""
        if self.proc is None:
            return
        sup = self.supervisor
        try:
            out = sup.call("POST", "/stop", {"grace_s": sigterm_grace_s}, timeout_s=sigterm_grace_s + 60.0)
            self.stop_signal, self.exit_code, self.log = (
                out.get("stop_signal"),
                out.get("exit_code"),
                out.get("log", ""),
            )
        except SidecarError as exc:
            self.stop_signal, self.sidecar_error = "unknown", str(exc)
        self.stopped_at = time.time()
        left = self._left()
        for _ in range(20):  # a process the supervisor just SIGKILLed may still be on its way out
            if not left:
                break
            time.sleep(0.1)
            left = self._left()
        if self.sidecar_error:
            self.stop_problem = f"engine sidecar: {self.sidecar_error}"
        elif left:
            self.stop_problem = f"the {self.engine} engine left processes {left} running after its stop"

    def _left(self) -> list[int]:
        """The engine's processes still alive after its stop, as the runner sees them."""
        if not self.unprivileged:
            return _proc_pids(pgid=self.proc.pid)
        return [p for p in self.supervisor.engine_pids() if p != self.supervisor.pid]

    def cleanup(self) -> None:
        """Nothing of the engine is on the runner's side; the supervisor cleans its container."""

    def log_text(self) -> str:
        return self.log
