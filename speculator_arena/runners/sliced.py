"""The sliced pass (`interleaving.slice_seconds`, the draft v13 on the embedded task): under the
interleaved pairing, both resident engines serve each pass at once, thawed in turn a slice each.

Why: on this host the noise is the machine's speed from one request to the next (5-12%, and it
moves within seconds: docs/benchmarks/aa_noise.md). A pass served by one engine and then the
other samples that speed once per engine; two engines that take turns of 0.2 s through the same
pass both see the same host, so its moves cancel in the pass's ratio (benchmarks/aa_noise.md,
"The sliced pass": the per-pass spread of an A/A ratio a third of the whole-pass turns').

How the numbers stay what they were: each engine's time is the time it was thawed. An
`EngineClock` counts it from the pass's start (the pass's origin plus the thawed seconds so far;
a wall time at which the engine was frozen maps to the moment it was frozen), the lanes of each
engine run on its own clock (the pass's end, think times), and every time stored of the pass
(sent, chunks, ended, the pass's bounds) is on that clock. So the scorer, the counted-request
rule and the independent recomputation read a sliced pass as any other pass; the wall times of
the slices are a raw table of their own (`slices`).

What keeps it fair is what keeps the interleaved pairing fair (interleaved.py): the reach check
before every thaw (`thaw_alone`), and each group's CPU read at every slice's bounds, so the CPU
an engine's group used outside its own slices is its idle CPU, judged as before (the candidate's
a 0, the stock engine's a void). The first slice goes to the engine the A B, B A, B A, A B order
serves first; when one engine has answered all its pass, the other serves the rest alone.

`sliced_pass` is a step of the interleaved pairing (interleaved.py): it thaws an engine alone
as every step of that pairing does (resident.py), continues the workload's lanes and lands each
engine's rows through the timed passes' `land` (passes.py).
"""

from __future__ import annotations

import asyncio
import bisect
import threading
import time

from speculator_arena.rules.idle import idle_cpu_fault
from speculator_arena.runners.contention import ContentionSampler
from speculator_arena.runners.failures import IdleFault
from speculator_arena.runners.memory import MemorySampler
from speculator_arena.runners.metrics import scrape
from speculator_arena.runners.passes import TimedPasses, Workload
from speculator_arena.runners.resident import thaw_alone, turn
from speculator_arena.runners.run_context import RunContext
from speculator_arena.runners.workload import run_lanes


class EngineClock:
    """One engine's time in a sliced pass: `origin` plus the wall seconds it was thawed.

    Thread-safe: the slicer thread marks thaws and freezes, the lanes' event loop reads."""

    def __init__(self, origin: float):
        self.origin = origin
        self._starts: list[float] = []  # wall times of the thaws
        self._ends: list[float] = []  # wall times of the freezes (one fewer while thawed)
        self._before: list[float] = []  # thawed seconds before each thaw
        self._lock = threading.Lock()

    def thawed(self, at: float) -> None:
        with self._lock:
            self._before.append(self._before[-1] + self._ends[-1] - self._starts[-1] if self._starts else 0.0)
            self._starts.append(at)

    def frozen(self, at: float) -> None:
        with self._lock:
            self._ends.append(at)

    def at(self, wall: float) -> float:
        """The engine time of wall time `wall` (the moment of the last freeze while frozen)."""
        with self._lock:
            k = bisect.bisect_right(self._starts, wall) - 1
            if k < 0:
                return self.origin
            end = self._ends[k] if k < len(self._ends) else wall
            return self.origin + self._before[k] + min(wall, end) - self._starts[k]

    def now(self) -> float:
        return self.at(time.time())

    def map_result(self, res) -> None:
        """A stream's times (stamped on the wall's clock by stream.py) put on the engine's."""
        res.sent_at = self.at(res.sent_at)
        res.ended_at = self.at(res.ended_at)
        res.chunk_times = [self.at(t) for t in res.chunk_times]
        res.lines = [(self.at(t), raw) for t, raw in res.lines]


