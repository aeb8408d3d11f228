"""The sandbox's first process: it confines one untrusted program and makes sure nothing of it
outlives it.

Why a separate launcher script: the confinement (namespaces, mounts, rlimits, the drop to the
sandbox's own user) must happen between `fork` and `exec`, in a process that holds no threads and
no file of the arena open; the arena's process (threads, DuckDB, open files) is not that. It is
started as `python -I -S launcher.py CONFIG.json` and reads only the standard library, like
runners/reaper.py, whose subreaper idea it shares (it cannot import it: runners rank above).

As root it stays root itself (the program cannot signal or trace it) and:
- unshares a network namespace (no interface up, not even loopback: no network at all), a mount
  namespace and a PID namespace; the program is the PID namespace's first process, so when it ends
  or is killed the kernel kills every process it started, whatever they did to their session;
- mounts an empty root-owned tmpfs over /tmp, /var/tmp and /dev/shm, an empty unreadable tmpfs over
  each hidden path (the arena home, the repository, /root, /home), and the program's private work
  folder (a small tmpfs owned by the sandbox user) at /tmp/work, where it copies the program;
- forks the program, which mounts its own /proc, starts a session, sets its rlimits, drops to the
  sandbox user (no groups, no new privileges, parent-death signal SIGKILL) and execs
  `python -I -S program.py` with stdin on /dev/null and a bare environment.
Not as root it makes the same process tree (subreaper, own session, rlimits) as the current user,
tries an unprivileged user + network namespace, and reports what it got.

It enforces the wall-clock limit itself, kills every descendant when the program ends or times
out, and writes `status.json` into its run folder for the caller (grading/sandbox.py).
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import signal
import sys
import time

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REC, MS_PRIVATE = 0x4000, 1 << 18
PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS = 1, 36, 38
WORK = "/tmp/work"
SETUP_FAILED = 126  # the child could not confine itself: the program never ran

libc = ctypes.CDLL(None, use_errno=True)


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(source: str, target: str, fstype: str | None, flags: int, data: str | None) -> None:
    def enc(s: str | None) -> bytes | None:
        return None if s is None else s.encode()

    _check(libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)), f"mount {target}")


def _children() -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    out.setdefault(int(fh.read().rsplit(")", 1)[1].split()[1]), []).append(int(entry))
            except (OSError, IndexError, ValueError):
                continue
    return out


def _descendants(root: int) -> list[int]:
    tree, found, stack = _children(), [], [root]
    while stack:
        for child in tree.get(stack.pop(), ()):
            found.append(child)
            stack.append(child)
    return found


def _reap() -> None:
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass


def kill_all(within_s: float = 10.0) -> list[int]:
    """SIGKILL every descendant until none is left (a fork meanwhile is found on the next round)."""
    me, deadline = os.getpid(), time.time() + within_s
    while True:
        _reap()
        left = _descendants(me)
        if not left or time.time() > deadline:
            return left
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.02)


def _confine_root(cfg: dict, program: bytes) -> None:
    """Namespaces and mounts, in the launcher (root), before the fork."""
    _check(libc.unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID), "unshare")
    _mount("none", "/", None, MS_REC | MS_PRIVATE, None)
    for target in cfg["hide"]:
        if os.path.isdir(target):
            _mount("tmpfs", target, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=000")
    for target in ("/var/tmp", "/dev/shm"):
        if os.path.isdir(target):
            _mount("tmpfs", target, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=755")
    _mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=755")
    os.mkdir(WORK, 0o700)
    size = f"size={cfg['work_bytes']},mode=700,uid={cfg['uid']},gid={cfg['gid']}"
    _mount("tmpfs", WORK, "tmpfs", MS_NOSUID | MS_NODEV, size)
    _write_program(os.path.join(WORK, "program.py"), program, cfg["uid"], cfg["gid"])


def _write_program(path: str, program: bytes, uid: int | None, gid: int | None) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, program)
        if uid is not None:
            os.fchown(fd, uid, gid)
    finally:
        os.close(fd)


def _child(cfg: dict, cwd: str, out_fd: int, err_fd: int, as_root: bool) -> None:
    """In the forked child: confine this process, then exec the program (never returns)."""
    try:
        if as_root:  # its own /proc (of its PID namespace), in a mount namespace of its own: the
            # launcher keeps reading the host's /proc to find every descendant
            _check(libc.unshare(CLONE_NEWNS), "unshare")
            _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
        os.setsid()
        lim = cfg["limits"]
        for name, value in (
            ("RLIMIT_CPU", (lim["cpu_s"], lim["cpu_s"] + 1)),
            ("RLIMIT_AS", (lim["address_bytes"],) * 2),
            ("RLIMIT_FSIZE", (lim["file_bytes"],) * 2),
            ("RLIMIT_NOFILE", (lim["open_files"],) * 2),
            ("RLIMIT_NPROC", (lim["processes"],) * 2),
            ("RLIMIT_CORE", (0, 0)),
        ):
            resource.setrlimit(getattr(resource, name), value)
        if as_root:
            os.setgroups([])
            os.setgid(cfg["gid"])
            os.setuid(cfg["uid"])
        _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
        _check(libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "pdeathsig")
        null = os.open("/dev/null", os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        os.closerange(3, 65536)  # the run folder's descriptor too
        os.chdir(cwd)
        env = {"PATH": "/usr/bin:/bin", "HOME": cwd, "LANG": "C.UTF-8", "PYTHONHASHSEED": "0"}
        exe = cfg["interpreter"]
        os.execve(exe, [exe, "-I", "-S", "program.py"], env)
    except BaseException as exc:  # noqa: BLE001 - any failure here means the program never ran
        try:
            os.write(err_fd, f"sandbox setup failed: {type(exc).__name__}: {exc}\n".encode())
        finally:
            os._exit(SETUP_FAILED)


def main(config_path: str) -> int:
    with open(config_path) as fh:
        cfg = json.load(fh)
    run = cfg["run_dir"]
    status = {"isolated": False, "network_cut": False, "timed_out": False, "setup_error": None}

    run_fd = os.open(run, os.O_RDONLY | os.O_DIRECTORY)  # the run folder stays reachable once /tmp is covered

    def finish(**more) -> int:
        status.update(more)
        fd = os.open("status.json", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600, dir_fd=run_fd)
        with os.fdopen(fd, "w") as fh:
            json.dump(status, fh)
        return 0

    with open(cfg["program_path"], "rb") as fh:
        program = fh.read()
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    out_fd = os.open("stdout", flags, 0o600, dir_fd=run_fd)
    err_fd = os.open("stderr", flags, 0o600, dir_fd=run_fd)
    as_root = cfg["uid"] is not None
    _check(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), "subreaper")
    try:
        if as_root:
            _confine_root(cfg, program)
            cwd = WORK
            status.update(isolated=True, network_cut=True)
        else:
            cwd = os.path.join(run, "work")
            os.mkdir(cwd, 0o700)
            _write_program(os.path.join(cwd, "program.py"), program, None, None)
            try:
                _check(libc.unshare(CLONE_NEWUSER | CLONE_NEWNET), "unshare")
                status["network_cut"] = True
            except OSError:
                pass
    except OSError as exc:
        return finish(setup_error=f"{type(exc).__name__}: {exc}")

    def stop(_signum, _frame) -> None:  # the caller's backstop: end the program now
        raise TimeoutError

    signal.signal(signal.SIGTERM, stop)
    start = time.monotonic()
    child = os.fork()
    if child == 0:
        _child(cfg, cwd, out_fd, err_fd, as_root)
    os.close(out_fd)
    os.close(err_fd)
    code, timed_out = None, False
    try:
        while code is None:
            pid, wstatus = os.waitpid(child, os.WNOHANG)
            if pid == child:
                code = os.waitstatus_to_exitcode(wstatus)
            elif time.monotonic() - start > cfg["wall_s"]:
                timed_out = True
                break
            else:
                time.sleep(0.02)
    except TimeoutError:
        timed_out = True
    wall = time.monotonic() - start
    left = kill_all()
    _reap()
    if code == SETUP_FAILED:
        return finish(setup_error="the program's confinement failed", left=left, wall_s=wall)
    return finish(exit_code=code, timed_out=timed_out, left=left, wall_s=wall)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
