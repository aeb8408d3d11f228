"""Engine lifecycle (sections 3 and 7): unpack, start as the engine's user, wait for
`/health`, stop with SIGTERM then SIGKILL, and leave nothing behind for the next engine.

Why an unprivileged user: the engine is untrusted code; run as `arena-engine` it cannot read
the arena's private directories (the warehouse, the hidden pool), and after a stop every
process of that user can be killed and every shared-memory file it owns removed, so that
leftovers cannot slow the stock engine (section 9). A root runner whose engine user cannot
reach what the engine runs refuses (privileges.py), never falls back to root. When the runner is
not root it cannot switch users; the start is then recorded `unprivileged: false`, never hidden.
Whatever the user, the engine's first process is the subreaper of reaper.py, so every process
the engine starts (setsid, double fork) stays its descendant and is stopped with it.

About 400 lines, kept whole: start, health wait and stop share the process group, the user and
the workspace of one `EngineRun`, and a stop must undo exactly what its start did.
"""

from __future__ import annotations

import functools
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from speculator_arena.errors import ArenaError
from speculator_arena.runners import reaper
from speculator_arena.runners.freezer import EngineCgroup
from speculator_arena.runners.privileges import ENGINE_USER, PrivilegeRefused, unreachable_reason, user_can_read
from speculator_arena.sealed.archive import check_tree, engine_root, extract_archive
from speculator_arena.sealed.plugins import PluginInstallError, install_plugins, with_plugin_path
from speculator_arena.sealed.refusal import Refused
from speculator_arena.system_users import system_user

LOG_HEAD = 32_000
LOG_TAIL = 32_000

# Start-up log lines that report weights or KV blocks in host memory (section 7, "No offload").
OFFLOAD_PATTERNS = [
    re.compile(r"cpu_offload_gb['\"]?\s*[=:]\s*(?!0(?:\.0*)?\b)\d", re.I),
    re.compile(r"\bCPU offload", re.I),
    re.compile(r"\boffload(?:ed|ing)\b.*\b(?:weights?|layers?|KV|blocks?|cpu|host)\b", re.I),
    re.compile(r"\b(?:kv|weights?)[_ ]offload", re.I),
]


class EngineStartError(RuntimeError, ArenaError):
    """The engine directory cannot be started at all (no launch.sh, bad archive)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def detect_offload(log_text: str) -> tuple[bool, str | None]:
    for line in log_text.splitlines():
        for pat in OFFLOAD_PATTERNS:
            if pat.search(line):
                return True, line.strip()[:500]
    return False, None


def unpack_engine(src: Path, dest: Path) -> Path:
    """Copy an engine directory, or extract a `.tar.gz`, into `dest`; return the dir holding launch.sh.

    Archives go through the sealed store's extractor (`sealed/archive.py`: no write through a
    link, headers bounded, every link checked by its real path once out), the one the intake
    uses for inline engines; operators' archives have no byte bound there.
    """
    src = Path(src)
    if src.is_dir():
        shutil.copytree(src, dest, symlinks=True)
    elif src.is_file() and src.name.endswith((".tar.gz", ".tgz")):
        try:
            with open(src, "rb") as fh:
                extract_archive(fh, dest, max_bytes=None, max_members=None, what=f"engine archive {src.name}")
            check_tree(dest, what=f"engine archive {src.name}")
        except Refused as exc:
            raise EngineStartError(f"engine archive {src} cannot be extracted: {exc.reason}") from exc
    else:
        raise EngineStartError(f"engine {src} is neither a directory nor a .tar.gz archive")
    try:
        return engine_root(dest)
    except Refused as exc:
        raise EngineStartError(f"engine {src} has no launch.sh at its top") from exc


def user_name(uid: int) -> str:
    """The account's name, or `uid N` for a uid without one (a container's `runAsUser`)."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def ensure_engine_user(name: str = ENGINE_USER) -> pwd.struct_passwd:
    return system_user(name)


def stage_tree(src: Path, dest: Path) -> Path:
    """Hard-link a read-only checkpoint into the engine's workspace (copy across devices).

    Access to a hard link depends on the file's own mode, not on the directories above the
    original, so a sealed target under a private directory becomes readable without copying.
    """
    for root, _dirs, files in os.walk(src):
        rel = Path(root).relative_to(src)
        (dest / rel).mkdir(parents=True, exist_ok=True)
        for f in files:
            s, d = Path(root) / f, dest / rel / f
            try:
                os.link(s, d)
            except OSError:
                shutil.copy2(s, d)
    return dest


