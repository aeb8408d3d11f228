"""The intake's child processes: extraction, sealing and repository fetches run in a process of
their own, in a fresh empty directory, under OS limits and, when the API runs as root, as the
dedicated unprivileged user `arena-intake`.

Why: the checks of an archive or a repository are code, and code has bugs. Run this way, a
member that a check misjudges can write only where that user can write (its own sandbox), read
only what it can read (not the warehouse, the hidden pools, other sealed engines or the
accounts database), and a bomb of any kind ends at the child's address-space, file-size,
open-file or CPU-time limit (`resource.setrlimit`, set by the child before it reads a byte of
the submission) or at the parent's wall-clock deadline, with the API's own memory untouched.

The parent writes the job (one JSON line) and the archive's bytes to the child's stdin and reads
one JSON line back; everything the child made is in its directory, which the parent takes over
(ownership back to the API's user) and removes, whatever happened. Each child is a process
group of its own, killed whole when it ends, so nothing it started lingers. A child killed
midway leaves only its directory, which the parent removes (or, if the parent died too, the
next start of the API).

When the API is not root it cannot switch users: the child then runs as the API's user (the
docs say how operators run it: a user owning only `frontdoor/` and `sealed/`). When root but the
intake user cannot run the interpreter or reach the staging directory (an interpreter under
/root, an ARENA_HOME under a private folder), the child runs as the API's user too; the API says
so on its log, and every sealed manifest records the user its intake ran as.
"""

from __future__ import annotations

import functools
import json
import os
import pwd
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import speculator_arena
from speculator_arena.sealed.refusal import Refused
from speculator_arena.sealed.trees import remove_tree, walk_at
from speculator_arena.system_users import system_user

INTAKE_USER = "arena-intake"
WORKER_MODULE = "speculator_arena.frontdoor.worker"
PACKAGE_ROOT = str(Path(speculator_arena.__file__).resolve().parent.parent)
MAX_RESULT_BYTES = 1 << 20
MAX_STDERR_BYTES = 16 * 1024


@dataclass(frozen=True)
class Limits:
    """What one child may use (RLIMIT_* and the parent's own deadline)."""

    wall_s: float
    cpu_s: int
    address_space: int
    file_size: int
    open_files: int = 256

    def as_job(self) -> dict:
        return asdict(self)


def child_env(sandbox: Path | None = None) -> dict[str, str]:
    """The child's whole environment: what Python, git and the hub client need, nothing else."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "HOME": "/nonexistent",
        "PYTHONPATH": PACKAGE_ROOT,
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
        "MALLOC_ARENA_MAX": "2",
    }
    # The hub client's endpoint and token (operators' settings of huggingface_hub), passed on.
    env.update({k: v for k, v in os.environ.items() if k.startswith("HF_") and k != "HF_HOME"})
    if sandbox is not None:
        env["HF_HOME"] = str(sandbox / "hf-home")
    return env


@functools.lru_cache(maxsize=8)
def intake_user(staging: str) -> tuple[int, int, str] | None:
    """(uid, gid, name) the children run as; None: the API's own user (not root, or the intake
    user cannot run the worker from `staging`: the reason goes to the API's log)."""
    if os.geteuid() != 0:
        return None
    pw = system_user(INTAKE_USER)
    probe = f"import os, {WORKER_MODULE}; os.stat({staging!r})"
    try:
        r = subprocess.run(
            [sys.executable, "-P", "-c", probe],
            cwd="/",
            env=child_env(),
            user=pw.pw_uid,
            group=pw.pw_gid,
            extra_groups=[],
            capture_output=True,
            text=True,
            timeout=60,
        )
        ok, why = r.returncode == 0, r.stderr.strip()[-300:]
    except (OSError, subprocess.TimeoutExpired) as exc:
        ok, why = False, str(exc)
    if not ok:
        print(
            f"[arena api] intake children run as {pwd.getpwuid(os.geteuid()).pw_name}, not {INTAKE_USER}: "
            f"{INTAKE_USER} cannot run the worker from {staging} ({why})",
            file=sys.stderr,
            flush=True,
        )
        return None
    return pw.pw_uid, pw.pw_gid, pw.pw_name


def chown_tree(root: Path, uid: int, gid: int) -> None:
    """Give a whole tree to `uid` (links themselves, never what they point at)."""
    os.chown(root, uid, gid, follow_symlinks=False)
    for _entry, fd, name in walk_at(root):
        os.chown(name, uid, gid, dir_fd=fd, follow_symlinks=False)


