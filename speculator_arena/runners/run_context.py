"""What every step of one evaluation's run shares, in one typed object: the `RunContext`.

Why an object of its own: the steps of a run (the engines' starts and stops, the timed passes,
the interleaved and sliced pairings, the probes, the calibration's fit) are objects that each
hold what is theirs; what they all read or set (the spec, the warehouse, the task's protocol,
the device, the inputs once loaded, the engines the run holds, the device-idle verdict of the
last stop) lives here, declared once with its type, so a reader sees in one place what a step
may touch and a step cannot set an attribute nobody declared.

It also holds the three things every step does to the run's record: `say` (progress),
`write` (raw rows, counted for the provenance) and `set_phase` (the runner's state file, which
`--resume` reads to clean up after a runner that died).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from speculator_arena.runners.status import write_state

if TYPE_CHECKING:
    from speculator_arena.pools.api import Pool
    from speculator_arena.protocol.model import TaskProtocol
    from speculator_arena.runners.lifecycle import EngineRun
    from speculator_arena.runners.memory import Device
    from speculator_arena.runners.spec import EvaluationSpec
    from speculator_arena.runners.workload import RequestRecord
    from speculator_arena.warehouse.store import Warehouse


@dataclass
class RunContext:
    spec: EvaluationSpec
    wh: Warehouse
    task: TaskProtocol
    device: Device
    progress: Callable[[str], None]
    # the inputs, once the run loaded them (harness `_load_inputs`)
    target: Path | None = None
    tokenizer: Any = None  # the target's tokenizer (transformers), for token counts
    pool: Pool | None = None
    # the counted requests of each engine's timed passes: the probes score their sampled replies
    records: dict[str, list[RequestRecord]] = field(default_factory=lambda: {"candidate": [], "stock": []})
    rows_written: dict[str, int] = field(default_factory=dict)
    phase: str = "queued"
    # the engine to stop if the run is interrupted, and (interleaved pairing) both resident ones
    current_engine: EngineRun | None = None
    resident: dict[str, EngineRun] = field(default_factory=dict)
    # the device-idle verdict of the last stop: a device still held, or a stop not made sure of,
    # voids the evaluation
    idle_ok: bool = True
    idle_reason: str | None = None

    @property
    def eid(self) -> str:
        return self.spec.evaluation_id

    def say(self, msg: str) -> None:
        self.progress(f"[evaluate {self.eid}] {msg}")

    def write(self, table: str, rows: list[dict]) -> None:
        if rows:
            self.wh.write_rows(table, self.eid, rows)
            self.rows_written[table] = self.rows_written.get(table, 0) + len(rows)

    def set_phase(self, phase: str) -> None:
        self.phase = phase
        eng = self.current_engine
        write_state(
            self.wh,
            self.eid,
            phase=phase,
            engine_pgid=eng.proc.pid if eng and eng.proc else None,
            engine_uid=eng.uid if eng and eng.unprivileged else None,
            engine_workspace=str(eng.workspace) if eng and eng.workspace else None,
        )

    def idle_again(self) -> None:
        """A new start's verdict is open again (the timed starts clear the last stop's)."""
        self.idle_ok, self.idle_reason = True, None
