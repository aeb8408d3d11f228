"""Section 9 for real: every attack mode of the development engine is caught by the gate the
protocol names, and the honest references pass every gate. Real engines serving the real
small model, the real pools, the real scorer; short passes (the CI attack profile).

Marked slow: nine paired evaluations of the real model. The verdicts are the point, so the
assertions are on the gates' verdicts, never skipped; only hog_memory needs a GPU (section 7's
memory gate has nothing to sample on a CPU) and is skipped there with that reason.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from speculator_arena.runners.harness import REPO, Evaluation, EvaluationSpec
from speculator_arena.runners.memory import Device
from speculator_arena.warehouse import Warehouse

pytestmark = pytest.mark.slow

HONEST = {"dev-stock": "engines/dev-stock", "dev-ngram": "engines/dev-ngram", "dev-self-draft": "engines/dev-self-draft",
          "inflate_counters": "engines/attacks/dev-inflate-counters"}
# attack -> (engine directory, the gates of section 9 of which at least one must fail)
ATTACKS = {
    "loose_accept": ("engines/attacks/dev-loose-accept", {"sampled_likelihood", "first_choice"}),
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
# The stock engine as candidate while a process outside the runner's and the engine's trees burns
# a core: the runner sees the contended first pass and stops the evaluation, void (refunded).
CONTENDED = {"host_contended": "engines/dev-stock"}
HOG = "import time\nt = time.time()\nwhile time.time() - t < 120: pass\n"
# skip_probe_items refuses every 11th prompt_logprobs request: under the 10% answering limit only
# with 11 or more fidelity texts, so it runs under a version of the attack profile that has 11.
SKIP_TEXTS = 11
SCORED_GATES = {"greedy_agreement", "sampled_likelihood", "first_choice", "target_fidelity", "length", "answering"}


def _relaxed_loose_accept(root: Path) -> Path:
    """The dev engine's loose_accept attack, relaxed to accepting every draft of a weak self-draft.

    Why not engines/attacks/dev-loose-accept as it is: its shift (n-gram drafts, threshold 0.3)
    was within the noise of a CI-sized sample (10-25 replies per engine: first-choice share
    -0.10, +0.03 and -0.06 in three runs; section 9's evidence used 512 replies). Accepting
    every draft of the target's first 4 layers ("typical acceptance" taken to its end) is the
    same attack mode, strong enough for the likelihood and first-choice checks at CI size.
    """
    d = root / "dev-loose-accept-all"
    d.mkdir()
    (d / "launch.sh").write_text(
        "#!/usr/bin/env bash\nset -euo pipefail\n"
        "export DEV_ENGINE_SPEC=selfdraft DEV_ENGINE_SPEC_K=4 DEV_ENGINE_DRAFT_LAYERS=4\n"
        "export DEV_ENGINE_ATTACK=loose_accept DEV_ENGINE_LOOSE_THRESHOLD=0.0\n"
        'exec "${ARENA_PYTHON:-python3}" -m speculator_arena.engine.serve\n')
    return d


@pytest.fixture(scope="module")
def evaluated(built_home, tmp_path_factory):
    """Run every evaluation once (CI attack profile) and score them together."""
    from ci_profile import ATTACK_OVERRIDES, stage_ci_protocol

    d = tmp_path_factory.mktemp("attack_protocol")
    version = stage_ci_protocol(d, **ATTACK_OVERRIDES)
    more_texts = _stage_more_fidelity_texts(d, version, SKIP_TEXTS)
    old = {k: os.environ.get(k) for k in ("ARENA_PROTOCOL_DIR", "OMP_NUM_THREADS")}
    os.environ["ARENA_PROTOCOL_DIR"] = str(d)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    names = {**HONEST, **{k: v[0] for k, v in ATTACKS.items()}, **CONTENDED}
    names["loose_accept"] = str(_relaxed_loose_accept(tmp_path_factory.mktemp("engines")))
    only = os.environ.get("ARENA_ATTACK_TEST_ONLY")  # e.g. "dev-stock,force_greedy" to iterate locally
    if only:
        names = {k: v for k, v in names.items() if k in only.split(",")}
    status = {}
    try:
        for name, engine in names.items():
            eid = f"atk-{name.replace('_', '-')}"
            spec = EvaluationSpec(task_id="local-smollm2", engine=str(REPO / engine), evaluation_id=eid, label=name,
                                  target=str(built_home["target"]), is_reference=name in HONEST,
                                  protocol_version=more_texts if name == "skip_probe_items" else version)
            hog = _start_hog() if name in CONTENDED else None
            try:
                status[name] = Evaluation(spec, home=built_home["home"], progress=lambda m: print(m, flush=True)).run()
            finally:
                if hog is not None:
                    _stop_hog(hog)
        from speculator_arena.scoring import score_warehouse

        scores = score_warehouse(Warehouse(built_home["home"]), protocol_version=version,
                                 evaluation_ids=[f"atk-{n.replace('_', '-')}" for n in names])
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    wh = Warehouse(built_home["home"])
    contention = {f"atk-{n.replace('_', '-')}": wh.read_table("contention", f"atk-{n.replace('_', '-')}").to_pylist()
                  for n in names}
    return {"status": status, "scores": scores, "contention": contention}


def _start_hog() -> int:
    """A CPU hog detached from this process's tree (its shell exits at once), as another job on
    the machine would be; bounded to 120 s by itself. Returns its pid."""
    import subprocess
    import sys

    out = subprocess.run(["sh", "-c", f"{sys.executable} -c '{HOG}' >/dev/null 2>&1 & echo $!"],
                         check=True, capture_output=True, text=True).stdout
    return int(out.split()[-1])


def _stop_hog(pid: int) -> None:
    import signal

    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _stage_more_fidelity_texts(d: Path, version: int, texts: int) -> int:
    """Stage v<version+1>: the attack profile with `texts` fidelity texts; return its number."""
    import yaml

    doc = yaml.safe_load((d / f"v{version}.yaml").read_text())
    doc["version"] = version + 1
    doc["tasks"]["local-smollm2"]["gates"]["target_fidelity"] = {"texts": texts}
    (d / f"v{version + 1}.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return version + 1


def _verdicts(scores, name):
    g = scores.gates[scores.gates["evaluation_id"] == f"atk-{name.replace('_', '-')}"]
    return dict(zip(g["gate"], g["verdict"])), g


def _need(evaluated, name):
    if name not in evaluated["status"]:
        pytest.skip(f"{name} not selected by ARENA_ATTACK_TEST_ONLY")


@pytest.mark.parametrize("name", sorted(HONEST))
def test_honest_references_pass_every_gate(evaluated, name):
    _need(evaluated, name)
    assert evaluated["status"][name] == "measured"
    verdicts, g = _verdicts(evaluated["scores"], name)
    assert SCORED_GATES <= set(verdicts), verdicts
    failed = {k: v for k, v in verdicts.items() if v == "fail"}
    assert not failed, g.to_string()


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_attack_is_caught_by_its_gate(evaluated, name):
    _need(evaluated, name)
    assert evaluated["status"][name] == "measured"
    verdicts, g = _verdicts(evaluated["scores"], name)
    caught_by = {k for k, v in verdicts.items() if v == "fail"}
    assert caught_by & ATTACKS[name][1], f"{name} was not caught by {ATTACKS[name][1]}:\n{g.to_string()}"
    ev = evaluated["scores"].evaluations.set_index("evaluation_id").loc[f"atk-{name.replace('_', '-')}"]
    assert ev["specscore"] == 0 and not ev["void"], ev[["specscore", "specscore_reason"]].to_dict()  # 0: never blank, never void
    assert ev["specscore_reason"].startswith("gate failed: "), ev["specscore_reason"]


@pytest.mark.parametrize("name", PROBE_HOLES)
def test_probe_holes_score_zero_with_their_reason(evaluated, name):
    """Empty probe replies, prompt_logprobs on other token ids, skipped probe items: each is the
    candidate's failure (0, with the gate that saw it), where before it voided the evaluation
    (refunded), left a gate "not measured" (blank) or cost nothing."""
    _need(evaluated, name)
    verdicts, g = _verdicts(evaluated["scores"], name)
    ev = evaluated["scores"].evaluations.set_index("evaluation_id").loc[f"atk-{name.replace('_', '-')}"]
    assert evaluated["status"][name] == "measured" and not ev["void"]
    assert not any(v == "not measured" for k, v in verdicts.items() if k != "memory"), g.to_string()
    detail = dict(zip(g["gate"], g["detail"]))
    if name == "skip_probe_items":
        # one text in 11 skipped: within the answering limit, so only its worst value catches it
        assert verdicts["answering"] == "pass" and verdicts["target_fidelity"] == "fail", g.to_string()
        assert "1 unanswered by the candidate" in detail["target_fidelity"], detail["target_fidelity"]
    elif name == "garbage_logprob_ids":
        assert verdicts["answering"] == "fail" and verdicts["target_fidelity"] == "fail", g.to_string()
    else:
        assert verdicts["greedy_agreement"] == "fail", g.to_string()
        stat = g.set_index("gate").loc["greedy_agreement", "statistic"]
        assert stat == 0.0, g.to_string()  # every greedy reply empty: no agreement at all


def test_inflated_counters_change_nothing_scored(evaluated):
    """The engine doubles its accepted-token counters: the acceptance shown moves, the score does not use it."""
    _need(evaluated, "inflate_counters")
    sc = evaluated["scores"]
    ev = sc.evaluations.set_index("evaluation_id")
    infl = ev.loc["atk-inflate-counters"]
    assert infl["candidate_mean_acceptance_length"] > 1
    # SpecScore is the geometric mean of the workload ratios, which come from the arena's own
    # token counts and times; the engine's counters enter no part of it.
    import math

    ratios = [infl[f"r_{w}"] for w in ("solo", "team", "busy")]
    assert all(r > 0 for r in ratios) and infl["specscore"] > 0, infl[["specscore", "specscore_reason"]].to_dict()
    assert infl["specscore"] == pytest.approx(math.prod(ratios) ** (1 / 3))
    if "dev-ngram" in evaluated["status"]:
        # Same speculator (n-gram, 4 tokens) as dev-ngram: the doubled counters show a higher
        # acceptance than the honest engine reports.
        assert infl["candidate_draft_acceptance_rate"] > ev.loc["atk-dev-ngram"]["candidate_draft_acceptance_rate"]


def test_hog_memory_fails_the_memory_gate(built_home):
    if not Device.open().available:
        pytest.skip("hog_memory needs a GPU: the memory gate samples device memory through NVML, "
                    f"and this machine has none ({Device.open().reason})")
    from ci_profile import ATTACK_OVERRIDES, stage_ci_protocol

    d = Path(built_home["home"]) / "hog_protocol"
    stage_ci_protocol(d, **ATTACK_OVERRIDES)
    os.environ["ARENA_PROTOCOL_DIR"] = str(d)
    try:
        spec = EvaluationSpec(task_id="local-smollm2", engine=str(REPO / "engines/attacks/dev-hog-memory"),
                              evaluation_id="atk-hog-memory", label="hog_memory", target=str(built_home["target"]))
        assert Evaluation(spec, home=built_home["home"]).run() == "measured"
        from speculator_arena.scoring import score_warehouse

        sc = score_warehouse(Warehouse(built_home["home"]), evaluation_ids=["atk-hog-memory"])
        verdicts = dict(zip(sc.gates["gate"], sc.gates["verdict"]))
        assert verdicts["memory"] == "fail"
    finally:
        os.environ.pop("ARENA_PROTOCOL_DIR", None)


def test_a_contended_machine_voids_the_evaluation_instead_of_ranking_it(evaluated):
    """SCORING.md "Host contention": the A/A run beside a CPU hog is not ranked as a speed far
    from 1; the runner stops at the first contended pass and the evaluation is void."""
    _need(evaluated, "host_contended")
    assert evaluated["status"]["host_contended"] == "void"
    ev = evaluated["scores"].evaluations.set_index("evaluation_id").loc["atk-host-contended"]
    assert bool(ev["void"]) and ev["specscore"] != ev["specscore"]   # NaN: void, never a number
    assert ev["specscore_reason"].startswith("void: host contended (candidate solo-0: foreign CPU"), ev["specscore_reason"]
    rows = evaluated["contention"]["atk-host-contended"]
    share = sum(r["foreign_cpu_seconds"] for r in rows) / sum(r["ended_at"] - r["started_at"] for r in rows)
    assert share > 0.5, share      # the hog's core, seen from outside the engine
