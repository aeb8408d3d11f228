"""Host contention during a timed pass, measured from outside the engine (SCORING.md).

Why: a pass's speed is only the engine's when nothing else used the machine. Every interval
(protocol `contention.sample_interval_seconds`) the sampler records the CPU time the whole
machine used (psutil's system-wide `cpu_times`, i.e. /proc/stat), the part of it used by the
engine's and the runner's process trees, CPU steal, and on a GPU the processes on the device
that are not the engine's (NVML), its utilization and throttle reasons. The rows are raw: the
scorer judges them (rules/contention.py, scoring/contention.py) under the protocol version it scores with.

"Own" processes: the runner and its descendants (the engine is started as one), plus every
process the engine run names (`pids_fn`: its process group, and every process of the engine's
user when privileges were dropped) so that an engine that daemonizes a worker cannot make its
own CPU look foreign and force a void. CPU time of an own process that exited during an
interval is recovered from its parent's reaped-children times, so short-lived helpers are not
counted as foreign either.
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass, field

import psutil


def _busy(t) -> float:
    """CPU seconds spent working (user includes guest; idle, iowait and steal excluded)."""
    return t.user + t.nice + t.system + getattr(t, "irq", 0.0) + getattr(t, "softirq", 0.0)


def _total(t) -> float:
    return _busy(t) + t.idle + getattr(t, "iowait", 0.0) + getattr(t, "steal", 0.0)


@dataclass
class _Snapshot:
    at: float
    cpu: object  # psutil's system-wide cpu_times
    procs: dict[int, tuple[float, int, float, float]]  # pid -> (create_time, ppid, self cpu, reaped children cpu)
    own: set[int]
    names: dict[int, str] = field(default_factory=dict)  # pid -> process name


def _own_tree(procs: dict, root: int, extra: set[int]) -> set[int]:
    children: dict[int, list[int]] = {}
    for pid, (_, ppid, _, _) in procs.items():
        children.setdefault(ppid, []).append(pid)
    own, stack = set(), [root, *extra]
    while stack:
        pid = stack.pop()
        if pid in own or pid not in procs:
            continue
        own.add(pid)
        stack.extend(children.get(pid, ()))
    return own


def snapshot(root_pid: int, extra_pids=()) -> _Snapshot:
    procs, names = {}, {}
    for p in psutil.process_iter(["ppid", "create_time", "cpu_times", "name"]):
        info = p.info
        ct = info.get("cpu_times")
        if ct is None or info.get("create_time") is None:
            continue
        procs[p.pid] = (
            info["create_time"],
            info["ppid"] or 0,
            ct.user + ct.system,
            getattr(ct, "children_user", 0.0) + getattr(ct, "children_system", 0.0),
        )
        names[p.pid] = info.get("name") or "?"
    return _Snapshot(time.time(), psutil.cpu_times(), procs, _own_tree(procs, root_pid, set(extra_pids)), names)


def own_cpu_between(a: _Snapshot, b: _Snapshot) -> float:
    """CPU seconds the own processes used between two snapshots (see the module docstring)."""
    used = 0.0
    for pid in b.own:
        create, ppid, cpu, reaped = b.procs[pid]
        prev = a.procs.get(pid)
        if prev is not None and prev[0] == create:
            used += max(0.0, cpu - prev[2])
            # children of this process that were own in `a`, are gone now and were reaped by it
            gone = sum(a.procs[c][2] for c in a.own if c not in b.procs and a.procs[c][1] == pid)
            used += max(0.0, (reaped - prev[3]) - gone)
        else:
            used += cpu  # started within the interval
    return used


TOP_FOREIGN = 3  # the busiest foreign processes an interval names (what the operator must stop)


def foreign_top(a: _Snapshot, b: _Snapshot) -> list[dict]:
    """The foreign processes that used the most CPU between two snapshots: pid, name, seconds."""
    used = []
    for pid, (create, _, cpu, _) in b.procs.items():
        if pid in b.own:
            continue
        prev = a.procs.get(pid)
        secs = cpu - prev[2] if prev is not None and prev[0] == create else cpu
        if secs > 0:
            used.append({"pid": pid, "name": b.names.get(pid, "?"), "cpu_seconds": round(secs, 3)})
    return sorted(used, key=lambda u: -u["cpu_seconds"])[:TOP_FOREIGN]


def busiest(rows: list[dict]) -> str:
    """The foreign processes busiest over a pass's intervals, as one clause ('' when none):
    what a contended pass's reason names, so that the operator knows what to stop."""
    secs = sum((r["ended_at"] - r["started_at"]) for r in rows if r.get("error") is None)
    by: dict[tuple[int, str], float] = {}
    for r in rows:
        for u in json.loads(r.get("foreign_top") or "[]"):
            by[(u["pid"], u["name"])] = by.get((u["pid"], u["name"]), 0.0) + u["cpu_seconds"]
    top = sorted(by.items(), key=lambda kv: -kv[1])[:TOP_FOREIGN]
    if not top or secs <= 0:
        return ""
    return "busiest outside the arena: " + ", ".join(f"{n} (pid {p}) {s / secs:.2f} of a core" for (p, n), s in top)


