"""The interleaved pairing (protocol v8 on the CPU tasks): both engines started once and resident,
each pass served by one engine and then the other while the idle one is frozen.

Why: on a shared 2-core host the machine's own speed drifts by 5-15% over minutes, and two starts
of the same engine serve the same requests at different speeds (docs/benchmarks/aa_noise.md).
A pairing with whole starts in turn (sequential, or mirrored C S S C) puts minutes between the two
halves of a pass pair; here the two halves of every pair follow each other within seconds, in the
order A B, B A, B A, A B, ... with A drawn per evaluation (`pass_order`), so drift falls on both
engines alike and a block's ratio is what the engines did, not when.

What keeps it fair (the candidate must gain nothing by what it does while the other is measured):
- each engine is a user of its own (`arena-engine`, `arena-stock`): neither can signal, trace or
  read the other's processes or workspace;
- each engine is in control groups of its own (freezer.py): the idle one is frozen by the kernel,
  every task of it, daemonized or not, and its CPU time is counted from the group, so CPU used
  while frozen cannot hide; more than `interleaving.max_idle_cpu_seconds` during the other's pass
  (rules/idle.py) is the candidate's failure (0, never a void) or, for the stock engine, a void;
- before an engine is thawed, every connection to its port that the runner did not open
  (reach.py) is the other engine's: requests queued to the frozen stock engine would be served
  beside the arena's once it thaws, so a candidate found doing it fails.

`InterleavedPasses` works on the run's `RunContext` (run_context.py), whose `resident` it keeps
(both engines, for the harness to stop if the run is interrupted), with the engines' starts
(engines.py) and the timed passes (passes.py); a workload's lanes, kept from pass to pass, are a
`Workload` (passes.py). An engine is thawed alone, the other frozen, by resident.py, as the
sliced pass (sliced.py) and the probes on the timed starts (probe_phase.py) thaw it.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from speculator_arena.protocol.model import WORKLOADS
from speculator_arena.rules.contention import pass_rows_contended
from speculator_arena.runners import freezer, sidecar_engine
from speculator_arena.runners.contention import busiest
from speculator_arena.runners.engines import Engines
from speculator_arena.runners.failures import ArenaVoid
from speculator_arena.runners.lifecycle import ENGINE_USER
from speculator_arena.runners.passes import TimedPasses, Workload
from speculator_arena.runners.resident import OTHER, turn
from speculator_arena.runners.run_context import RunContext
from speculator_arena.runners.sliced import sliced_pass

# The stock engine's own user under the interleaved pairing (the candidate keeps ENGINE_USER).
STOCK_USER = "arena-stock"
USERS = {"candidate": ENGINE_USER, "stock": STOCK_USER}


def pass_order(evaluation_id: str, passes: int) -> list[tuple[str, str]]:
    """Who serves each pass first: A B, B A, B A, A B, repeated (an ABBA design: a linear drift
    over four passes cancels), A the candidate or the stock engine by the evaluation id's digest,
    so a participant cannot choose it and a re-run of the same id repeats it."""
    a = "candidate" if hashlib.sha256(evaluation_id.encode()).digest()[0] & 1 else "stock"
    b = OTHER[a]
    return [(a, b) if i % 4 in (0, 3) else (b, a) for i in range(passes)]


def engine_cgroup(evaluation_id: str, engine: str) -> freezer.EngineCgroup:
    return freezer.EngineCgroup(re.sub(r"[^A-Za-z0-9_.-]", "_", f"{evaluation_id}-{engine}"))


def leftover_cgroups(evaluation_id: str) -> list[freezer.EngineCgroup]:
    """The control groups an evaluation's runner left behind (it died): `--resume` removes them."""
    groups = [engine_cgroup(evaluation_id, e) for e in USERS]
    return [g for g in groups if g.freezer.exists() or g.cpuacct.exists()]


