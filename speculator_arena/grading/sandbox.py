"""The project's sandbox for untrusted generated code: `run_program(source)` runs one Python
program (a model's answer under test) confined, and says only how it ended.

Why its own sandbox and never `exec()`: a model's program is arbitrary code; graded in the
arena's process it could read the pool key or the hidden items, write anywhere the arena can,
call out, or leave processes spinning through later evaluations. The confinement itself is done
by `launcher.py` (a plain script, standard library only) between fork and exec; this module
prepares its run folder, starts it with a wall-clock backstop, and reads what it left:

- its own system user `arena-code` (as root; otherwise the current user, `isolated` False),
- no network (a fresh network namespace with no interface up), a private mount namespace in which
  the arena home, the repository, /root and /home are hidden and /tmp is empty,
- an empty private work folder (a small tmpfs owned by that user) holding only a copy of the
  program, so it runs wherever the repository lives,
- rlimits on CPU seconds, address space, file size, processes and open files; stdin on /dev/null;
  `python -I -S`; a wall-clock limit, after which it and every process it started are killed.

The result carries no text of the program: a verdict, the exit code, and a short detail (the
last exception's type name at most).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from speculator_arena.grading.result import REFUSED_VERDICT
from speculator_arena.settings import arena_home
from speculator_arena.system_users import system_user

CODE_USER = "arena-code"
LAUNCHER = Path(__file__).with_name("launcher.py")
REPOSITORY = Path(__file__).resolve().parents[2]
MAX_PROGRAM_BYTES = 1 << 20
_EXC_NAME = re.compile(r"^([A-Za-z_][\w.]*)(?::|$)")


@dataclass(frozen=True)
class Limits:
    """What one program may use. Defaults fit a HumanEval check (a few ms of stdlib Python)."""

    wall_s: float = 10.0
    cpu_s: int = 10
    address_bytes: int = 1 << 30  # the interpreter alone maps ~30 MB; a runaway allocation stops here
    file_bytes: int = 1 << 20  # any file it writes, its captured output included
    processes: int = 16  # RLIMIT_NPROC of the sandbox user (as the current user: added to its count)
    open_files: int = 64
    work_bytes: int = 8 << 20  # its private work folder (root: a tmpfs of this size)


@dataclass(frozen=True)
class SandboxResult:
    """How one program ended. `verdict`: pass (exit 0), fail (any other end of the program),
    timeout (wall clock or CPU seconds), refused (not run: too large, or isolation required and
    not available), error (the sandbox itself failed)."""

    verdict: str
    exit_code: int | None
    detail: str
    isolated: bool  # ran as its own user in its own namespaces
    network_cut: bool
    wall_s: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def _interpreter() -> str:
    """The base interpreter (not the venv's link): the program needs only the standard library,
    and the repository that holds the venv is hidden from it."""
    return os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)


def _hidden_paths(home, interpreter: str) -> list[str]:
    """Folders the program must not see, outermost only, none that holds the interpreter."""
    wanted = {str(arena_home(home)), str(REPOSITORY), "/root", "/home"}
    out: list[str] = []
    for p in sorted(os.path.realpath(w) for w in wanted):
        if p == "/" or any(p == q or p.startswith(q + "/") for q in out) or interpreter.startswith(p + "/"):
            continue
        out.append(p)
    return out


def _user_processes(uid: int) -> int:
    n = 0
    for entry in os.listdir("/proc"):
        try:
            n += entry.isdigit() and os.stat(f"/proc/{entry}").st_uid == uid
        except OSError:
            continue
    return n


def _detail(stderr: bytes, code: int | None) -> str:
    """The last exception's type name, never its message or a source line (either may quote the
    program or the test)."""
    for line in reversed(stderr.decode("utf-8", "replace").strip().splitlines()[-20:]):
        m = _EXC_NAME.match(line.strip())
        if m and not line.startswith(" "):
            return m.group(1)[:80]
    if code is not None and code < 0:
        return f"killed by signal {-code}"
    return f"exit code {code}"


def run_program(
    source: str, limits: Limits | None = None, *, home=None, require_isolation: bool = False
) -> SandboxResult:
    """Run `source` as a Python program in the sandbox and return how it ended (never raises for
    what the program does)."""
    limits = limits or Limits()
    data = source.encode("utf-8", "surrogatepass")
    as_root = os.geteuid() == 0
    if len(data) > MAX_PROGRAM_BYTES or b"\0" in data:
        return SandboxResult(REFUSED_VERDICT, None, "program too large or not text", as_root, as_root)
    if require_isolation and not as_root:
        return SandboxResult(REFUSED_VERDICT, None, "isolation required: the sandbox needs root", False, False)
    uid = gid = None
    processes = limits.processes
    if as_root:
        user = system_user(CODE_USER)
        uid, gid = user.pw_uid, user.pw_gid
    else:
        processes += _user_processes(os.geteuid())
    interpreter = _interpreter()
    run_dir = Path(tempfile.mkdtemp(prefix="arena-code-"))  # 0700, the launcher's (root's) only
    try:
        program = run_dir / "program.py"
        program.write_bytes(data)
        config = {
            "run_dir": str(run_dir),
            "program_path": str(program),
            "uid": uid,
            "gid": gid,
            "interpreter": interpreter,
            "hide": _hidden_paths(home, interpreter),
            "wall_s": limits.wall_s,
            "work_bytes": limits.work_bytes,
            "limits": {
                "cpu_s": limits.cpu_s,
                "address_bytes": limits.address_bytes,
                "file_bytes": limits.file_bytes,
                "open_files": limits.open_files,
                "processes": processes,
            },
        }
        (run_dir / "config.json").write_text(json.dumps(config))
        return _launch(run_dir, interpreter, limits)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


def _launch(run_dir: Path, interpreter: str, limits: Limits) -> SandboxResult:
    argv = [interpreter, "-I", "-S", str(LAUNCHER), str(run_dir / "config.json")]
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        _, launcher_err = proc.communicate(timeout=limits.wall_s + 15)
    except subprocess.TimeoutExpired:  # the launcher is stuck: ask it to kill everything, then kill it
        proc.terminate()
        try:
            _, launcher_err = proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            return SandboxResult("error", None, "the sandbox launcher did not end", False, False)
    try:
        status = json.loads((run_dir / "status.json").read_text())
    except (OSError, ValueError):
        tail = launcher_err.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no status"]
        return SandboxResult("error", None, f"sandbox launcher failed: {tail[0][:200]}", False, False)
    isolated, cut = bool(status.get("isolated")), bool(status.get("network_cut"))
    wall = status.get("wall_s")
    if status.get("setup_error"):
        return SandboxResult("error", None, f"sandbox setup failed: {status['setup_error'][:200]}", isolated, cut)
    if status.get("left"):
        return SandboxResult("error", None, f"{len(status['left'])} processes survived the kill", isolated, cut, wall)
    code = status.get("exit_code")
    stderr = _tail(run_dir / "stderr")
    if status.get("timed_out"):
        return SandboxResult("timeout", code, f"wall clock over {limits.wall_s:g} s", isolated, cut, wall)
    cpu_out = code == -signal.SIGXCPU or (code == -signal.SIGKILL and (wall or 0) >= limits.cpu_s)
    if cpu_out:  # the soft CPU limit's SIGXCPU, or the hard limit's SIGKILL a second later
        return SandboxResult("timeout", code, f"CPU time over {limits.cpu_s} s", isolated, cut, wall)
    if code == 0:
        return SandboxResult("pass", 0, "exit code 0", isolated, cut, wall)
    return SandboxResult("fail", code, _detail(stderr, code), isolated, cut, wall)


def _tail(path: Path, size: int = 8192) -> bytes:
    try:
        with open(path, "rb") as fh:
            fh.seek(max(0, os.fstat(fh.fileno()).st_size - size))
            return fh.read()
    except OSError:
        return b""
