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

A mixin of `Evaluation` (harness.py), as the other steps: it reads `task`, `eid`, `say` and the
steps of engines.py, passes.py and probe_phase.py.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from speculator_arena.protocol.model import WORKLOADS
from speculator_arena.rules.contention import pass_rows_contended
from speculator_arena.runners import freezer, reach, sidecar_engine
from speculator_arena.runners.contention import busiest
from speculator_arena.runners.failures import ArenaVoid, IdleFault
from speculator_arena.runners.lifecycle import ENGINE_USER, EngineRun
from speculator_arena.runners.workload import make_lanes

# The stock engine's own user under the interleaved pairing (the candidate keeps ENGINE_USER).
STOCK_USER = "arena-stock"
USERS = {"candidate": ENGINE_USER, "stock": STOCK_USER}
OTHER = {"candidate": "stock", "stock": "candidate"}


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
    def _interleaved(self, src: dict[str, Path]) -> None:
        """Both engines' timed passes, interleaved; then their probes on the same starts when the
        version says so (else the probe phase restarts them, as the other pairings do)."""
        why = freezer.unavailable() or (
            "the engine runs in another container (kubernetes backend)" if sidecar_engine.address() else None
        )
        if why:
            raise ArenaVoid(f"interleaved pairing not possible here: {why}")
        order = pass_order(self.eid, self.task.passes_per_workload)
        iv = self.task.interleaving
        cfgs = self._start_resident(src, order[0])
        for k, w in enumerate(WORKLOADS):
            first = order[0][::-1] if iv.alternate_start_order and k % 2 else order[0]
            if k and iv.fresh_starts_per_workload:
                self.stop_resident()
                if not self._idle_ok:
                    raise ArenaVoid(self._idle_reason)
                cfgs = self._start_resident(src, first)
            self.workload_host: list[dict] = []
            self._begin_workload(w)
            for engine in first:
                self._turn(engine, lambda e=engine, w=w, cfgs=cfgs: self._warmup(e, self.resident[e], cfgs[e], w))
            for i, pair in enumerate(order):
                if iv.slice_seconds:
                    self._sliced_pass(pair, cfgs, w, i)
                    continue
                for engine in pair:
                    self._turn(
                        engine,
                        lambda e=engine, w=w, i=i, cfgs=cfgs: self._pass(
                            e, self.resident[e], cfgs[e], w, i, idle=self.resident[OTHER[e]]
                        ),
                    )
            self._judge_workload(w)

    def _start_resident(self, src: dict[str, Path], first: tuple[str, str]) -> dict:
        """Start both engines for the timed passes (the one served first starts first), each
        frozen once healthy; their client configurations."""
        self.resident: dict[str, EngineRun] = {}
        util = self.task.engine_environment.gpu_memory_utilization
        for engine in first:
            er = self.start_engine(
                engine, src[engine], "timed", util, run_user=USERS[engine], cgroup=self._cgroup(engine)
            )
            self.resident[engine] = er
            er.cgroup.freeze()
        return {e: self.client_config(e, er) for e, er in self.resident.items()}

    def _begin_workload(self, w: str) -> None:
        """The workload's sessions, every pass's block of the pool in pass order (each salted for
        its pass), which both engines' lanes play through over the workload's passes."""
        t = self.task
        L, wl = t.lanes[w], t.workloads[w]
        self.workload_sessions = [
            s
            for i in range(t.passes_per_workload)
            for s in self.pool.passes(self.eid, w, i, self._pass_size(w, i, L, wl))
        ]
        self.workload_lanes: dict[str, list] = {}

    def continuing_lanes(self, engine: str, cfg, w: str) -> list:
        """`engine`'s lanes of workload `w`, made at its first pass and kept: each pass sends the
        next `requests_per_lane` turns of the sessions its lanes hold, the replies of the earlier
        passes in their histories, so a workload's passes go as deep into the sessions as one
        long pass would (a fresh session per pass would serve only first turns, where a
        speculator that reads the context has little to read)."""
        if engine not in self.workload_lanes:
            t = self.task
            self.workload_lanes[engine] = make_lanes(cfg, self.workload_sessions, t.lanes[w], t.workloads[w].interleave)
        return self.workload_lanes[engine]

    def _judge_workload(self, w: str) -> None:
        """Host contention over the workload's passes of both engines pooled (the version's
        `interleaving.contention_per_workload`; else passes.py judged each pass): void when the
        rule of rules/contention.py says so."""
        t = self.task
        if t.contention is None or not t.interleaving.contention_per_workload:
            return
        rows = self.workload_host
        why = pass_rows_contended(rows, t.contention)
        if why:
            busy = busiest(rows)
            raise ArenaVoid(f"host contended ({w}, every pass: {why}{'; ' + busy if busy else ''})")

    def _cgroup(self, engine: str) -> freezer.EngineCgroup:
        return engine_cgroup(self.eid, engine)

    def thaw_alone(self, engine: str) -> EngineRun:
        """Thaw `engine` with the other frozen. Before the thaw, connections to its port that the
        runner did not open are the other engine's fault (reach.py)."""
        er, other = self.resident[engine], self.resident[OTHER[engine]]
        strangers = reach.foreign_connections(er.port)
        if strangers:
            raise IdleFault(
                OTHER[engine],
                f"{OTHER[engine]} engine connected to the {engine} engine's port while it was frozen "
                f"({'; '.join(strangers[:3])})",
            )
        if other.stopped_at is None:
            other.cgroup.freeze()  # already frozen; made sure of before this one runs
        er.cgroup.thaw()
        return er

    def _turn(self, engine: str, step) -> None:
        """Thaw `engine` alone, run `step`, freeze it again."""
        er = self.thaw_alone(engine)
        try:
            step()
        finally:
            if er.stopped_at is None:
                er.cgroup.freeze()

    def stop_resident(self) -> None:
        """Stop both resident engines (each stop records its start row); the device-idle wait
        after the last."""
        for er in list(getattr(self, "resident", {}).values()):
            if er.stopped_at is None:
                self.stop_engine(er, record=True)
        self.resident = {}