class InterleavedPasses:
    """Both engines resident, their passes interleaved (the module's docstring)."""

    def __init__(self, ctx: RunContext, engines: Engines, passes: TimedPasses):
        self.ctx, self.engines, self.passes = ctx, engines, passes

    def run(self, src: dict[str, Path]) -> None:
        """Both engines' timed passes, interleaved; then their probes on the same starts when the
        version says so (else the probe phase restarts them, as the other pairings do)."""
        ctx = self.ctx
        why = freezer.unavailable() or (
            "the engine runs in another container (kubernetes backend)" if sidecar_engine.address() else None
        )
        if why:
            raise ArenaVoid(f"interleaved pairing not possible here: {why}")
        order = pass_order(ctx.eid, ctx.task.passes_per_workload)
        iv = ctx.task.interleaving
        cfgs = self._start_resident(src, order[0])
        for k, w in enumerate(WORKLOADS):
            first = order[0][::-1] if iv.alternate_start_order and k % 2 else order[0]
            if k and iv.fresh_starts_per_workload:
                self.stop_resident()
                if not ctx.idle_ok:
                    raise ArenaVoid(ctx.idle_reason)
                cfgs = self._start_resident(src, first)
            shared = self._workload(w)
            for engine in first:
                turn(ctx, engine, lambda e=engine, w=w, cfgs=cfgs: self.passes.warmup(e, ctx.resident[e], cfgs[e], w))
            for i, pair in enumerate(order):
                if iv.slice_seconds:
                    sliced_pass(ctx, self.passes, pair, cfgs, shared, i)
                    continue
                for engine in pair:
                    turn(
                        ctx,
                        engine,
                        lambda e=engine, w=w, i=i, cfgs=cfgs, shared=shared: self.passes.serve(
                            e, ctx.resident[e], cfgs[e], w, i, idle=ctx.resident[OTHER[e]], shared=shared
                        ),
                    )
            self._judge(shared)

    def _start_resident(self, src: dict[str, Path], first: tuple[str, str]) -> dict:
        """Start both engines for the timed passes (the one served first starts first), each
        frozen once healthy; their client configurations."""
        ctx = self.ctx
        ctx.resident = {}
        util = ctx.task.engine_environment.gpu_memory_utilization
        for engine in first:
            er = self.engines.start(
                engine, src[engine], "timed", util, run_user=USERS[engine], cgroup=engine_cgroup(ctx.eid, engine)
            )
            ctx.resident[engine] = er
            er.cgroup.freeze()
        return {e: self.passes.client_config(e, er) for e, er in ctx.resident.items()}

    def _workload(self, w: str) -> Workload:
        """Workload `w`'s sessions, every pass's block of the pool in pass order (each salted for
        its pass), which both engines' lanes play through over the workload's passes."""
        t = self.ctx.task
        L, wl = t.lanes[w], t.workloads[w]
        sessions = [
            s
            for i in range(t.passes_per_workload)
            for s in self.ctx.pool.passes(self.ctx.eid, w, i, self.passes.pass_size(w, i, L, wl))
        ]
        return Workload(w, L, wl.interleave, sessions)

    def _judge(self, shared: Workload) -> None:
        """Host contention over the workload's passes of both engines pooled (the version's
        `interleaving.contention_per_workload`; else passes.py judged each pass): void when the
        rule of rules/contention.py says so."""
        t = self.ctx.task
        if t.contention is None or not t.interleaving.contention_per_workload:
            return
        rows = shared.host
        why = pass_rows_contended(rows, t.contention)
        if why:
            busy = busiest(rows)
            raise ArenaVoid(f"host contended ({shared.name}, every pass: {why}{'; ' + busy if busy else ''})")

    def stop_resident(self) -> None:
        """Stop both resident engines (each stop records its start row, with its own device-idle
        wait); a wait that failed after the first stop is the run's verdict, not overwritten by the
        second's."""
        failed = None
        for er in list(self.ctx.resident.values()):
            if er.stopped_at is None:
                self.engines.stop(er, record=True)
                if not self.ctx.idle_ok and failed is None:
                    failed = self.ctx.idle_reason
        self.ctx.resident = {}
        if failed is not None:
            self.ctx.idle_ok, self.ctx.idle_reason = False, failed