def interval_row(a: _Snapshot, b: _Snapshot) -> dict:
    cpu = _busy(b.cpu) - _busy(a.cpu)
    own = own_cpu_between(a, b)
    return {
        "foreign_top": json.dumps(foreign_top(a, b)),
        "started_at": a.at,
        "ended_at": b.at,
        "cpu_seconds": cpu,
        "own_cpu_seconds": own,
        "foreign_cpu_seconds": max(0.0, cpu - own),
        "steal_seconds": getattr(b.cpu, "steal", 0.0) - getattr(a.cpu, "steal", 0.0),
        "total_cpu_seconds": _total(b.cpu) - _total(a.cpu),
        "cpus": psutil.cpu_count() or 1,
    }


def gpu_row(device, own: set[int]) -> dict:
    """Foreign processes on the device, its utilization and throttle reasons (nulls without one)."""
    out = {
        "foreign_gpu_processes": None,
        "foreign_gpu_bytes": None,
        "foreign_gpu_pids": None,
        "gpu_utilization": None,
        "throttle_reasons": None,
    }
    if device is None or not device.available:
        return out
    import pynvml

    procs = list(pynvml.nvmlDeviceGetComputeRunningProcesses(device.handle))
    try:
        procs += list(pynvml.nvmlDeviceGetGraphicsRunningProcesses(device.handle))
    except pynvml.NVMLError:
        pass
    foreign = {p.pid: int(p.usedGpuMemory or 0) for p in procs if p.pid not in own}
    out.update(
        foreign_gpu_processes=len(foreign),
        foreign_gpu_bytes=sum(foreign.values()),
        foreign_gpu_pids=json.dumps(sorted(foreign)),
        gpu_utilization=float(pynvml.nvmlDeviceGetUtilizationRates(device.handle).gpu),
    )
    reasons = (
        getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
        or pynvml.nvmlDeviceGetCurrentClocksThrottleReasons
    )
    try:
        out["throttle_reasons"] = int(reasons(device.handle))
    except pynvml.NVMLError:
        pass
    return out


@dataclass
class ContentionSampler:
    """Records one contention row per interval in a thread while a timed pass runs."""

    interval_s: float
    pids_fn: object = None  # callable: the engine's pids now
    device: object = None  # runners.memory.Device (or None)
    rows: list[dict] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def _take(self) -> _Snapshot:
        extra = set(self.pids_fn()) if self.pids_fn else set()
        return snapshot(os.getpid(), extra)

    def start(self) -> ContentionSampler:
        self._stop.clear()
        self._last = self._take()
        self._thread = threading.Thread(target=self._run, name="contention-sampler", daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        try:
            snap = self._take()
            row = interval_row(self._last, snap)
            row.update(gpu_row(self.device, snap.own))
            row["error"] = None
            self._last = snap
        except Exception as exc:  # a failed read is a row that says why, never a zero
            row = {"started_at": self._last.at, "ended_at": time.time(), "error": f"{type(exc).__name__}: {exc}"[:300]}
            try:  # the next interval starts from a fresh reading
                self._last = self._take()
            except Exception:
                pass
        self.rows.append(row)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()

    def stop(self) -> list[dict]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._sample()  # the tail of the pass since the last tick
        out, self.rows = self.rows, []
        return out
