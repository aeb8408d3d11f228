"""The timed passes of one engine, each workload's warm-up wave first (protocol sections 4 and 6).

Why the order and the bookkeeping: both engines serve the same passes (same sessions, seeds,
order) so each pass is a pair; every pass's rows (requests, replies, the sessions it sent,
device memory, host contention, /metrics before and after) are written as it ends, and its
`passes` row last, which is what marks it whole, so a runner that dies leaves whole passes. A
pass's counted requests are kept in memory for the probes (their sampled replies are scored by
the stock engine). An engine that dies during a pass ends the evaluation (`EngineFailure`), a
contended host voids it (`ArenaVoid`).

`TimedPasses` works on the run's `RunContext` (run_context.py): it reads the task, the pool,
the tokenizer and the device, adds each pass's counted requests to the context's `records`,
and starts and stops engines through `Engines` (engines.py). Under the interleaved pairing a
pass continues its workload's lanes (a `Workload`, made by interleaved.py), passed in as `shared`.
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

from speculator_arena.protocol.model import WORKLOADS
from speculator_arena.rules.contention import pass_rows_contended
from speculator_arena.rules.counted import counted_row
from speculator_arena.rules.idle import idle_cpu_fault
from speculator_arena.rules.window import WindowRule
from speculator_arena.runners.contention import ContentionSampler, busiest
from speculator_arena.runners.engines import Engines
from speculator_arena.runners.failures import ArenaVoid, EngineFailure, IdleFault
from speculator_arena.runners.lifecycle import EngineRun
from speculator_arena.runners.memory import MemorySampler
from speculator_arena.runners.metrics import scrape
from speculator_arena.runners.run_context import RunContext
from speculator_arena.runners.workload import ClientConfig, make_lanes, record_rows, run_lanes


def sessions_per_pass(lanes: int, interleave: int, pass_seconds: float) -> int:
    """Sessions asked of the pool per pass: every slot starts one, plus spares for fast engines.

    A lane that plays through its sessions before the pass ends sits idle, so the spares are
    generous (one more session per slot for every 20 s of pass, at least four).
    """
    return lanes * interleave * max(4, math.ceil(pass_seconds / 20))


@dataclass
class Workload:
    """One workload of the interleaved pairing: its sessions (every pass's block of the pool in
    pass order, each salted for its pass), which each engine's lanes, made at its first pass and
    kept, play through over the workload's passes; and the host's contention rows of all its
    passes, when the version judges them pooled (interleaved.py)."""

    name: str
    lanes: int
    interleave: int
    sessions: list
    host: list[dict] = field(default_factory=list)
    _lanes: dict[str, list] = field(default_factory=dict)

    def lanes_of(self, engine: str, cfg: ClientConfig) -> list:
        """`engine`'s lanes, made at its first pass and kept: each pass sends the next
        `requests_per_lane` turns of the sessions its lanes hold, the replies of the earlier
        passes in their histories, so a workload's passes go as deep into the sessions as one
        long pass would (a fresh session per pass would serve only first turns, where a
        speculator that reads the context has little to read)."""
        if engine not in self._lanes:
            self._lanes[engine] = make_lanes(cfg, self.sessions, self.lanes, self.interleave)
        return self._lanes[engine]

    def sent(self, records) -> list:
        """The sessions that `records` (one engine's pass) sent turns of."""
        ids = {r.session_id for r in records}
        return [s for s in self.sessions if s.session_id in ids]


class TimedPasses:
    """Timed passes and their warm-ups, each landed as raw rows (the module's docstring)."""

    def __init__(self, ctx: RunContext, engines: Engines):
        self.ctx, self.engines = ctx, engines

    def client_config(self, engine: str, er: EngineRun) -> ClientConfig:
        t = self.ctx.task
        return ClientConfig(
            base_url=er.base_url,
            served_name=t.task.model,
            evaluation_id=self.ctx.eid,
            engine=engine,
            sampling={"temperature": t.sampling.temperature, "top_p": t.sampling.top_p, "top_k": t.sampling.top_k},
            window=WindowRule.of(t),
            think_cap_s=t.think_time.cap_seconds,
            think_scale=t.think_time.scale_c,
            max_tokens_cap=t.max_tokens_cap,
            tokenizer=self.ctx.tokenizer,
        )

    def timed(self, engine: str, src: Path, indices: range, again: bool = False) -> None:
        """One timed start: per workload its warm-up wave, then the passes `indices` (all of them
        under sequential pairing, one half under mirrored: `TaskProtocol.pass_halves`); `again`
        marks an engine's second start, whose warm-ups get their own pass ids."""
        self.ctx.idle_again()
        er = self.engines.start(engine, src, "timed", self.ctx.task.engine_environment.gpu_memory_utilization)
        cfg = self.client_config(engine, er)
        for w in WORKLOADS:
            self.warmup(engine, er, cfg, w, again)
            for i in indices:
                self.serve(engine, er, cfg, w, i)
        self.engines.stop(er, record=True)

    def warmup(self, engine: str, er: EngineRun, cfg: ClientConfig, w: str, again: bool = False) -> None:
        """The protocol's warm-up waves before a workload's passes: each lane sends `warmup_waves`
        requests of warm-up sessions (none when the version says 0)."""
        ctx = self.ctx
        waves = ctx.task.warmup_waves
        if waves == 0:
            return
        L = ctx.task.lanes[w]
        pass_id = f"warmup-{w}-again" if again else f"warmup-{w}"
        ctx.set_phase(f"{engine} {pass_id}")
        sessions = ctx.pool.warmup(ctx.eid, w, L)
        now = time.time()
        wl = ctx.task.workloads[w]
        records = asyncio.run(
            run_lanes(
                cfg,
                sessions,
                L,
                1,
                pass_id,
                now + wl.pass_seconds,
                now + wl.pass_seconds + ctx.task.grace_seconds,
                max_requests_per_lane=waves,
                stop_check=lambda: not er.alive(),
            )
        )
        rows = [
            record_rows(
                r,
                evaluation_id=ctx.eid,
                engine=engine,
                pass_id=pass_id,
                workload=w,
                pass_index=None,
                tokenizer=ctx.tokenizer,
            )[0]
            for r in records
        ]
        ctx.write("requests", rows)
        if not er.alive():
            er.died = True
            self.engines.stop(er, record=True)
            raise EngineFailure(f"{engine} engine died during {pass_id}")
        ctx.say(f"{engine} {pass_id}: {sum(bool(r['done']) for r in rows)}/{len(rows)} requests answered")

    def pass_size(self, w: str, i: int, L: int, wl) -> int:
        """What to ask of the pool: the spares we want, at most what the pass's block holds."""
        n = sessions_per_pass(L, wl.interleave, wl.pass_seconds)
        blocks = getattr(self.ctx.pool, "blocks", None)
        if callable(blocks):
            start, end = blocks()[(w, i)]
            n = min(n, end - start)
        return n

    def serve(
        self,
        engine: str,
        er: EngineRun,
        cfg: ClientConfig,
        w: str,
        i: int,
        idle: EngineRun | None = None,
        shared: Workload | None = None,
    ) -> None:
        """One timed pass of `engine`. `idle`: the other engine, resident and frozen meanwhile (the
        interleaved pairing, whose workload's lanes `shared` holds): the CPU its control group
        used during the pass is recorded, and judged (rules/idle.py); its processes are the
        evaluation's own, never foreign CPU."""
        ctx, t = self.ctx, self.ctx.task
        L, wl = t.lanes[w], t.workloads[w]
        pass_id = f"{w}-{i}"
        ctx.set_phase(f"{engine} {pass_id}")
        lanes = shared.lanes_of(engine, cfg) if shared is not None else None
        sessions = ctx.pool.passes(ctx.eid, w, i, self.pass_size(w, i, L, wl)) if lanes is None else []
        metrics_before = scrape(er.base_url, evaluation_id=ctx.eid, pass_id=pass_id, engine=engine, phase="before")
        own_pids = er.pids if idle is None else (lambda: er.pids() + idle.pids())
        sampler = MemorySampler(ctx.device, t.device_idle.memory_sample_interval_seconds, er.pids).start()
        contention = (
            ContentionSampler(t.contention.sample_interval_seconds, own_pids, ctx.device).start()
            if t.contention is not None
            else None
        )
        cpu_before = _group_cpu(er, idle)
        started = time.time()
        ends, grace_ends = started + wl.pass_seconds, started + wl.pass_seconds + t.grace_seconds
        try:
            records = asyncio.run(
                run_lanes(
                    cfg,
                    sessions,
                    L,
                    wl.interleave,
                    pass_id,
                    ends,
                    grace_ends,
                    max_requests_per_lane=wl.requests_per_lane,
                    stop_check=lambda: not er.alive(),
                    lane_state=lanes,
                )
            )
        finally:
            samples = sampler.stop()
            host = contention.stop() if contention is not None else []
        finished = time.time()
        if shared is not None:  # the sessions this pass sent turns of
            sessions = shared.sent(records)
        cpu_used = [b - a if a is not None else None for a, b in zip(cpu_before, _group_cpu(er, idle))]
        self.land(
            engine,
            er,
            w,
            i,
            records,
            sessions,
            times=(started, ends, grace_ends, finished),
            samples=samples,
            host=host,
            cpu_used=cpu_used,
            metrics_before=metrics_before,
            idle_engine=idle.engine if idle is not None else None,
            shared=shared,
        )

    def land(
        self,
        engine: str,
        er: EngineRun,
        w: str,
        i: int,
        records: list,
        sessions: list,
        *,
        times: tuple[float, float, float, float],
        samples: list[dict],
        host: list[dict],
        cpu_used: list[float | None],
        metrics_before: list[dict],
        idle_engine: str | None,
        shared: Workload | None = None,
        judge_idle: bool = True,
    ) -> None:
        """A pass's rows, its `passes` row last, then its judgements: the engine died
        (`EngineFailure`), the host was contended (`ArenaVoid`, or, when the version judges a
        workload's passes pooled, the host rows kept in `shared` for interleaved.py), the idle
        engine used CPU (`IdleFault`, when `judge_idle`). `times`: started, ends, grace end,
        finished, on the clock the pass's request times are on (the wall's, or the engine's
        under the sliced pass: sliced.py)."""
        ctx, t = self.ctx, self.ctx.task
        L, wl = t.lanes[w], t.workloads[w]
        pass_id = f"{w}-{i}"
        started, ends, grace_ends, finished = times
        error = None
        died = not er.alive()
        if died:
            er.died = True
            error = f"{engine} engine died during the pass"
        metrics_after = (
            [] if died else scrape(er.base_url, evaluation_id=ctx.eid, pass_id=pass_id, engine=engine, phase="after")
        )
        req_rows, reply_rows = [], []
        for r in records:
            a, b = record_rows(
                r,
                evaluation_id=ctx.eid,
                engine=engine,
                pass_id=pass_id,
                workload=w,
                pass_index=i,
                tokenizer=ctx.tokenizer,
            )
            req_rows.append(a)
            reply_rows.append(b)
        is_counted = [
            counted_row(row, slack=t.count_slack_tokens, ends_at=ends, grace_ends_at=grace_ends) for row in req_rows
        ]
        ctx.records[engine].extend(r for r, c in zip(records, is_counted) if c)
        ctx.write("requests", req_rows)
        ctx.write("replies", reply_rows)
        ctx.write("memory", [dict(s, evaluation_id=ctx.eid, pass_id=pass_id, engine=engine) for s in samples])
        ctx.write("contention", [dict(h, evaluation_id=ctx.eid, pass_id=pass_id, engine=engine) for h in host])
        ctx.write("metrics", metrics_before + metrics_after)
        ctx.write(
            "sessions",
            [
                {"pass_id": pass_id, "engine": engine, "session_id": s.session_id, "family": s.family, "app": s.app}
                for s in sessions
            ],
        )
        ctx.write(
            "passes",
            [
                {
                    "evaluation_id": ctx.eid,
                    "pass_id": pass_id,
                    "engine": engine,
                    "workload": w,
                    "pass_index": i,
                    "lanes": L,
                    "interleave": wl.interleave,
                    "started_at": started,
                    "ends_at": ends,
                    "grace_ends_at": grace_ends,
                    "finished_at": finished,
                    "status": "aborted" if died else "complete",
                    "error": error,
                    "memory_status": "sampled" if ctx.device.available else "unavailable",
                    "memory_note": None if ctx.device.available else ctx.device.reason,
                    "device_total_bytes": ctx.device.total_bytes,
                    "gpu_memory_utilization": t.engine_environment.gpu_memory_utilization,
                    "engine_cpu_seconds": cpu_used[0],
                    "idle_engine_cpu_seconds": cpu_used[1],
                }
            ],
        )
        toks = sum(r["output_tokens"] for r, c in zip(req_rows, is_counted) if c)
        peak = max((s["used_bytes"] for s in samples if s["used_bytes"] is not None), default=None)
        foreign = sum(h.get("foreign_cpu_seconds") or 0.0 for h in host) / max(finished - started, 1e-9)
        ctx.say(
            f"{engine} {pass_id}: {sum(is_counted)}/{len(req_rows)} requests counted, {toks} tokens"
            + (f", peak device memory {peak / 2**30:.2f} GiB" if peak is not None else "")
            + (f", foreign CPU {foreign:.2f} cores" if host else "")
        )
        if died:
            self.engines.stop(er, record=True)
            raise EngineFailure(f"{engine} engine died during {pass_id}")
        per_workload = shared is not None and t.interleaving.contention_per_workload
        if per_workload:
            shared.host.extend(host)  # judged over the workload's passes (interleaved.py)
        why = pass_rows_contended(host, t.contention) if t.contention is not None and not per_workload else None
        if why:
            self.engines.stop(er, record=True)
            busy = busiest(host)
            raise ArenaVoid(f"host contended ({engine} {pass_id}: {why}{'; ' + busy if busy else ''})")
        if idle_engine is not None and judge_idle:
            fault = idle_cpu_fault(cpu_used[1], t.interleaving.max_idle_cpu_seconds)
            if fault:
                raise IdleFault(
                    idle_engine, f"{idle_engine} engine {fault} during the {engine} engine's pass {pass_id}"
                )


def _group_cpu(er: EngineRun, idle: EngineRun | None) -> list[float | None]:
    """CPU seconds so far of the serving engine's and the idle engine's control groups (None
    without them: the pairings that run one engine at a time)."""
    return [e.cgroup.cpu_seconds() if e is not None and e.cgroup is not None else None for e in (er, idle)]