def _proc_pids(pgid: int | None = None, uid: int | None = None) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        try:
            if pgid is not None:
                stat = Path(f"/proc/{pid}/stat").read_text()
                fields = stat.rsplit(")", 1)[1].split()
                if int(fields[2]) == pgid and fields[0] != "Z":
                    out.append(pid)
                    continue
            if uid is not None and Path(f"/proc/{pid}").stat().st_uid == uid:
                stat = Path(f"/proc/{pid}/stat").read_text()
                if stat.rsplit(")", 1)[1].split()[0] != "Z":
                    out.append(pid)
        except (OSError, IndexError, ValueError):
            continue
    return sorted(set(out))


@functools.cache
def default_signals() -> list[str]:
    """The prefix that starts an engine with every signal at its default disposition.

    Why: a signal the runner's process ignores stays ignored across fork and exec, and Popen
    restores only SIGPIPE, SIGXFZ and SIGXFSZ. An engine started while the runner ignored SIGTERM
    (seen in CI: `SigIgn` of the stand-in engine held SIGTERM, which the stand-in never ignores)
    cannot be stopped by the protocol's SIGTERM and was killed after the grace; a shell cannot
    undo an ignored signal, coreutils' `env --default-signal` can. Empty where `env` lacks the
    option (a busybox image): the engine then starts as before."""
    env = shutil.which("env")
    if env is None:
        return []
    try:
        ok = subprocess.run([env, "--default-signal", "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        ok = False
    return [env, "--default-signal"] if ok else []


def _lingering(pids: list[int]) -> str:
    """The state and signal masks of the engine's processes still there after the grace: why a
    SIGTERM did not end them (blocked, ignored, pending, stopped) is what an operator asks."""
    out = []
    for pid in pids:
        try:
            status = Path(f"/proc/{pid}/status").read_text().splitlines()
        except OSError:
            continue
        keep = [x for x in status if x.split(":")[0] in ("Name", "State", "SigPnd", "ShdPnd", "SigBlk", "SigIgn")]
        out.append(f"pid {pid}: " + "; ".join(" ".join(x.split()) for x in keep))
    return " | ".join(out) or "the engine's process had not been reaped"


@dataclass
class EngineRun:
    """One start of an engine: its process, workspace, log, and what its stop found."""

    engine: str  # candidate | stock
    purpose: str  # timed | probe
    start_index: int
    src: Path
    env_vars: dict[str, str]
    port: int
    private_root: Path  # where the runner keeps the log (not readable by the engine)
    drop_privileges: bool = True
    proc: subprocess.Popen | None = None
    workspace: Path | None = None
    user: str = ""
    uid: int | None = None
    unprivileged: bool = False
    privilege_note: str | None = None
    started_at: float | None = None
    healthy_at: float | None = None
    stopped_at: float | None = None
    stop_signal: str | None = None
    stop_note: str | None = None  # what the processes left after the grace were doing (state, signals)
    exit_code: int | None = None
    died: bool = False
    log_path: Path | None = None
    shm_before: set[str] = field(default_factory=set)
    # Set by a stop that could not make sure the engine is gone (sidecar_engine.py): the
    # evaluation is void, as after a stop that leaves the device held.
    stop_problem: str | None = None
    # The interleaved pairing runs both engines at once, each as a user of its own and inside
    # control groups of its own (freezer.py: frozen while the other is measured).
    run_user: str = ENGINE_USER
    cgroup: EngineCgroup | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # ---- start -------------------------------------------------------------------------
    def start(self, readable: list[Path]) -> None:
        """Unpack and launch `launch.sh serve` in its own process group.

        `readable` lists what the engine needs to read (the target, the speculator, the Python
        that runs it); a target the engine's user cannot reach is hard-linked into its workspace.
        """
        root_mode = os.geteuid() == 0 and self.drop_privileges
        self.workspace = Path(tempfile.mkdtemp(prefix=f"arena-engine-{self.engine}-"))
        engine_dir = unpack_engine(self.src, self.workspace / "engine")
        home = self.workspace / "home"
        tmp = self.workspace / "tmp"
        home.mkdir()
        tmp.mkdir()
        env = dict(self.env_vars)
        env.update(HOME=str(home), TMPDIR=str(tmp), PORT=str(self.port))
        try:
            env = with_plugin_path(env, install_plugins(engine_dir, self.workspace, env.get("ARENA_PYTHON")))
        except PluginInstallError as exc:
            raise EngineStartError(str(exc)) from exc
        kwargs: dict = {}
        if root_mode:
            pw = ensure_engine_user(self.run_user)
            self.user, self.uid = pw.pw_name, pw.pw_uid
            staged: dict[str, str] = {}
            for key in ("TARGET", "ARTIFACT", "SPECULATOR"):
                val = env.get(key)
                if val and user_can_read(self.user, [Path(val)]):
                    staged[val] = str(stage_tree(Path(val), self.workspace / key.lower()))
            for key in ("TARGET", "ARTIFACT", "SPECULATOR", "TOKENIZER", "GENERATION_CONFIG"):
                if env.get(key) in staged:
                    env[key] = staged[env[key]]
            for d in (self.workspace, *self.workspace.rglob("*")):
                os.lchown(d, pw.pw_uid, pw.pw_gid)
            os.chmod(self.workspace, 0o700)
            needed = [p for p in readable if p] + [
                Path(env[k]) for k in ("TARGET", "ARTIFACT", "SPECULATOR") if env.get(k)
            ]
            missing = user_can_read(self.user, needed)
            if missing:  # never run it as root instead (privileges.py; the preflight says so first)
                self.privilege_note = unreachable_reason(self.user, missing)
                raise PrivilegeRefused(self.privilege_note)
            kwargs = dict(user=pw.pw_uid, group=pw.pw_gid, extra_groups=[])
            self.unprivileged = True
        else:
            self.user, self.uid = user_name(os.geteuid()), os.geteuid()
            self.privilege_note = (
                "the runner is not root and cannot switch users" if os.geteuid() != 0 else "privilege drop disabled"
            )
        self.log_path = self.private_root / f"engine-{self.engine}-{self.purpose}-{self.start_index}.log"
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.shm_before = set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()
        argv = [sys.executable, "-I", "-S", reaper.__file__, "/bin/bash", str(engine_dir / "launch.sh"), "serve"]
        if self.cgroup is not None:
            uid = kwargs.pop("user", None)
            gid = kwargs.pop("group", None)
            kwargs.pop("extra_groups", None)
            argv = self.cgroup.create().wrap(argv, uid, gid)
        argv = [*default_signals(), *argv]
        log_fh = open(self.log_path, "wb")
        self.started_at = time.time()
        try:
            self.proc = subprocess.Popen(
                argv,
                cwd=str(engine_dir),
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log_fh,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                **kwargs,
            )
        finally:
            log_fh.close()

    def wait_healthy(self, timeout_s: float, should_stop=lambda: False) -> bool:
        deadline = time.time() + timeout_s
        url = self.base_url + "/health"
        with httpx.Client(timeout=5.0, trust_env=False) as c:
            while time.time() < deadline and not should_stop():
                if self.proc.poll() is not None:
                    self.died = True
                    return False
                try:
                    with c.stream("GET", url) as resp:  # the status only: a body of any size is never read
                        healthy = resp.status_code == 200
                    if healthy:
                        self.healthy_at = time.time()
                        return True
                except httpx.HTTPError:
                    pass
                time.sleep(0.25)
        return False

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def pids(self) -> list[int]:
        """Every live process of this start: its group, its reaper's descendants (those that left
        the group included), its user's (a user of its own) and its control groups'."""
        if self.proc is None:
            return []
        own = set(_proc_pids(pgid=self.proc.pid, uid=self.uid if self.unprivileged else None))
        own |= set(self._tree())
        if self.cgroup is not None:
            own |= set(self.cgroup.pids())
        return sorted(own)

    def _tree(self) -> list[int]:
        """The reaper and its live descendants (nothing once the reaper is gone)."""
        if self.proc is None or self.proc.returncode is not None or not reaper.alive(self.proc.pid):
            return []  # (a reaped reaper's pid may be another process's by now)
        return [self.proc.pid, *(p for p in reaper.descendants(self.proc.pid) if reaper.alive(p))]

    def _left(self, pgid: int) -> list[int]:
        return sorted(set(_proc_pids(pgid=pgid)) | set(self._tree()))

    # ---- stop --------------------------------------------------------------------------
    def stop(self, sigterm_grace_s: float) -> None:
        """SIGTERM to the process group, SIGKILL after the grace; then clean up after the user."""
        if self.proc is None:
            return
        if self.cgroup is not None:
            self.cgroup.thaw()  # a frozen engine cannot act on its SIGTERM
        pgid = self.proc.pid
        if self.proc.poll() is not None and not self._left(pgid):
            self.stop_signal = "exited"
        else:
            try:
                os.killpg(pgid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            deadline = time.time() + sigterm_grace_s
            while time.time() < deadline:
                self.proc.poll()
                if self.proc.returncode is not None and not self._left(pgid):
                    break
                time.sleep(0.1)
            if self._left(pgid) or self.proc.poll() is None:
                self.stop_note = _lingering(self._left(pgid))
                # the descendants first, the reaper (the group's leader) last: killed first, it
                # would leave the processes that left the group to init
                reaper.kill_descendants(pgid)
                try:
                    os.killpg(pgid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.stop_signal = "SIGKILL"
            else:
                self.stop_signal = "SIGTERM"
        try:
            self.exit_code = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.exit_code = None
        self.stopped_at = time.time()
        self.cleanup()

    def cleanup(self) -> None:
        """Kill every process of the engine's user (and of its control groups), remove its shared
        memory and workspace."""
        if self.cgroup is not None:
            self.cgroup.remove()
        if self.unprivileged and self.uid is not None:
            kill_user_processes(self.user, self.uid)
            remove_shm(owner_uid=self.uid)
        else:
            remove_shm(owner_uid=os.geteuid(), only_new=self.shm_before)
        if self.workspace is not None:
            shutil.rmtree(self.workspace, ignore_errors=True)

    # ---- record ------------------------------------------------------------------------
    def log_text(self) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        data = self.log_path.read_bytes().decode("utf-8", "replace")
        if len(data) > LOG_HEAD + LOG_TAIL:
            data = data[:LOG_HEAD] + "\n[... log cut ...]\n" + data[-LOG_TAIL:]
        return data

    def row(self, evaluation_id: str, *, idle_ok: bool | None, idle_s: float | None) -> dict:
        log = self.log_text()
        offload, evidence = detect_offload(log)
        if self.privilege_note:
            log = f"[arena] {self.privilege_note}\n" + log
        return {
            "evaluation_id": evaluation_id,
            "engine": self.engine,
            "purpose": self.purpose,
            "start_index": self.start_index,
            "started_at": self.started_at,
            "healthy_at": self.healthy_at,
            "stopped_at": self.stopped_at,
            "exit_code": self.exit_code,
            "stop_signal": self.stop_signal,
            "run_as_user": self.user,
            "unprivileged": self.unprivileged,
            "offload_detected": offload,
            "offload_evidence": evidence,
            "died": self.died,
            "device_idle_seconds": idle_s,
            "device_idle_ok": idle_ok,
            "log_text": log,
        }


def kill_user_processes(user: str, uid: int, within_s: float = 15.0) -> None:
    """SIGKILL every process of the engine's user until none is left (pkill, by uid)."""
    deadline = time.time() + within_s
    while time.time() < deadline:
        if not _proc_pids(uid=uid):
            return
        subprocess.run(["pkill", "-KILL", "-U", str(uid)], capture_output=True)
        time.sleep(0.1)


def _shm_in_use() -> set[str]:
    """Names under /dev/shm that a live process has open or mapped."""
    used: set[str] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            for line in Path(f"/proc/{entry}/maps").read_text().splitlines():
                i = line.find("/dev/shm/")
                if i >= 0:
                    used.add(line[i + 9 :].split("/")[0].split(" ")[0])
            for fd in os.listdir(f"/proc/{entry}/fd"):
                target = os.readlink(f"/proc/{entry}/fd/{fd}")
                if target.startswith("/dev/shm/"):
                    used.add(target[9:].split("/")[0].split(" ")[0])
        except OSError:
            continue
    return used


def remove_shm(owner_uid: int, only_new: set[str] | None = None) -> list[str]:
    """Remove /dev/shm entries of the engine.

    With a user of its own: everything that user owns (its processes are all dead by now).
    Without one (the engine ran as the runner's user): only entries that appeared while it
    ran and that no live process still holds, so other work of the same user is left alone.
    """
    removed = []
    shm = Path("/dev/shm")
    if not shm.is_dir():
        return removed
    in_use = _shm_in_use() if only_new is not None else set()
    for entry in shm.iterdir():
        if entry.name in in_use:
            continue
        try:
            st = entry.lstat()
        except OSError:
            continue
        if st.st_uid != owner_uid or (only_new is not None and entry.name in only_new):
            continue
        try:
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
            removed.append(entry.name)
        except OSError:
            pass
    return removed
