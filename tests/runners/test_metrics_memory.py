"""/metrics parsing (both parsers agree) and the NVML memory sampler (absent with a reason on CPU)."""

from __future__ import annotations

import time

import pytest

from speculator_arena.runners.memory import Device, MemorySampler
from speculator_arena.runners.metrics import _simple_samples, samples, scrape

TEXT = """# HELP vllm:spec_decode_num_accepted_tokens Accepted.
# TYPE vllm:spec_decode_num_accepted_tokens counter
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="q\\"8b"} 1234.0
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0"} 3
# TYPE lat histogram
lat_bucket{le="0.5"} 2
lat_bucket{le="+Inf"} 5
lat_sum 1.75
lat_count 5
"""


def test_fallback_parser_agrees_with_prometheus_client():
    a = sorted((n, tuple(sorted(lab.items())), v) for n, lab, v in samples(TEXT))
    b = sorted((n, tuple(sorted(lab.items())), v) for n, lab, v in _simple_samples(TEXT))
    assert a == b and len(a) == 6
    assert ("vllm:spec_decode_num_accepted_tokens_total", (("engine", "0"), ("model_name", 'q"8b')), 1234.0) in a
    with pytest.raises(ValueError):
        list(_simple_samples("this is not prometheus"))


def test_scrape_real_engine(engine_factory, tmp_path):
    from speculator_arena.runners.lifecycle import EngineRun, free_port

    er = EngineRun(
        engine="stock",
        purpose="timed",
        start_index=1,
        src=engine_factory("m"),
        env_vars={"PATH": "/usr/bin:/bin"},
        port=free_port(),
        private_root=tmp_path / "p",
    )
    er.start(readable=[])
    try:
        assert er.wait_healthy(20)
        rows = scrape(er.base_url, evaluation_id="e", pass_id="solo-0", engine="stock", phase="before")
        names = {r["name"] for r in rows}
        assert "vllm:spec_decode_num_accepted_tokens_total" in names
        assert all(r["phase"] == "before" and r["engine"] == "stock" for r in rows)
    finally:
        er.stop(5)
    # A stopped engine gives no rows, not an exception (the pass that needs them is already aborted).
    assert scrape(er.base_url, evaluation_id="e", pass_id="solo-0", engine="stock", phase="after", timeout=1) == []


def test_no_gpu_means_no_samples_with_reason(monkeypatch):
    monkeypatch.setenv("ARENA_NO_NVML", "1")
    dev = Device.open()
    assert not dev.available and "ARENA_NO_NVML" in dev.reason
    s = MemorySampler(dev, 0.05).start()
    time.sleep(0.2)
    assert s.stop() == []
    assert dev.wait_idle(2.0, 1.0) == (None, None)


def test_without_nvidia_device_the_reason_is_nvml_s():
    dev = Device.open()
    if dev.available:
        pytest.skip("this machine has an NVIDIA device")
    assert dev.reason and dev.total_bytes is None


@pytest.mark.gpu
def test_nvml_samples_every_interval():
    dev = Device.open()
    if not dev.available:
        pytest.skip(f"no NVIDIA device: {dev.reason}")
    s = MemorySampler(dev, 0.1).start()
    time.sleep(1.05)
    got = s.stop()
    assert 8 <= len(got) <= 12
    assert all(0 < g["used_bytes"] <= g["total_bytes"] for g in got)
    ok, secs = dev.wait_idle(1e6, 1.0)
    assert ok is True and secs < 1.0