class Slicer(threading.Thread):
    """Thaws the pass's engines in turn, `slice_s` each, until both have answered their pass.

    An engine whose clock is past its grace end gets no more slices (its open streams are cut at
    the pass's wall deadline, failures as a stream cut at the grace end is). Whatever goes wrong
    here (the reach check's finding, a group that will not freeze) is kept in `error` and ends
    the pass."""

    def __init__(
        self,
        ctx: RunContext,
        order: tuple[str, str],
        clocks: dict,
        grace_ends: dict,
        slice_s: float,
        pass_id,
    ):
        super().__init__(name=f"slicer {pass_id}", daemon=True)
        self.ctx, self.order, self.clocks, self.grace_ends, self.slice_s = (
            ctx,
            order,
            clocks,
            grace_ends,
            slice_s,
        )
        self.pass_id = pass_id
        self.answered = {e: threading.Event() for e in order}
        self.halt = threading.Event()
        self.error: BaseException | None = None
        self.rows: list[dict] = []
        self.own_cpu = {e: 0.0 for e in order}
        self.cpu_start: dict[str, float] = {}
        self.cpu_end: dict[str, float] = {}

    def _cpu(self) -> dict[str, float]:
        return {e: self.ctx.resident[e].cgroup.cpu_seconds() for e in self.order}

    def _wants(self, e: str) -> bool:
        return not self.answered[e].is_set() and self.clocks[e].now() < self.grace_ends[e]

    def run(self) -> None:
        try:
            self.cpu_start = self._cpu()
            turn = 0
            while not self.halt.is_set():
                wanting = [e for e in self.order if self._wants(e)]
                if not wanting:
                    if all(self.answered[e].is_set() for e in self.order):
                        break
                    time.sleep(0.01)  # past its grace end: its lanes are being cut
                    continue
                e = self.order[turn % 2] if self.order[turn % 2] in wanting else wanting[0]
                turn = self.order.index(e) + 1
                self._slice(e)
        except BaseException as exc:  # noqa: BLE001 - handed to the pass, which raises it
            self.error = exc
        finally:
            self.cpu_end = self._cpu() if self.cpu_start else {}

    def _slice(self, e: str) -> None:
        other = self.order[1 - self.order.index(e)]
        before = self._cpu()
        er = thaw_alone(self.ctx, e)
        t0 = time.time()
        self.clocks[e].thawed(t0)
        try:
            while not self.halt.is_set() and not self.answered[e].is_set():
                if self.clocks[e].now() >= self.grace_ends[e]:
                    break
                left = t0 + self.slice_s - time.time()
                if left <= 0:
                    if self._wants(other):
                        break
                    left = self.slice_s  # the other has answered: this one serves the rest alone
                self.answered[e].wait(min(left, 0.05))
        finally:
            if er.stopped_at is None:
                er.cgroup.freeze()
            t1 = time.time()
            self.clocks[e].frozen(t1)
        after = self._cpu()
        self.own_cpu[e] += after[e] - before[e]
        self.rows.append(
            {
                "pass_id": self.pass_id,
                "engine": e,
                "slice_index": len(self.rows),
                "started_at": t0,
                "ended_at": t1,
                "cpu_seconds": after[e] - before[e],
                "other_cpu_seconds": after[other] - before[other],
            }
        )

    def idle_cpu(self, e: str) -> float:
        """CPU `e`'s group used during the pass outside its own slices."""
        return self.cpu_end[e] - self.cpu_start[e] - self.own_cpu[e]


