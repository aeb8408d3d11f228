"""How a version has the engines served: their environment, the sampled load, and the machine.

The sections a timed pass reads: the engines' environment (`EngineEnvironment`), the sampling
and the busy window's rule, the think time between a session's turns, each workload's passes,
the interleaved pairing's own values, starting and stopping an engine, the device's idleness
between engines and the host's contention during a pass. Apart from the gates (gates.py) and
the document (model.py), which only name them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from speculator_arena.protocol.strict import _Strict


class EngineEnvironment(_Strict):
    gpu_memory_utilization: float = Field(gt=0, le=1)
    probe_gpu_memory_utilization: float = Field(gt=0, le=1)
    prefix_caching: int
    variables: list[str]
    image: dict[str, str]
    enable_thinking: bool


class Sampling(_Strict):
    temperature: float = Field(ge=0)
    top_p: float = Field(gt=0, le=1)
    top_k: int = Field(ge=0)
    seed_per_request: bool


class Window(_Strict):
    overhead_fraction: float = Field(ge=0)
    overhead_tokens: int = Field(ge=0)
    cut_to_fraction: float = Field(gt=0, lt=1)


class ThinkTime(_Strict):
    cap_seconds: float = Field(gt=0)
    scale_c: float = Field(gt=0)


class Workload(_Strict):
    interleave: int = Field(ge=1)
    pass_seconds: float = Field(gt=0)
    speed: Literal["request_time", "busy_window"]
    # v8 on (the interleaved CPU tasks): each lane sends this many requests, and the pass ends
    # when they are answered (or at pass_seconds, whichever comes first), so both engines serve
    # exactly the same turns of a pass; none: the pass is time-boxed only
    requests_per_lane: int | None = Field(default=None, ge=1)


class Interleaving(_Strict):
    """The interleaved pairing's own values (v8 on; docs/scoring.md "Pairing")."""

    # CPU seconds the frozen engine's control group may use during the other engine's pass (the
    # freezer stops it at once; more than this is the idle engine working while the other is
    # measured: the candidate's failure, the stock engine's a void)
    max_idle_cpu_seconds: float = Field(gt=0)
    # the gate probes are served by the timed starts (frozen in turn) instead of two restarts:
    # a CPU task has no device memory for the probe utilization to protect
    probes_on_timed_start: bool = True
    # host contention judged over each workload's passes of both engines pooled, not pass by pass:
    # a pass is a few seconds of work here, in which one burst of the hypervisor's steal is over
    # 5%, and one disturbed pass of eight moves a workload's median ratio little
    contention_per_workload: bool = True
    # each pass served by both engines at once, thawed in turn this many seconds each (the sliced
    # pass, runners/sliced.py): the host's speed, which moves within seconds, falls on both alike.
    # None: each pass served by one engine, then the other
    slice_seconds: float | None = Field(default=None, gt=0)
    # each workload served by fresh starts of both engines (both stopped and started again before
    # every workload after the first), so a start's own speed is averaged over three starts per
    # engine (measured on vLLM as the draft v15: it did not lower the noise, docs/benchmarks/
    # aa_noise.md "v15-draft"; no shipped version sets it)
    fresh_starts_per_workload: bool = False
    # each workload's warm-ups, and with fresh starts its two starts, in turn A B, B A, A B (A the
    # engine served first, interleaved.py pass_order) instead of A B every time: the engine
    # started and warmed first was about 1% slower through v14's and v15-draft's vLLM A/A runs
    # (0.95% and 1.02%, about four standard errors), a bias per evaluation that turns cancel (two
    # thirds of it, with three workloads); both options on local-smollm2-vllm from v15
    alternate_start_order: bool = False


class StartStop(_Strict):
    health_timeout_seconds: float = Field(gt=0)
    sigterm_grace_seconds: float = Field(gt=0)


class DeviceIdle(_Strict):
    max_gib: float = Field(gt=0)
    within_seconds: float = Field(gt=0)
    memory_sample_interval_seconds: float = Field(gt=0)


class Contention(_Strict):
    """Host contention (SCORING.md "Host contention"): what else may use the machine during a
    timed pass before the pass is contended and the evaluation void. Absent in v1 (not judged)."""

    max_foreign_cpu_share: float = Field(gt=0)  # of one core, averaged over the pass
    max_steal_share: float = Field(gt=0, lt=1)  # of all CPU time over the pass
    sample_interval_seconds: float = Field(gt=0)
