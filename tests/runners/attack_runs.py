"""The attack module's evaluations, run once per test session and shared (session-scoped fixture
`evaluated` in conftest.py): tests/runners/test_attacks.py asserts their verdicts, and
tests/runners/test_calibration.py derives a calibration from the same stored runs (plus the A/A
runs it lacks), so CI pays for each evaluation once.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from ci_profile import full_profile  # tests/runners is on sys.path (conftest)

from speculator_arena.runners.harness import Evaluation
from speculator_arena.runners.spec import REPO, EvaluationSpec
from speculator_arena.warehouse import Warehouse

HONEST = {
    "dev-stock": "engines/dev-stock",
    "dev-ngram": "engines/dev-ngram",
    "dev-self-draft": "engines/dev-self-draft",
    "dev-suffix": "engines/dev-suffix",
    "inflate_counters": "engines/attacks/dev-inflate-counters",
}
# attack -> (engine directory, the gates of section 9 of which at least one must fail)
ATTACKS = {
    # engines/attacks/dev-loose-accept relaxed to accepting every draft of a weak self-draft: its
    # shift (n-gram drafts, threshold 0.3) is within the noise of a CI-sized sample (10-25 replies per
    # engine: first-choice share -0.10, +0.03 and -0.06 in three runs; section 9's evidence used 512
    # replies); accepting every draft ("typical acceptance" taken to its end) is the same attack mode,
    # strong enough for the likelihood and first-choice checks at CI size.
    "loose_accept": ("engines/attacks/dev-loose-accept-all", {"sampled_likelihood", "first_choice"}),
    # issue 35: lossy acceptance switched on by configuration (vLLM's rejection_sample_method
    # "synthetic"; here the development engine's equivalent): a weak draft's tokens accepted with
    # probability 0.9, unverified. Greedy replies stop being the target's, sampled ones its likelihood.
    "synthetic_acceptance": (
        "engines/attacks/dev-synthetic-acceptance",
        {"greedy_agreement", "sampled_likelihood", "first_choice"},
    ),
    "force_greedy": ("engines/attacks/dev-force-greedy", {"first_choice"}),
    "other_sampling": ("engines/attacks/dev-other-sampling", {"first_choice", "sampled_likelihood", "length"}),
    "quantized": ("engines/attacks/dev-quantized", {"target_fidelity"}),
    "cut_half": ("engines/attacks/dev-cut-half", {"length"}),
    # SCORING.md "Probe items the candidate does not answer": each hole planted alone must score
    # 0 with its gate named, never void (refunded) and never pass.
    "empty_probe_replies": ("engines/attacks/dev-empty-probe-replies", {"greedy_agreement"}),
    "garbage_logprob_ids": ("engines/attacks/dev-garbage-logprob-ids", {"target_fidelity", "answering"}),
    "skip_probe_items": ("engines/attacks/dev-skip-probe-items", {"target_fidelity"}),
}
PROBE_HOLES = ("empty_probe_replies", "garbage_logprob_ids", "skip_probe_items")
# The probe holes are caught in the probe phase; their timed passes need only leave each engine a
# few counted replies, so that no gate but theirs is "not measured" (the likelihood sample needs
# two): passes of 1-2 s and four sampled replies (the attack profile's busy pass of 10 s and 24
# replies scored twice were half of each of these evaluations). The lanes stay the attack
# profile's: every run is scored under that version, whose lanes the passes are checked against.
PROBE_HOLE_OVERRIDES = {
    "workloads": {
        "solo": {"interleave": 1, "pass_seconds": 1, "speed": "request_time"},
        "team": {"interleave": 2, "pass_seconds": 1, "speed": "busy_window"},
        "busy": {"interleave": 2, "pass_seconds": 2, "speed": "busy_window"},
    },
    "gates": {"sampled_likelihood": {"replies": 4, "context_tokens": 200, "reply_chars": 300}},
}
# The stock engine as candidate while a process outside the runner's and the engine's trees burns
# a core: the runner sees the contended first pass and stops the evaluation, void (refunded).
CONTENDED = {"host_contended": "engines/dev-stock"}
HOG = "import time\nt = time.time()\nwhile time.time() - t < 120: pass\n"
# skip_probe_items refuses every 11th prompt_logprobs request: under the 10% answering limit only
# with 11 or more fidelity texts, so it runs under a version of the attack profile that has 11.
SKIP_TEXTS = 11
# What CI affords (four paired evaluations of the real model, about 5 of its minutes): each hole that issue 10 closed where a candidate gained by failing (empty probe
# replies were refunded, foreign token ids left fidelity blank, skipped items cost nothing), the
# lossy acceptance every speculator could slip into (likelihood, first choice). The honest side in CI is the session's real evaluation (dev-ngram
# under the shipped local profile), whose every gate must pass and is recomputed independently
# (tests/scoring/test_independent_recompute.py), the length gate's pairs and interval included.
# The rest (the honest references under this profile, a cut at half the reply budget, forced
# greedy, other sampling, quantization, inflated counters) run with ARENA_TEST_PROFILE=full, as
# does the real calibration that adopts them. (cut_half left CI's list when CI ran past its 40
# minutes, CI at 5a9f4fb: of the six it alone exercised no runner path the others do not; the
# length gate failing on stored rows is tests/scoring/test_score_synthetic.py's. host_contended
# left it when the cluster tests joined CI, for the same reason: a real hog beside real
# evaluations, void each time and never ranked, is tests/runners/test_one_door.py's demo test,
# which CI runs.)
CI_RUNS = (
    "empty_probe_replies",
    "garbage_logprob_ids",
    "skip_probe_items",
    "loose_accept",
)
SCORED_GATES = {"greedy_agreement", "sampled_likelihood", "first_choice", "target_fidelity", "length", "answering"}


# The attack profile skips the warm-up waves (a quarter of each evaluation's time): what they warm,
# the prefix cache, changes speeds and no gate. (Two evaluations at a time were tried: on two
# vCPUs a pair took longer than two runs one after the other, and the hypervisor's steal voided
# runs.) host_contended too: beside the hog its warm-up wave alone took a minute.


def run_attack_evaluations(built_home, tmp_path_factory) -> dict:
    """Run every evaluation once (CI attack profile) and score them together."""
    from ci_profile import ATTACK_OVERRIDES, ENGINE_THREADS, stage_ci_protocol

    d = tmp_path_factory.mktemp("attack_protocol")
    version = stage_ci_protocol(d, warmup_waves=0, **ATTACK_OVERRIDES)
    probe_holes = _stage_variant(d, version, version + 1, PROBE_HOLE_OVERRIDES)
    more_texts = _stage_variant(d, probe_holes, version + 2, {"gates": {"target_fidelity": {"texts": SKIP_TEXTS}}})
    old = {k: os.environ.get(k) for k in ("ARENA_PROTOCOL_DIR", "OMP_NUM_THREADS")}
    os.environ["ARENA_PROTOCOL_DIR"] = str(d)
    names = selected()
    status = {}
    try:
        for name, engine in names.items():
            v = more_texts if name == "skip_probe_items" else probe_holes if name in PROBE_HOLES else version
            # beside the hog, an engine on both cores crawls (its threads wait on the busy one: a 2-s
            # pass took 49 s); what is under test there is the runner's judgment, not the engine
            os.environ["OMP_NUM_THREADS"] = "1" if name in CONTENDED else ENGINE_THREADS
            spec = EvaluationSpec(
                task_id="local-smollm2",
                engine=str(REPO / engine),
                evaluation_id=_eid(name),
                label=name,
                target=str(built_home["target"]),
                is_reference=name in HONEST,
                protocol_version=v,
            )
            hog = _start_hog() if name in CONTENDED else None
            try:
                status[name] = Evaluation(spec, home=built_home["home"], progress=lambda m: print(m, flush=True)).run()
            finally:
                if hog is not None:
                    _stop_hog(hog)
        from speculator_arena.scoring import score_warehouse

        scores = score_warehouse(
            Warehouse(built_home["home"]), protocol_version=version, evaluation_ids=[_eid(n) for n in names]
        )
    finally:
        _restore(old, *old)
    wh = Warehouse(built_home["home"])
    contention = {_eid(n): wh.read_table("contention", _eid(n)).to_pylist() for n in names}
    return {"status": status, "scores": scores, "contention": contention, "protocol_dir": d, "version": version}


def selected() -> dict[str, str]:
    """The runs this session makes, name -> engine directory: every run with
    ARENA_TEST_PROFILE=full, CI_RUNS otherwise, or those ARENA_ATTACK_TEST_ONLY names."""
    names = {**HONEST, **{k: v[0] for k, v in ATTACKS.items()}, **CONTENDED}
    only = os.environ.get("ARENA_ATTACK_TEST_ONLY")  # e.g. "dev-stock,force_greedy" to iterate locally
    keep = only.split(",") if only else names if full_profile() else CI_RUNS
    return {k: v for k, v in names.items() if k in keep}


def _eid(name: str) -> str:
    return f"atk-{name.replace('_', '-')}"


def _restore(old: dict, *keys: str) -> None:
    for k in keys:
        if old[k] is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = old[k]


def _start_hog() -> int:
    """A CPU hog detached from this process's tree (its shell exits at once), as another job on
    the machine would be; bounded to 120 s by itself. Returns its pid."""
    import subprocess
    import sys

    out = subprocess.run(
        ["sh", "-c", f"{shlex.quote(sys.executable)} -c '{HOG}' >/dev/null 2>&1 & echo $!"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return int(out.split()[-1])


def _stop_hog(pid: int) -> None:
    import signal

    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _stage_variant(d: Path, version: int, new: int, task_values: dict) -> int:
    """Stage v<new> in `d`: v<version> with the local task's `task_values` (its `gates` entries one
    by one); return its number."""
    import yaml

    doc = yaml.safe_load((d / f"v{version}.yaml").read_text())
    doc["version"] = new
    task = doc["tasks"]["local-smollm2"]
    for k, v in task_values.items():
        task[k] = {**task[k], **v} if k == "gates" else v
    (d / f"v{new}.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return new