def sliced_pass(
    ctx: RunContext, passes: TimedPasses, order: tuple[str, str], cfgs: dict, shared: Workload, i: int
) -> None:
    """Pass `i` of the workload `shared`, served by both resident engines at once in slices (the
    module's docstring). Its rows are landed per engine as any pass's (passes.py `land`), on
    each engine's clock; then the idle-CPU rule over both."""
    t, w = ctx.task, shared.name
    L, wl = t.lanes[w], t.workloads[w]
    pass_id = f"{w}-{i}"
    ctx.set_phase(f"sliced {pass_id}")
    ers = {e: ctx.resident[e] for e in order}
    lanes = {e: shared.lanes_of(e, cfgs[e]) for e in order}
    metrics_before: dict[str, list] = {}
    for e in order:
        turn(
            ctx,
            e,
            lambda e=e: metrics_before.__setitem__(
                e, scrape(ers[e].base_url, evaluation_id=ctx.eid, pass_id=pass_id, engine=e, phase="before")
            ),
        )
    own_pids = lambda: [p for e in order for p in ers[e].pids()]  # noqa: E731
    samplers = {
        e: MemorySampler(ctx.device, t.device_idle.memory_sample_interval_seconds, ers[e].pids).start() for e in order
    }
    contention = (
        ContentionSampler(t.contention.sample_interval_seconds, own_pids, ctx.device).start()
        if t.contention is not None
        else None
    )
    started = time.time()
    ends, grace_ends = started + wl.pass_seconds, started + wl.pass_seconds + t.grace_seconds
    clocks = {e: EngineClock(started) for e in order}
    slicer = Slicer(ctx, order, clocks, {e: grace_ends for e in order}, t.interleaving.slice_seconds, pass_id)
    # every stream is cut by this wall time: both engines' pass and grace, taken in turns
    stream_deadline = started + 2 * (wl.pass_seconds + t.grace_seconds) + 10

    async def both() -> dict[str, list]:
        tasks = {
            e: asyncio.create_task(
                run_lanes(
                    cfgs[e],
                    [],
                    L,
                    wl.interleave,
                    pass_id,
                    ends,
                    grace_ends,
                    max_requests_per_lane=wl.requests_per_lane,
                    stop_check=lambda e=e: not ers[e].alive() or slicer.error is not None,
                    lane_state=lanes[e],
                    clock=clocks[e],
                    stream_deadline=stream_deadline,
                )
            )
            for e in order
        }
        for e, task in tasks.items():
            task.add_done_callback(lambda _, e=e: slicer.answered[e].set())
        slicer.start()
        while not all(task.done() for task in tasks.values()):
            await asyncio.wait(list(tasks.values()), timeout=0.05)
            if slicer.error is not None or not slicer.is_alive():
                for task in tasks.values():
                    task.cancel()
                await asyncio.gather(*tasks.values(), return_exceptions=True)
                break
        return {e: task.result() for e, task in tasks.items() if not task.cancelled()}

    try:
        records = asyncio.run(both())
    finally:
        slicer.halt.set()
        if slicer.is_alive():
            slicer.join()
        samples = {e: s.stop() for e, s in samplers.items()}
        host = contention.stop() if contention is not None else []
    if slicer.error is not None:
        raise slicer.error
    ctx.write("slices", [dict(r, evaluation_id=ctx.eid, workload=w, pass_index=i) for r in slicer.rows])
    idle = {e: slicer.idle_cpu(e) for e in order}
    for e in order:
        other = order[1 - order.index(e)]
        turn(
            ctx,
            e,
            lambda e=e, other=other: passes.land(
                e,
                ers[e],
                w,
                i,
                records[e],
                shared.sent(records[e]),
                times=(started, ends, grace_ends, clocks[e].now()),
                samples=samples[e],
                host=host,
                cpu_used=[slicer.own_cpu[e], idle[other]],
                metrics_before=metrics_before[e],
                idle_engine=other,
                shared=shared,
                judge_idle=False,
            ),
        )
    for e in sorted(order, key=lambda e: e != "candidate"):  # the candidate's fault first
        fault = idle_cpu_fault(idle[e], t.interleaving.max_idle_cpu_seconds)
        if fault:
            raise IdleFault(e, f"{e} engine {fault} during the sliced pass {pass_id}, outside its own slices")
