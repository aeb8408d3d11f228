"""The suite's session-end check: no process of an engine is left running.

A process counts as an engine's when its working directory or its command line lies in an
engine workspace (`arena-engine-*`, runners/lifecycle.py), when it is an engine's reaper
(runners/reaper.py), or when it runs as one of the engines' users. Only processes started after
the test session are looked at, so another session's engines on a shared development machine
are not this one's. tests/conftest.py fails the run when one is found (and kills it, so that the
machine is not left spinning).
"""

from __future__ import annotations

import os
import pwd
import signal
from pathlib import Path

ENGINE_USERS = ("arena-engine", "arena-stock")
MARKS = ("/arena-engine-", "/reaper.py")


def _start_ticks(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])


def _uids() -> set[int]:
    out = set()
    for name in ENGINE_USERS:
        try:
            out.add(pwd.getpwnam(name).pw_uid)
        except KeyError:
            pass
    return out


def engine_processes(since_ticks: int) -> list[str]:
    """'pid: command (where)' of every live engine process started at or after `since_ticks`."""
    uids, found, me = _uids(), [], os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        pid = int(entry)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            if stat.rsplit(")", 1)[1].split()[0] == "Z" or _start_ticks(pid) < since_ticks:
                continue
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
            try:
                cwd = os.readlink(f"/proc/{pid}/cwd")
            except OSError:
                cwd = ""
            uid = Path(f"/proc/{pid}").stat().st_uid
        except (OSError, IndexError, ValueError):
            continue
        if uid in uids or any(m in cwd or m in cmd for m in MARKS):
            found.append(f"{pid}: {cmd[:200]} (cwd {cwd})")
    return found


def kill(lines: list[str]) -> None:
    for line in lines:
        try:
            os.kill(int(line.split(":", 1)[0]), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass


def session_start_ticks() -> int:
    return _start_ticks(os.getpid())
