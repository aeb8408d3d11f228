"""On an NVIDIA device: the device-idle wait after an engine's stop (runners/engines.py `stop`,
runners/memory.py `wait_idle`) counts a foreign process's memory but not the memory of the
evaluation's other engine while it is still started, as the interleaved pairing's is when its
two engines are stopped one after the other (skipped without a GPU)."""

from __future__ import annotations

import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

from speculator_arena.runners.engines import Engines
from speculator_arena.runners.memory import GIB, Device

pytestmark = pytest.mark.gpu

HOLD = """
import sys, time, torch
x = torch.empty(3 << 30, dtype=torch.uint8, device="cuda")
x.fill_(1)
torch.cuda.synchronize()
open(sys.argv[1], "w").write("ready")
time.sleep(600)
"""


@pytest.fixture
def device() -> Device:
    d = Device.open()
    if not d.available:
        pytest.skip(f"no NVIDIA device: {d.reason}")
    return d


@pytest.fixture
def holder(device, tmp_path):
    """A process holding 3 GiB of the device (what a resident engine does), and the device's
    use before it started, in GiB."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    before = device.used_bytes() / GIB
    ready = tmp_path / "ready"
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(ready)])
    try:
        deadline = time.time() + 120
        while not ready.exists():
            assert proc.poll() is None, "the holding process died"
            assert time.time() < deadline, "the holding process did not allocate within 120 s"
            time.sleep(0.1)
        if device.process_bytes({proc.pid}) is None:
            pytest.skip("NVML does not show this machine's processes (another pid namespace)")
        yield proc, before
    finally:
        proc.kill()
        proc.wait()


def _stop(device, resident: dict, max_gib: float):
    """`Engines.stop` of a stopped candidate, with `resident` the run's resident engines."""
    ctx = SimpleNamespace(
        task=SimpleNamespace(
            start_stop=SimpleNamespace(sigterm_grace_seconds=1),
            device_idle=SimpleNamespace(max_gib=max_gib, within_seconds=2.0),
        ),
        device=device,
        resident=resident,
        current_engine=None,
        idle_ok=True,
        idle_reason=None,
        set_phase=lambda phase: None,
    )
    stopped = SimpleNamespace(engine="candidate", purpose="timed", stop=lambda grace: None, stop_problem=None)
    stopped.stopped_at = time.time()
    resident.setdefault("candidate", stopped)
    Engines(ctx).stop(stopped, record=False)
    return ctx


def test_the_other_engine_still_started_is_not_left_behind(device, holder):
    proc, before = holder
    max_gib = before + 2.0  # 2 GiB over what the device held before (protocol device_idle.max_gib)
    stock = SimpleNamespace(engine="stock", stopped_at=None, pids=lambda: [proc.pid])
    ctx = _stop(device, {"stock": stock}, max_gib)
    assert ctx.idle_ok, ctx.idle_reason
    assert device.wait_idle(max_gib, 1.0, resident_pids=[proc.pid])[0] is True


def test_a_foreign_process_holding_the_device_still_fails_the_wait(device, holder):
    proc, before = holder
    max_gib = before + 2.0
    ctx = _stop(device, {}, max_gib)  # the same process, not an engine of the run: foreign
    assert not ctx.idle_ok and "GiB or more" in ctx.idle_reason
    stopped_stock = SimpleNamespace(engine="stock", stopped_at=time.time(), pids=lambda: [proc.pid])
    assert not _stop(device, {"stock": stopped_stock}, max_gib).idle_ok  # a stopped engine is not resident
