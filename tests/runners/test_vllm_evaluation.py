"""A paired evaluation of the embedded task served by the real vLLM (`local-smollm2-vllm`, protocol
v6 on): engines/vllm-cpu-ngram against engines/vllm-cpu-stock through `arena evaluate` (the one
door: Dagster's `evaluation` asset, the local backend, the harness), under the task's shipped
values with a short clock (mirrored pairing, two passes of 4 s per workload, few probes).

Checked: measured; the engines started candidate, stock, stock, candidate for the timed passes,
then once each for the probes, each stopped by SIGTERM; every gate but memory measured and
passing; vLLM's spec-decode counters moving under n-gram (acceptance shown); both engines' cache
hits from `usage.prompt_tokens_details` (the launchers' `--enable-prompt-tokens-details`); and
every speed, ratio, gate and the SpecScore recomputed from the raw rows by
tests/scoring/independent.py equal to the scorer's.

Marked `full`: six vLLM starts of about 30 s each, about 5 minutes on 2 cores (the shipped runs
and their figures: docs/benchmarks/vllm_cpu.md). Skipped where vLLM's CPU build is absent.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from ci_profile import CI_OVERRIDES, MIRRORED_STARTS, stage_ci_protocol

from speculator_arena import settings
from speculator_arena.cli import main
from speculator_arena.warehouse import Warehouse
from speculator_arena.warehouse.evaluations import current_row

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scoring"))
import independent  # noqa: E402
from test_independent_recompute import both, disagreements  # noqa: E402

pytestmark = pytest.mark.full
TASK = "local-smollm2-vllm"
EID = "vllm-ngram-short"
SHORT = {"passes_per_workload": 2, "pairing": "mirrored", "workloads": CI_OVERRIDES["workloads"]}  # 4-s passes


@pytest.fixture(scope="module")
def vllm_run(built_home, tmp_path_factory):
    venv = Path(settings.get("ARENA_VLLM_VENV"))
    if not (venv / "bin" / "vllm").exists():
        pytest.skip(f"no vLLM CPU build at {venv} (scripts/setup_vllm_cpu.sh; ARENA_VLLM_VENV)")
    d = tmp_path_factory.mktemp("vllm_protocol")
    home = built_home["home"]
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ARENA_PROTOCOL_DIR", str(d))
        version = stage_ci_protocol(d, TASK, warmup_waves=1, **SHORT)
        rc = main(
            [
                "evaluate",
                "--task",
                TASK,
                "--engine",
                "engines/vllm-cpu-ngram",
                "--kind",
                "ngram",
                "--evaluation-id",
                EID,
                "--home",
                str(home),
                "--target",
                str(built_home["target"]),
            ]
        )
        tokenizer = independent.load_tokenizer(built_home["target"])
        ind, scores = both(home, EID, tokenizer)
        yield {"rc": rc, "home": home, "version": version, "ind": ind, "scores": scores}


def test_vllm_ngram_against_vllm_stock_is_measured_in_the_mirrored_order(vllm_run):
    wh = Warehouse(vllm_run["home"])
    row = current_row(wh, EID)
    assert vllm_run["rc"] == 0 and row["status"] == "measured", (row["void_reason"], row["failure_reason"])
    assert row["protocol_version"] == vllm_run["version"] and row["task_id"] == TASK
    starts = sorted(wh.read_table("engine_starts", EID).to_pylist(), key=lambda s: s["started_at"])
    assert [(s["engine"], s["purpose"]) for s in starts] == MIRRORED_STARTS
    assert all(s["stop_signal"] == "SIGTERM" and not s["died"] for s in starts)


def test_every_gate_passes_and_the_counters_and_cache_hits_are_shown(vllm_run):
    scores = vllm_run["scores"]
    verdicts = dict(zip(scores.gates["gate"], scores.gates["verdict"]))
    assert verdicts.pop("memory") == "not measured"  # no GPU
    assert set(verdicts.values()) == {"pass"}, scores.gates.to_string()
    ev = scores.evaluations.iloc[0]
    assert ev["specscore"] > 0 and ev["gates_pass"], ev["specscore_reason"]
    f = scores.figures.set_index(["engine", "workload", "figure"])["value"]
    assert f[("candidate", "all", "mean_acceptance_length")] > 1  # vllm:spec_decode_* moved
    for engine in ("candidate", "stock"):
        assert 0 < f[(engine, "all", "cache_hit_tokens")] < 1, engine  # cached_tokens on returning turns


def test_the_scorer_agrees_with_scoring_md_recomputed_from_the_raw_rows(vllm_run):
    ind, scores = vllm_run["ind"], vllm_run["scores"]
    assert ind.findings == [] and ind.outcome == "score", (ind.findings, ind.reasons)
    assert len(ind.passes) == 3 * SHORT["passes_per_workload"]
    assert disagreements(ind, scores) == []
