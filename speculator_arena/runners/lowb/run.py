"""The order of one LowBArena evaluation's steps, and what ends it (the rules' "same pod, same
requests": both engines on this machine, one after the other, each start's rows landed as it ends).

Order: the checkpoints read (before any engine code runs: the contract's tensors and the
declared format), then four starts, candidate, stock, stock, candidate: each start idles a
moment (its weights and other memory sampled), warms up, and serves its half of every
workload's passes; the first start of each engine also answers the accuracy items (one run per
seed: two on the test split) and the KL probe. Why C S S C: an engine started first on a machine
that drifts would otherwise carry the drift into every ratio; mirrored, the drift cancels to
first order, as the speculator arena's `mirrored` pairing does.

What ends it: a candidate that cannot start or dies is the candidate's failure (`EngineFailure`,
failed); a stock engine that does, a host contended during a timed pass, or a device still held
after a stop voids it (`ArenaVoid`); both as the speculator arena's harness handles them.
"""

from __future__ import annotations

import math
from pathlib import Path

from speculator_arena.checkpoints.inspect_tensors import inspect_checkpoint
from speculator_arena.rules.contention import pass_rows_contended
from speculator_arena.runners.contention import ContentionSampler, busiest
from speculator_arena.runners.failures import ArenaVoid, EngineFailure
from speculator_arena.runners.lowb.accuracy import answer_items
from speculator_arena.runners.lowb.kl_probe import run_probe
from speculator_arena.runners.lowb.memory_samples import EngineMemory, sample_for
from speculator_arena.runners.lowb.workload_pass import request_body, request_rows, serve_requests
from speculator_arena.runners.workload import request_seed

WARMUP_TOKENS = 8


def as_messages(text: str) -> list[dict]:
    """A workload prompt (real text of exactly the workload's prompt tokens) as the user's message."""
    return [{"role": "user", "content": text}]


def start_plan(passes: int) -> list[tuple[str, range, bool]]:
    """(engine, pass indices, answers the items and the probe) of each start: C S S C."""
    first = range(0, math.ceil(passes / 2))
    second = range(first.stop, passes)
    plan = [("candidate", first, True), ("stock", first, True)]
    if len(second):
        plan += [("stock", second, False), ("candidate", second, False)]
    return plan


