"""An engine's memory, sampled from outside it every `memory.sample_interval_seconds` (0.5 s).

Why two sources: on a GPU task the memory the rules count is the device's, which NVML reads
per engine process (runners/memory.py); on the embedded CPU task the engine's weights and KV
cache live in host memory, so the figure is the engine process tree's proportional set size
(PSS: shared pages split between the processes that map them, so a page the runner also maps is
not charged whole to the engine). Each sample is a `lowb_memory` row; a failed read is a row
with its error, never a zero.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


def pss_bytes(pids: list[int]) -> int:
    """The PSS of these processes, summed (/proc/<pid>/smaps_rollup; a process gone meanwhile is
    skipped). Raises OSError when none could be read."""
    total, read = 0, 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup", encoding="ascii", errors="replace") as fh:
                for line in fh:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1]) * 1024
                        read += 1
                        break
        except (FileNotFoundError, ProcessLookupError):
            continue
    if not read:
        raise OSError(f"no smaps_rollup readable for pids {pids[:5]}")
    return total


class EngineMemory:
    """Samples one engine's memory on a thread until `stop()`; `rows()` are `lowb_memory` rows
    without the evaluation id. `device`: the run's NVML device (runners/memory.Device); when it is
    available the engine's processes' device bytes are read, else the PSS of its tree."""

    def __init__(self, device, pids: Callable[[], list[int]], interval_s: float, **labels):
        self.device, self.pids, self.interval_s, self.labels = device, pids, interval_s, labels
        self.source = "nvml" if device is not None and device.available else "pss"
        self._rows: list[dict] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lowb-memory", daemon=True)

    def start(self) -> EngineMemory:
        self._thread.start()
        return self

    def _read(self) -> int:
        pids = list(self.pids())
        if self.source == "nvml":
            got = self.device.process_bytes(set(pids))
            if got is None:
                raise OSError("NVML did not list the engine's processes")
            return int(got)
        return pss_bytes(pids)

    def _run(self) -> None:
        while True:
            at = time.time()
            try:
                row = {"bytes": self._read(), "error": None}
            except Exception as exc:  # a failed read is a row with its reason
                row = {"bytes": None, "error": f"{type(exc).__name__}: {exc}"[:200]}
            self._rows.append(dict(self.labels, sampled_at=at, source=self.source, **row))
            if self._stop.wait(max(0.0, self.interval_s - (time.time() - at))):
                return

    def stop(self) -> list[dict]:
        self._stop.set()
        self._thread.join(timeout=10)
        return list(self._rows)


def sample_for(seconds: float, device, pids, interval_s: float, **labels) -> list[dict]:
    """Samples over `seconds` (the idle engine after its start, before any request)."""
    sampler = EngineMemory(device, pids, interval_s, **labels).start()
    time.sleep(seconds)
    return sampler.stop()