def _reader(stream, limit: int, keep_tail: bool, out: list[bytes]) -> None:
    """Read a child's pipe to its end, keeping at most `limit` bytes (its head, or its tail)."""
    kept = b""
    while block := stream.read(65536):
        kept = (kept + block)[-limit:] if keep_tail else kept + block[: max(limit - len(kept), 0)]
    out.append(kept)


class Sandbox:
    """A fresh empty directory under the staging folder and the children that work in it."""

    def __init__(self, staging: Path):
        self.staging = Path(staging)
        self.dir = Path(tempfile.mkdtemp(prefix=f"intake-{os.getpid()}-", dir=self.staging))
        self.user = intake_user(str(self.staging))

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        try:
            remove_tree(self.dir)
        except OSError as exc:  # the next start of the API removes it
            print(f"[arena api] staging {self.dir.name} not removed: {exc}", file=sys.stderr, flush=True)

    @property
    def user_name(self) -> str:
        return self.user[2] if self.user else pwd.getpwuid(os.geteuid()).pw_name

    def run(self, job: dict, data: bytes | None, limits: Limits, started=None) -> dict:
        """Run one job in the child; its result, or Refused. `started(pid)` is told the child's pid."""
        job = {**job, "limits": limits.as_job(), "user": self.user_name}
        if self.user:
            chown_tree(self.dir, self.user[0], self.user[1])
        ids = dict(user=self.user[0], group=self.user[1], extra_groups=[]) if self.user else {}
        proc = subprocess.Popen(
            [sys.executable, "-P", "-m", WORKER_MODULE],
            cwd=self.dir,
            env=child_env(self.dir),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            umask=0o077,
            **ids,
        )
        if started:
            started(proc.pid)
        out: list[bytes] = []
        err: list[bytes] = []
        readers = [
            threading.Thread(target=_reader, args=(proc.stdout, MAX_RESULT_BYTES, False, out), daemon=True),
            threading.Thread(target=_reader, args=(proc.stderr, MAX_STDERR_BYTES, True, err), daemon=True),
        ]
        for t in readers:
            t.start()
        deadline = time.monotonic() + limits.wall_s
        try:
            try:
                proc.stdin.write(json.dumps(job).encode() + b"\n")
                if data:
                    proc.stdin.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the child stopped reading: it refused already, or died (its status says)
            finally:
                try:
                    proc.stdin.close()
                except OSError:
                    pass
            try:
                proc.wait(timeout=max(deadline - time.monotonic(), 0.01))
            except subprocess.TimeoutExpired:
                self._kill(proc)
                raise Refused(
                    f"the intake did not finish within {limits.wall_s:.0f} s; nothing was kept", status=422
                ) from None
        finally:
            self._kill(proc)
            for t in readers:
                t.join(10)
            if self.user:  # what the child made is the API's again, before anyone reads it
                chown_tree(self.dir, os.geteuid(), os.getegid())
        return self._result(proc.returncode, b"".join(out), b"".join(err), limits)

    @staticmethod
    def _kill(proc: subprocess.Popen) -> None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass

    def _result(self, code: int, out: bytes, err: bytes, limits: Limits) -> dict:
        line = out.splitlines()[-1] if out.strip() else b""
        try:
            result = json.loads(line)
        except ValueError:
            result = None
        if isinstance(result, dict) and result.get("ok") is True and code == 0:
            return result
        if isinstance(result, dict) and result.get("ok") is False:
            raise Refused(str(result.get("error") or "refused"), status=int(result.get("status") or 400))
        tail = err.decode("utf-8", "replace").strip().splitlines()[-3:]
        if tail:
            print(f"[arena api] intake child ended {code}: {' | '.join(tail)[-500:]}", file=sys.stderr, flush=True)
        if code == -signal.SIGXCPU:
            raise Refused(f"the intake used more than its {limits.cpu_s} s of CPU; nothing was kept", status=422)
        if code == -signal.SIGXFSZ:
            raise Refused("the intake wrote a file over its size bound; nothing was kept", status=413)
        if code < 0:
            raise Refused(
                f"the intake's worker was stopped by signal {-code} before it finished; nothing was kept; submit again",
                status=503,
            )
        raise Refused(f"the intake's worker failed (exit {code}); nothing was kept", status=500)
