"""What the shared engine machinery reads of a task, for a LowBArena task.

Why a view: `Engines` (runners/engines.py) and the contention checks read the speculator
protocol's `TaskProtocol` fields (the model, its context, the start/stop and device-idle limits,
the contention rule, the placement variables). A LowBArena task declares the same things in its
own protocol data (protocol/lowb.py); this puts them under the names those readers use, so the
engines of both arenas start, stop and are watched by the same code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace


@dataclass
class LowbTaskView:
    lowb: object  # the LowbTask (protocol/lowb.py)
    protocol: object  # the LowbProtocol it belongs to
    task: SimpleNamespace = field(init=False)
    placement: dict = field(init=False)

    def __post_init__(self):
        t, run = self.lowb, self.protocol.runner
        self.task = SimpleNamespace(model=t.model, max_model_len=t.max_model_len, language_model_only=False)
        self.placement = dict(getattr(t, "placement", None) or {})
        self.start_stop = run.start_stop
        self.device_idle = run.device_idle
        self.contention = run.contention
        self.engine_environment = SimpleNamespace(
            gpu_memory_utilization=run.gpu_memory_utilization, prefix_caching=run.prefix_caching
        )

    pairing: str = "lowb C S S C"

    @property
    def max_num_seqs(self) -> int:
        """The engine's cap: the most requests any workload has in flight (the engine rules'
        hard cap of its timed peaks)."""
        return max(w.at_once for w in self.lowb.workloads.values())


def task_for(spec):
    """The task protocol an evaluation runs under: the speculator protocol's `TaskProtocol`, or a
    LowBArena task's view (its protocol version is LowBArena's own series)."""
    from speculator_arena.protocol import load_protocol
    from speculator_arena.protocol.lowb import is_lowb_task, load_lowb_protocol

    if is_lowb_task(spec.task_id):
        proto = load_lowb_protocol(spec.protocol_version)
        return LowbTaskView(proto.task(spec.task_id), proto)
    return load_protocol(spec.protocol_version).task(spec.task_id)


def is_lowb(task) -> bool:
    return isinstance(task, LowbTaskView)
