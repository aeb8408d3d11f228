"""The engine's first process: it runs `launch.sh serve` and makes sure that nothing the engine
starts outlives it.

Why: an engine may start children that leave its process group (`setsid`, a double fork,
`setpgid`), so a signal to the group misses them and, once their parent exits, they are
reparented to init, out of the runner's sight, spinning on the machine through every later
evaluation. This process declares itself the engine's child subreaper (Linux
`PR_SET_CHILD_SUBREAPER`): every orphan of the engine is reparented to it, never to init, so the
engine's processes are exactly this process's descendants, whatever they do to their session or
group. It forwards SIGTERM to the descendants that left its group (the group itself already got
the runner's signal); once `launch.sh` has exited, it SIGKILLs every descendant left and exits
with `launch.sh`'s status (by its signal, when a signal ended it). The runner (lifecycle.EngineRun) reads the same descendants for its
contention checks and kills them all before this process when the grace is over.

It is started as a plain script (`python -I -S reaper.py CMD...`, standard library only), so it
needs nothing of the arena's packages and runs as whatever user the engine runs as: the
engine's user (root runners), the runner's user, or the engine container's uid (Kubernetes).
A user's own processes the engine did not start are never touched: only descendants are.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time

PR_SET_CHILD_SUBREAPER = 36


def _parents() -> dict[int, list[int]]:
    """ppid -> live child pids, read from /proc (zombies included: they are reaped, not killed)."""
    out: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        out.setdefault(int(fields[1]), []).append(int(entry))
    return out


def descendants(root: int) -> list[int]:
    """Every process below `root` in the process tree (children, their children, ...)."""
    tree = _parents()
    found, stack = [], [root]
    while stack:
        for child in tree.get(stack.pop(), ()):
            found.append(child)
            stack.append(child)
    return found


def _signal(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _reap() -> None:
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass


def kill_descendants(root: int, within_s: float = 15.0, reap: bool = False) -> list[int]:
    """SIGKILL every descendant of `root` until none is left (a process forking meanwhile leaves an
    orphan that is reparented to the subreaper and found on the next round); return what is left."""
    deadline = time.time() + within_s
    while True:
        left = [p for p in descendants(root) if alive(p)]
        if not left or time.time() > deadline:
            return left
        _signal(left, signal.SIGKILL)
        if reap:
            _reap()
        time.sleep(0.02)


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def is_reaper(pid: int) -> bool:
    """Whether `pid` is a live engine reaper (a stored pid may belong to another process by now)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            args = fh.read().split(b"\0")
    except OSError:
        return False
    return alive(pid) and any(a.endswith(b"/reaper.py") for a in args[:4])


def main(argv: list[str]) -> int:
    if not argv:
        print("reaper: no command", file=sys.stderr)
        return 2
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        print(f"reaper: prctl(PR_SET_CHILD_SUBREAPER) failed: errno {ctypes.get_errno()}", file=sys.stderr)
        return 127
    me, group = os.getpid(), os.getpgrp()

    def forward(_signum, _frame) -> None:
        # the runner signalled the group; the descendants that left it get the same SIGTERM
        _signal([p for p in descendants(me) if _pgid(p) != group], signal.SIGTERM)

    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, forward)
    child = os.fork()
    if child == 0:
        for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(s, signal.SIG_DFL)
        try:
            os.execvp(argv[0], argv)
        finally:
            os._exit(127)
    code = 0
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            break
        if pid == child:
            code = os.waitstatus_to_exitcode(status)
            break
    kill_descendants(me, reap=True)
    _reap()
    if code < 0:  # ended by a signal: end the same way, so the runner reads the engine's own status
        signal.signal(-code, signal.SIG_DFL)
        os.kill(me, -code)
    return code


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except (ProcessLookupError, PermissionError):
        return None


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