class LowbRun:
    """One LowBArena evaluation's steps over the run's context (the module's docstring)."""

    def __init__(self, ctx, engines, lowb_task, protocol, *, artifact: Path | None, items, kl_prompts, prompts):
        self.ctx, self.engines, self.t, self.proto = ctx, engines, lowb_task, protocol
        self.artifact = artifact  # the candidate's checkpoint (None: the target itself, BF16's A/A)
        self.items, self.kl_prompts, self.prompts = items, kl_prompts, prompts
        self.sampling = {k: getattr(protocol.sampling, k) for k in ("temperature", "top_p", "top_k")}

    # ---- the steps ------------------------------------------------------------------------
    def run(self, src: dict[str, Path]) -> None:
        ctx = self.ctx
        ctx.set_phase("reading the checkpoints")
        for engine, path in (("stock", ctx.target), ("candidate", self.artifact or ctx.target)):
            # headers only, nothing loaded or run (checkpoints/inspect_tensors.py): the contract's rows
            report = inspect_checkpoint(Path(path))
            ctx.write("lowb_tensors", report.tensor_rows(ctx.eid, engine))
            ctx.write("lowb_checkpoints", [report.checkpoint_row(ctx.eid, engine, self.t.device)])
        passes = max(w.passes for w in self.t.workloads.values())
        for engine, indices, probes in start_plan(passes):
            self.one_start(engine, src[engine], indices, probes)

    def one_start(self, engine: str, src: Path, indices: range, probes: bool) -> None:
        ctx = self.ctx
        ctx.idle_again()
        artifact = self.artifact if engine == "candidate" else None
        util = self.proto.runner.gpu_memory_utilization
        er = self.engines.start(engine, src, "timed", util, artifact=artifact)
        try:
            interval = self.proto.memory.sample_interval_seconds
            ctx.set_phase(f"{engine}: idle memory")
            idle = sample_for(
                self.proto.memory.idle_seconds, ctx.device, er.pids, interval, engine=engine, phase="idle"
            )
            ctx.write("lowb_memory", idle)
            self.warm_up(engine, er)
            for w, wl in self.t.workloads.items():
                for i in indices:
                    if i < wl.passes:
                        self.timed_pass(engine, er, w, wl, i)
            if probes:
                self.accuracy(engine, er)
                self.kl(engine, er)
        except BaseException:
            if er.stopped_at is None:
                self.engines.stop(er, record=True)
            raise
        self.engines.stop(er, record=True)
        if not ctx.idle_ok:
            raise ArenaVoid(ctx.idle_reason)

    def _died(self, engine: str, er, during: str) -> None:
        if not er.alive():
            er.died = True
            self.engines.stop(er, record=True)
            raise EngineFailure(f"{engine} engine died during {during}")

    def warm_up(self, engine: str, er) -> None:
        """One short request per workload's prompt length, not timed: the first request after a
        start pays for lazy initialisation that no pass should."""
        ctx = self.ctx
        ctx.set_phase(f"{engine}: warm-up")
        for w, wl in self.t.workloads.items():
            messages = as_messages(self.prompts(w, -1, 1, wl.prompt_tokens)[0][1])
            body = request_body(
                self.t.model, messages, WARMUP_TOKENS, request_seed(ctx.eid, f"warmup-{w}", 0), self.sampling
            )
            serve_requests(er.base_url, [body], 1, deadline_s=self.proto.runner.pass_timeout_seconds, alive=er.alive)
        self._died(engine, er, "the warm-up")

    def timed_pass(self, engine: str, er, w: str, wl, i: int) -> None:
        ctx, run = self.ctx, self.proto.runner
        pass_id = f"lowb-{w}-{i}"
        ctx.set_phase(f"{engine} {pass_id}")
        prompts = [(rid, as_messages(text)) for rid, text in self.prompts(w, i, wl.requests, wl.prompt_tokens)]
        bodies = [
            request_body(
                self.t.model,
                messages,
                wl.generated_tokens,
                request_seed(ctx.eid, f"{w}-{i}-{rid}", 0),
                self.sampling,
                ignore_eos=True,
                min_tokens=wl.generated_tokens,
            )
            for rid, messages in prompts
        ]
        n_prompt = [n for _, _, n in (self.prompt_sizes(p) for p in prompts)]
        memory = EngineMemory(
            ctx.device,
            er.pids,
            self.proto.memory.sample_interval_seconds,
            engine=engine,
            phase="pass",
            workload=w,
            pass_index=i,
        ).start()
        host = ContentionSampler(run.contention.sample_interval_seconds, er.pids, ctx.device).start()
        try:
            results = serve_requests(
                er.base_url, bodies, wl.at_once, deadline_s=run.pass_timeout_seconds, alive=er.alive
            )
        finally:
            samples = memory.stop()
            host_rows = host.stop()
        rows = request_rows(results, bodies, n_prompt, ctx.tokenizer, engine=engine, workload=w, pass_index=i)
        ctx.write("lowb_requests", rows)
        ctx.write("lowb_memory", samples)
        ctx.write("contention", [dict(h, pass_id=pass_id, engine=engine) for h in host_rows])
        ok = sum(r["ok"] for r in rows)
        peak = max((s["bytes"] for s in samples if s["bytes"] is not None), default=None)
        ctx.say(
            f"{engine} {pass_id}: {ok}/{len(rows)} requests whole"
            + (f", peak memory {peak / 2**20:.0f} MiB" if peak is not None else "")
        )
        self._died(engine, er, pass_id)
        why = pass_rows_contended(host_rows, run.contention)
        if why:
            self.engines.stop(er, record=True)
            busy = busiest(host_rows)
            raise ArenaVoid(f"host contended ({engine} {pass_id}: {why}{'; ' + busy if busy else ''})")

    def prompt_sizes(self, prompt):
        """(request id, messages, prompt tokens by the target's tokenizer and chat template)."""
        rid, messages = prompt
        ids = self.ctx.tokenizer.apply_chat_template(
            messages, tokenize=True, add_generation_prompt=True, enable_thinking=False
        )
        n = len(ids["input_ids"]) if isinstance(ids, dict) else len(ids)
        return rid, messages, n

    def accuracy(self, engine: str, er) -> None:
        ctx = self.ctx
        runs = self.proto.accuracy.runs_scored if ctx.spec.split == "test" else self.proto.accuracy.runs_dev
        at_once = max(w.at_once for w in self.t.workloads.values())
        for r in range(runs):
            ctx.set_phase(f"{engine}: accuracy run {r}")
            rows = answer_items(
                self.items,
                er.base_url,
                self.t.model,
                self.sampling,
                ctx.tokenizer,
                seed_of=lambda item_id, r=r: request_seed(ctx.eid, f"item-{item_id}", r),
                at_once=at_once,
                deadline_s=self.proto.runner.pass_timeout_seconds,
                alive=er.alive,
                engine=engine,
                run_index=r,
            )
            ctx.write("lowb_items", rows)
            passed = sum((x["score"] or 0) for x in rows)
            ctx.say(f"{engine} accuracy run {r}: {len(rows)} items, {passed:g} points of score")
            self._died(engine, er, f"accuracy run {r}")

    def kl(self, engine: str, er) -> None:
        ctx = self.ctx
        ctx.set_phase(f"{engine}: KL probe")
        prompt_rows, position_rows = run_probe(
            engine, er.base_url, self.t.model, self.kl_prompts, ctx.tokenizer, self.proto.accuracy.kl_top_k, er.alive
        )
        ctx.write("lowb_kl_prompts", prompt_rows)
        ctx.write("lowb_logprobs", position_rows)
        ctx.say(f"{engine} KL probe: {sum(r['answered'] for r in prompt_rows)}/{len(prompt_rows)} prompts answered")
        self._died(engine, er, "the KL probe")
