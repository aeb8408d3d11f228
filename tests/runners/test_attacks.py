"""Section 9 for real: every attack mode of the development engine is caught by the gate the
protocol names, and the honest references pass every gate. Real engines serving the real
small model, the real pools, the real scorer; short passes (the CI attack profile).

Marked slow: paired evaluations of the real model. The verdicts are the point, so the assertions
are on the gates' verdicts. CI makes the runs of attack_runs.CI_RUNS (what its 40 minutes hold);
ARENA_TEST_PROFILE=full makes every run, and the tests of the others say so when they skip. Only
hog_memory needs a GPU (section 7's memory gate has nothing to sample on a CPU) and is skipped
there with that reason.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from attack_runs import ATTACKS, CI_RUNS, HONEST, PROBE_HOLES, SCORED_GATES  # tests/runners is on sys.path (conftest)

from speculator_arena.runners.harness import Evaluation
from speculator_arena.runners.memory import Device
from speculator_arena.runners.spec import REPO, EvaluationSpec
from speculator_arena.warehouse import Warehouse

pytestmark = pytest.mark.slow


def _verdicts(scores, name):
    g = scores.gates[scores.gates["evaluation_id"] == f"atk-{name.replace('_', '-')}"]
    return dict(zip(g["gate"], g["verdict"])), g


def _need(evaluated, name):
    if name not in evaluated["status"]:
        pytest.skip(
            f"{name} is not among this session's runs: a full run (ARENA_TEST_PROFILE=full) makes it, CI makes "
            f"{', '.join(CI_RUNS)} (tests/runners/attack_runs.py says why)"
            + (", and ARENA_ATTACK_TEST_ONLY chose others" if os.environ.get("ARENA_ATTACK_TEST_ONLY") else "")
        )


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
    assert ev["specscore"] == 0 and not ev["void"], ev[
        ["specscore", "specscore_reason"]
    ].to_dict()  # 0: never blank, never void
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
        pytest.skip(
            "hog_memory needs a GPU: the memory gate samples device memory through NVML, "
            f"and this machine has none ({Device.open().reason})"
        )
    from ci_profile import ATTACK_OVERRIDES, stage_ci_protocol

    d = Path(built_home["home"]) / "hog_protocol"
    stage_ci_protocol(d, **ATTACK_OVERRIDES)
    os.environ["ARENA_PROTOCOL_DIR"] = str(d)
    try:
        spec = EvaluationSpec(
            task_id="local-smollm2",
            engine=str(REPO / "engines/attacks/dev-hog-memory"),
            evaluation_id="atk-hog-memory",
            label="hog_memory",
            target=str(built_home["target"]),
        )
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
    assert bool(ev["void"]) and ev["specscore"] != ev["specscore"]  # NaN: void, never a number
    assert ev["specscore_reason"].startswith("void: host contended (candidate solo-0: foreign CPU"), ev[
        "specscore_reason"
    ]
    rows = evaluated["contention"]["atk-host-contended"]
    share = sum(r["foreign_cpu_seconds"] for r in rows) / sum(r["ended_at"] - r["started_at"] for r in rows)
    assert share > 0.5, share  # the hog's core, seen from outside the engine
