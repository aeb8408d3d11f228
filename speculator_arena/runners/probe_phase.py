"""The gate probes, after both engines' timed passes (protocol section 7's gates).

Why a phase of its own: the probes run on fresh starts at the probe utilization, the candidate
first (its greedy replies and fidelity texts), then the stock engine (the same, and the
likelihood scoring of both engines' sampled timed replies), and what a failure means differs
by side: a candidate that cannot start leaves its probes unanswered (charged to it by the
gates), a stock engine that cannot start or leaves more than the answering limit unanswered
voids the evaluation. The probe requests themselves are probes.py's.

`ProbePhase` works on the run's `RunContext` (run_context.py): it reads the task, the pool,
the tokenizer and the timed passes' counted `records`, starts and stops engines through
`Engines` (engines.py), or, when the interleaved pairing keeps its resident engines for the
probes, thaws them one at a time (resident.py); `run` returns (ok, void reason).
"""

from __future__ import annotations

from pathlib import Path

from speculator_arena.rules.answering import over_limit
from speculator_arena.runners import probes as probes_mod
from speculator_arena.runners.engines import Engines
from speculator_arena.runners.failures import EngineFailure
from speculator_arena.runners.resident import thaw_alone
from speculator_arena.runners.run_context import RunContext


class ProbePhase:
    """The gate probes of both engines (the module's docstring): on fresh starts, or on the
    interleaved pairing's resident engines (`ctx.resident`) when its version keeps them for the
    probes."""

    def __init__(self, ctx: RunContext, engines: Engines):
        self.ctx, self.engines = ctx, engines

    def run(self, cand_src: Path, stock_src: Path) -> tuple[bool, str | None]:
        ctx = self.ctx
        util = ctx.task.engine_environment.probe_gpu_memory_utilization
        g = ctx.task.gates
        greedy = ctx.pool.greedy_prompts(g.greedy_agreement.prompts)
        texts = ctx.pool.fidelity_texts(g.target_fidelity.texts)
        samples = {
            e: probes_mod.sample_replies(ctx.records[e], g.sampled_likelihood.replies, ctx.eid)
            for e in ("candidate", "stock")
        }
        runner = probes_mod.ProbeRunner(ctx.eid, ctx.tokenizer, ctx.task, ctx.say)

        # Candidate: its greedy replies and fidelity scores.
        try:
            er = self._probe_engine("candidate", cand_src, util)
        except EngineFailure as exc:
            ctx.write("probe_greedy", runner.unanswered_greedy("candidate", greedy, exc.reason))
            ctx.write("probe_fidelity", runner.unanswered_fidelity("candidate", texts, exc.reason))
        else:
            ctx.set_phase("candidate probes")
            ctx.write("probe_greedy", runner.greedy("candidate", er.base_url, greedy, alive=er.alive))
            ctx.write("probe_fidelity", runner.fidelity("candidate", er.base_url, texts, alive=er.alive))
            self._probe_done(er)
        if not ctx.idle_ok:
            return False, ctx.idle_reason

        # Stock: its greedy replies, fidelity scores, and the scoring of both engines' replies.
        try:
            er = self._probe_engine("stock", stock_src, util)
        except EngineFailure as exc:
            return False, f"stock engine (probes): {exc.reason}"
        ctx.set_phase("stock probes")
        rows_g = runner.greedy("stock", er.base_url, greedy, alive=er.alive)
        rows_f = runner.fidelity("stock", er.base_url, texts, alive=er.alive)
        rows_s = []
        for reply_engine in ("candidate", "stock"):
            rows_s += runner.scored(reply_engine, er.base_url, samples[reply_engine], alive=er.alive)
        ctx.write("probe_greedy", rows_g)
        ctx.write("probe_fidelity", rows_f)
        ctx.write("probe_scored", rows_s)
        self._probe_done(er)
        limit = ctx.task.gates.answering.max_unanswered_share
        # The likelihood scoring of the candidate's replies is the candidate's (its text is what
        # differs: an empty or unscorable reply is its failure, scored by the scorer's answering
        # gate); only the stock engine's scoring of its own replies can void (SCORING.md "Outcomes").
        own = [r for r in rows_s if r["reply_engine"] == "stock"]
        for check, rows in (("greedy agreement", rows_g), ("target fidelity", rows_f), ("likelihood scoring", own)):
            if over_limit(sum(not r["answered"] for r in rows), len(rows), limit)[0]:
                return False, f"stock engine left more than {limit:.0%} of the {check} probes unanswered"
        if not ctx.idle_ok:
            return False, ctx.idle_reason
        return True, None

    def _probe_engine(self, engine: str, src: Path, util: float):
        """The engine that answers `engine`'s probes: a fresh start at the probe utilization, or,
        when the interleaved pairing keeps the timed starts for the probes, the resident one
        thawed (the other frozen: runners/interleaved.py)."""
        resident = self.ctx.resident
        if not resident:
            return self.engines.start(engine, src, "probe", util)
        er = resident[engine]
        if not er.alive():
            raise EngineFailure(f"{engine} engine is no longer running for its probes")
        thaw_alone(self.ctx, engine)
        return er

    def _probe_done(self, er) -> None:
        if self.ctx.resident:
            er.cgroup.freeze()
        else:
            self.engines.stop(er, record=True)
