"""The gate probes, after both engines' timed passes (protocol section 7's gates).

Why a phase of its own: the probes run on fresh starts at the probe utilization, the candidate
first (its greedy replies and fidelity texts), then the stock engine (the same, and the
likelihood scoring of both engines' sampled timed replies), and what a failure means differs
by side: a candidate that cannot start leaves its probes unanswered (charged to it by the
gates), a stock engine that cannot start or leaves more than the answering limit unanswered
voids the evaluation. The probe requests themselves are probes.py's.

A mixin of `Evaluation` (harness.py): it reads `task`, `eid`, `pool`, `tokenizer`, `records`
and the engine steps (engines.py); it returns (ok, void reason).
"""

from __future__ import annotations

from pathlib import Path

from speculator_arena.rules.answering import over_limit
from speculator_arena.runners import probes as probes_mod
from speculator_arena.runners.failures import EngineFailure


class ProbePhase:
    def _probes(self, cand_src: Path, stock_src: Path) -> tuple[bool, str | None]:
        util = self.task.engine_environment.probe_gpu_memory_utilization
        g = self.task.gates
        greedy = self.pool.greedy_prompts(g.greedy_agreement.prompts)
        texts = self.pool.fidelity_texts(g.target_fidelity.texts)
        samples = {
            e: probes_mod.sample_replies(self.records[e], g.sampled_likelihood.replies, self.eid)
            for e in ("candidate", "stock")
        }
        runner = probes_mod.ProbeRunner(self.eid, self.tokenizer, self.task, self.say)

        # Candidate: its greedy replies and fidelity scores.
        try:
            er = self._probe_engine("candidate", cand_src, util)
        except EngineFailure as exc:
            self.write("probe_greedy", runner.unanswered_greedy("candidate", greedy, exc.reason))
            self.write("probe_fidelity", runner.unanswered_fidelity("candidate", texts, exc.reason))
        else:
            self.set_phase("candidate probes")
            self.write("probe_greedy", runner.greedy("candidate", er.base_url, greedy, alive=er.alive))
            self.write("probe_fidelity", runner.fidelity("candidate", er.base_url, texts, alive=er.alive))
            self._probe_done(er)
        if not self._idle_ok:
            return False, self._idle_reason

        # Stock: its greedy replies, fidelity scores, and the scoring of both engines' replies.
        try:
            er = self._probe_engine("stock", stock_src, util)
        except EngineFailure as exc:
            return False, f"stock engine (probes): {exc.reason}"
        self.set_phase("stock probes")
        rows_g = runner.greedy("stock", er.base_url, greedy, alive=er.alive)
        rows_f = runner.fidelity("stock", er.base_url, texts, alive=er.alive)
        rows_s = []
        for reply_engine in ("candidate", "stock"):
            rows_s += runner.scored(reply_engine, er.base_url, samples[reply_engine], alive=er.alive)
        self.write("probe_greedy", rows_g)
        self.write("probe_fidelity", rows_f)
        self.write("probe_scored", rows_s)
        self._probe_done(er)
        limit = self.task.gates.answering.max_unanswered_share
        # The likelihood scoring of the candidate's replies is the candidate's (its text is what
        # differs: an empty or unscorable reply is its failure, scored by the scorer's answering
        # gate); only the stock engine's scoring of its own replies can void (SCORING.md "Outcomes").
        own = [r for r in rows_s if r["reply_engine"] == "stock"]
        for check, rows in (("greedy agreement", rows_g), ("target fidelity", rows_f), ("likelihood scoring", own)):
            if over_limit(sum(not r["answered"] for r in rows), len(rows), limit)[0]:
                return False, f"stock engine left more than {limit:.0%} of the {check} probes unanswered"
        if not self._idle_ok:
            return False, self._idle_reason
        return True, None

    def _probe_engine(self, engine: str, src: Path, util: float):
        """The engine that answers `engine`'s probes: a fresh start at the probe utilization, or,
        when the interleaved pairing keeps the timed starts for the probes, the resident one
        thawed (the other frozen: runners/interleaved.py)."""
        resident = getattr(self, "resident", None)
        if not resident:
            return self.start_engine(engine, src, "probe", util)
        er = resident[engine]
        if not er.alive():
            raise EngineFailure(f"{engine} engine is no longer running for its probes")
        self.thaw_alone(engine)
        return er

    def _probe_done(self, er) -> None:
        if getattr(self, "resident", None):
            er.cgroup.freeze()
        else:
            self.stop_engine(er, record=True)
