"""A control group of its own for each engine of an interleaved evaluation: frozen while the
other engine is measured, and its CPU time counted whatever its processes do.

Why a control group and not signals: under the interleaved pairing (protocol v8 on the CPU
tasks) both engines stay started and serve in turns, so the idle one must not use the machine
while the other is timed. SIGSTOP to a process group can be escaped by a process that leaves the
group (setsid), and one sent to every process of the engine's user races a process that forks;
the kernel's freezer stops every task of the group at once, and a task cannot leave the group
(moving it needs root). For the same reason the CPU the engine used is read from the group's
`cpuacct.usage`, which counts every task it ever held, daemonized or exited, where summing the
live processes misses what exited between two reads.

The cgroup v1 `freezer` and `cpuacct` hierarchies are what the arena's machines mount
(docs/engine.md); a machine without them, or a runner that is not root, cannot run an
interleaved evaluation (`unavailable` says why, and the harness voids with it: the arena's side).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
PARENT = "arena"


def unavailable() -> str | None:
    """Why engines cannot get a control group of their own here (None: they can)."""
    if os.geteuid() != 0:
        return "the runner is not root (the engines' control groups need root)"
    for ctl in ("freezer", "cpuacct"):
        if not (ROOT / ctl / "cgroup.procs").exists():
            return f"no cgroup v1 {ctl} hierarchy at {ROOT / ctl}"
    return None


class EngineCgroup:
    """The `freezer` and `cpuacct` groups `arena/<name>` of one engine start."""

    def __init__(self, name: str):
        self.name = name
        self.freezer = ROOT / "freezer" / PARENT / name
        self.cpuacct = ROOT / "cpuacct" / PARENT / name

    def create(self) -> EngineCgroup:
        for d in (self.freezer, self.cpuacct):
            d.mkdir(parents=True, exist_ok=True)
        self.thaw()
        return self

    @property
    def procs_files(self) -> tuple[Path, Path]:
        return self.freezer / "cgroup.procs", self.cpuacct / "cgroup.procs"

    def wrap(self, argv: list[str], uid: int | None, gid: int | None) -> list[str]:
        """`argv` started inside both groups: a root shell writes its own pid into them, then
        becomes the engine's user (setpriv) and execs `argv`, so that no process of the engine
        ever runs outside them (a pid moved after the start could fork first)."""
        f, c = self.procs_files
        drop = [] if uid is None else ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--"]
        script = f'echo $$ > "{f}" && echo $$ > "{c}" && exec "$@"'
        return ["/bin/sh", "-c", script, "arena-engine-start", *drop, *argv]

    def pids(self) -> list[int]:
        """Every process in either group (a task is in both unless something moved it)."""
        pids: set[int] = set()
        for f in self.procs_files:
            try:
                pids.update(int(x) for x in f.read_text().split())
            except OSError:
                pass
        return sorted(pids)

    def cpu_seconds(self) -> float:
        """CPU seconds every task of the group used since the group was made."""
        return int((self.cpuacct / "cpuacct.usage").read_text()) / 1e9

    def state(self) -> str:
        return (self.freezer / "freezer.state").read_text().strip()

    def freeze(self, within_s: float = 10.0) -> None:
        """Stop every task of the group; returns once the kernel says FROZEN."""
        self._set("FROZEN", within_s)

    def thaw(self, within_s: float = 10.0) -> None:
        self._set("THAWED", within_s)

    def _set(self, state: str, within_s: float) -> None:
        path = self.freezer / "freezer.state"
        deadline = time.time() + within_s
        while True:
            path.write_text(state)
            if self.state() == state:
                return
            if time.time() > deadline:
                raise RuntimeError(f"engine group {self.name} did not become {state} within {within_s:g} s")
            time.sleep(0.001)  # the sliced pass counts the wait in the engine's slice

    def kill(self, within_s: float = 15.0) -> None:
        """SIGKILL every task of the group until none is left (thawed first: a frozen task dies
        only once it runs)."""
        import signal

        self.thaw()
        deadline = time.time() + within_s
        while self.pids() and time.time() < deadline:
            for pid in self.pids():
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.05)

    def remove(self) -> None:
        self.kill()
        for d in (self.freezer, self.cpuacct):
            try:
                d.rmdir()
            except OSError:
                pass
