"""Device memory, read from outside the engine through NVML (section 7).

Why NVML and not the engine's word: the memory gate is about what the engine holds, and only
the device can say. On a machine without an NVIDIA device there is nothing to read: the
sampler says so (`available` false with the reason) and stores no rows, never zeros.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from speculator_arena import settings

GIB = 1 << 30


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@dataclass
class Device:
    """Device 0 of this process's view (CUDA_VISIBLE_DEVICES is honored by index only), or the
    device of a given NVML UUID: in a Kubernetes pod the GPU is the engine container's, and the
    runner opens the one the engine's sidecar reported (runners/sidecar_engine.py)."""

    available: bool
    reason: str | None = None
    handle: object = None
    total_bytes: int | None = None
    name: str | None = None
    uuid: str | None = None

    @classmethod
    def open(cls, uuid: str | None = None) -> Device:
        if settings.flag("ARENA_NO_NVML"):
            return cls(False, "NVML disabled by ARENA_NO_NVML")
        try:
            import pynvml
        except ImportError as exc:  # nvidia-ml-py is a dependency; this is a broken install
            return cls(False, f"pynvml not importable: {exc}")
        try:
            pynvml.nvmlInit()
            if uuid:
                h = pynvml.nvmlDeviceGetHandleByUUID(uuid)
            else:
                if pynvml.nvmlDeviceGetCount() < 1:
                    return cls(False, "NVML found no device")
                index = 0
                visible = (settings.get("CUDA_VISIBLE_DEVICES") or "").split(",")[0].strip()
                if visible.isdigit():
                    index = int(visible)
                h = pynvml.nvmlDeviceGetHandleByIndex(index)
            info = pynvml.nvmlDeviceGetMemoryInfo(h)
            name, found = _text(pynvml.nvmlDeviceGetName(h)), _text(pynvml.nvmlDeviceGetUUID(h))
            return cls(True, None, h, int(info.total), name, found)
        except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, NotFound (the UUID), ...
            where = f"the engine's device {uuid}" if uuid else "no NVIDIA device"
            return cls(False, f"{where} (NVML: {exc})")

    def used_bytes(self) -> int:
        import pynvml

        return int(pynvml.nvmlDeviceGetMemoryInfo(self.handle).used)

    def process_bytes(self, pids: set[int]) -> int | None:
        """Bytes held by the given processes; None when NVML does not show per-process use."""
        import pynvml

        try:
            procs = pynvml.nvmlDeviceGetComputeRunningProcesses(self.handle)
        except Exception:
            return None
        total = 0
        seen = False
        for p in procs:
            if p.pid in pids and p.usedGpuMemory is not None:
                total += int(p.usedGpuMemory)
                seen = True
        # No match: NVML hides processes of other pid namespaces (containers): unknown, not 0.
        return total if seen else None

    def wait_idle(
        self, max_gib: float, within_s: float, poll_s: float = 0.25, resident_pids=()
    ) -> tuple[bool | None, float | None]:
        """Wait until the device holds less than `max_gib`; (ok, seconds). (None, None) without a device.

        `resident_pids`: processes of the evaluation's other engine, still started (the interleaved
        pairing stops its two engines one after the other): what they hold is that engine's, not
        left behind by the stop, so it is not counted (where NVML hides them, it is)."""
        if not self.available:
            return None, None
        t0 = time.time()
        while True:
            held = self.used_bytes()
            if resident_pids:
                held -= self.process_bytes(set(resident_pids)) or 0
            if held < max_gib * GIB:
                return True, time.time() - t0
            if time.time() - t0 >= within_s:
                return False, time.time() - t0
            time.sleep(poll_s)


@dataclass
class MemorySampler:
    """Samples the device every `interval_s` in a thread while a timed pass runs."""

    device: Device
    interval_s: float
    pids_fn: object = None  # callable returning the engine's pids now
    samples: list[dict] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> MemorySampler:
        if not self.device.available:
            return self
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="memory-sampler", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        next_t = time.time()
        while not self._stop.is_set():
            try:
                pids = set(self.pids_fn()) if self.pids_fn else set()
                self.samples.append(
                    {
                        "sampled_at": time.time(),
                        "used_bytes": self.device.used_bytes(),
                        "total_bytes": self.device.total_bytes,
                        "engine_bytes": self.device.process_bytes(pids) if pids else None,
                        "error": None,
                    }
                )
            except Exception as exc:  # a failed read is a row that says why, never a zero
                self.samples.append(
                    {
                        "sampled_at": time.time(),
                        "used_bytes": None,
                        "total_bytes": self.device.total_bytes,
                        "engine_bytes": None,
                        "error": f"{type(exc).__name__}: {exc}"[:300],
                    }
                )
            next_t += self.interval_s
            self._stop.wait(max(0.0, next_t - time.time()))

    def stop(self) -> list[dict]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        out, self.samples = self.samples, []
        return out
