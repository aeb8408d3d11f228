"""Run one container's command as the kubelet stand-in's container runtime would: inside the
pod's network namespace (its own loopback) and process namespace (the pod's `shareProcessNamespace`:
its containers see each other's processes and nothing of another pod's), in a mount namespace of
its own where each volume mount is a bind mount of a local directory at the container's path and
/proc is the pod's, then under the container's uid, gid and supplementary groups. Needs root
(CAP_SYS_ADMIN): the stand-in checks that first.

Usage: python container_exec.py JSON, where JSON holds netns (a /proc/PID/ns/net path or null),
pidns (a /proc/PID/ns/pid_for_children path or null), mounts ([source, target, read_only]), image_paths
(host directories of the image's files, bound back read-only after the mounts), roots
(top-level directories to cover with a tmpfs, so mount points can be made without touching the
host), uid, gid, groups, cwd, env, command.

Why a process namespace per pod: two pods of one node (or of two stand-in nodes on one host) run
their engines under the same uid, and the runner lists and stops its engine's processes by uid
from /proc; in one shared namespace one pod's runner would see, and void over, the other's engine.
A process joins a process namespace only through a fork, so with `pidns` this process stays
outside, as the container's runtime shim does, waits for the container's process and ends as it
ended (its exit code, or the same signal).

Why bind mounts and not path rewriting: the pod's code names its paths itself (/arena/results,
/arena/artifacts as argparse defaults), as it does in a real container.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys

CLONE_NEWNS, CLONE_NEWNET, CLONE_NEWPID = 0x00020000, 0x40000000, 0x20000000
MS_RDONLY, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 32, 4096, 16384, 1 << 18
MS_NOSUID, MS_NODEV, MS_NOEXEC = 2, 4, 8

libc = ctypes.CDLL(None, use_errno=True)


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def mount(source: str | None, target: str, fstype: str | None, flags: int) -> None:
    enc = lambda s: s.encode() if s is not None else None  # noqa: E731
    _check(libc.mount(enc(source), enc(target), enc(fstype), flags, None), f"mount {source} -> {target}")


def main() -> None:
    c = json.loads(sys.argv[1])
    if c.get("netns"):
        fd = os.open(c["netns"], os.O_RDONLY)
        _check(libc.setns(fd, CLONE_NEWNET), "setns net")
        os.close(fd)
    _check(libc.unshare(CLONE_NEWNS), "unshare mount")
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    # Every source is opened before the first mount (a mount over /tmp must not hide the sources
    # under /tmp) and after the unshare (a bind mount's source must be in the caller's namespace).
    sources = [os.open(source, os.O_PATH) for source, _, _ in c["mounts"]]
    image = [(os.open(path, os.O_PATH), path) for path in c.get("image_paths") or []]
    for root in c["roots"]:
        mount("tmpfs", root, "tmpfs", 0)
    binds = [(fd, target, read_only) for fd, (_, target, read_only) in zip(sources, c["mounts"], strict=True)]
    # the image's own files (kubelet_standin.Image.paths) over the volumes that would hide them
    for fd, target, read_only in binds + [(fd, path, True) for fd, path in image]:
        os.makedirs(target, exist_ok=True)
        mount(f"/proc/self/fd/{fd}", target, None, MS_BIND | MS_REC)
        if read_only:
            mount(None, target, None, MS_BIND | MS_REMOUNT | MS_RDONLY)
    for fd in sources + [fd for fd, _ in image]:
        os.close(fd)
    if c.get("pidns"):
        fd = os.open(c["pidns"], os.O_RDONLY)
        _check(libc.setns(fd, CLONE_NEWPID), "setns pid")
        os.close(fd)
        child = os.fork()
        if child:
            _shim(child)
        mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)  # the pod's processes only
    os.setgroups(c["groups"])
    os.setgid(c["gid"])
    os.setuid(c["uid"])
    os.chdir(c["cwd"])
    os.execvpe(c["command"][0], c["command"], c["env"])


def _shim(child: int) -> None:
    """Outside the pod's process namespace: wait for the container's process and end as it did.
    The stand-in signals this process's group, which holds the child too; a signal that reached
    only this process (the child left the group) is passed on."""

    def forward(signum, _frame):
        try:
            if os.getpgid(child) != os.getpgrp():
                os.kill(child, signum)
        except ProcessLookupError:
            pass

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(sig, forward)
    while True:
        try:
            _, status = os.waitpid(child, 0)
            break
        except InterruptedError:
            continue
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1)


if __name__ == "__main__":
    main()
