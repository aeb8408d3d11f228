"""LowBArena's planted attacks, each a real evaluation of the embedded task beside BF16, under a
staged version with short workloads (every limit the shipped one): what a candidate could gain by
queueing, not answering the KL probe, relabelling BF16, padding its checkpoint, or shortening or
lengthening its answers, it does not gain.

CI runs the three whose rule is only visible end to end (capacity from what the client saw, the
probe's answers, the checkpoint's headers); ARENA_TEST_PROFILE=full runs the others too. The
scorer's treatment of each is also tested on planted rows (tests/scoring/test_lowb_scoring.py).
"""

from __future__ import annotations

import pytest
from ci_profile import stage_lowb_ci_protocol

KEY = b"lowb-attacks-test-key"
SHORT = {
    "workloads": {
        "serve": {"requests": 2, "prompt_tokens": 128, "generated_tokens": 8, "at_once": 2, "passes": 1},
        "interactive": {"requests": 1, "prompt_tokens": 64, "generated_tokens": 8, "at_once": 1, "passes": 1},
        "long": {"requests": 2, "prompt_tokens": 256, "generated_tokens": 8, "at_once": 2, "passes": 1},
    },
    "items": {"max_tokens": 24, "per_domain": {"dev": 1, "test": 1}, "ruler_context_tokens": 1536},
    "kl_probe": {"prompts": {"dev": 4, "test": 4}, "max_prompt_tokens": 128},
}


@pytest.fixture(scope="module")
def lowb_attack(tmp_path_factory, smollm2_target):
    """run(engine, artifact=None, label) -> that evaluation's scored row, in one home per module."""
    root = tmp_path_factory.mktemp("lowb_attacks")
    mp = pytest.MonkeyPatch()
    mp.setenv("ARENA_PROTOCOL_DIR", str(root / "protocol"))
    home = root / "home"
    mp.setenv("ARENA_HOME", str(home))
    stage_lowb_ci_protocol(root / "protocol", **SHORT)
    from speculator_arena.checkpoints import prepare_checkpoint
    from speculator_arena.dagster_project import launch
    from speculator_arena.pools.lowb.build import build_items
    from speculator_arena.runners.spec import EvaluationSpec
    from speculator_arena.scoring.lowb import score_lowb
    from speculator_arena.warehouse import Warehouse

    target = prepare_checkpoint("lowb-smollm2", home=home)
    build_items("lowb-smollm2", home, key=KEY)  # with the operators' key: the hidden split too

    def run(engine: str, artifact=None, label: str = "attack", split: str = "dev") -> dict:
        spec = EvaluationSpec(
            task_id="lowb-smollm2", engine=engine, label=label, target=str(target), artifact=artifact, split=split
        )
        s = launch.evaluate(spec, home, rerun_contended=2, analysts=False)
        assert s.status == "measured", (s.status, s.why)
        scores = score_lowb(Warehouse(home), evaluation_ids=[s.evaluation_id])
        missed = set(scores.gates[scores.gates["verdict"] == "missed"]["gate"])
        return scores.evaluations.iloc[0].to_dict() | {"home": home, "missed": missed}

    run.home = home
    yield run
    mp.undo()


def _most_running(home, eid, engine, workload) -> int:
    from speculator_arena.warehouse import Warehouse

    req = Warehouse(home).read_table("lowb_requests", eid).to_pandas()
    req = req[(req.engine == engine) & (req.workload == workload) & req.ok]
    events = sorted(
        [(t, 1) for t in req.first_token_at] + [(t, -1) for t in req.finished_at], key=lambda e: (e[0], e[1])
    )
    most = now = 0
    for _, d in events:
        now += d
        most = max(most, now)
    return most


def test_queueing_requests_earns_no_capacity(lowb_attack):
    """The queueing engine runs one request at a time however many are in flight: its KV per request
    is its memory over the one it runs, so its capacity is what it holds, not double."""
    row = lowb_attack("engines/attacks/lowb-queue", label="queue")
    eid = row["evaluation_id"]
    assert _most_running(lowb_attack.home, eid, "candidate", "serve") == 1
    assert _most_running(lowb_attack.home, eid, "stock", "serve") == 2
    assert row["P"] < 1.5, row  # no capacity earned (an A/A's P is 1 within noise); counting the 2 in
    # flight as running would have halved its KV per request and doubled its capacity


def test_not_answering_prompt_logprobs_scores_zero(lowb_attack):
    """Without the probe's answers there is no KL either: the contract's KL check and the engine
    rules both miss, and either scores 0 (the contract comes first in the rules' order)."""
    row = lowb_attack("engines/attacks/lowb-no-prompt-logprobs", label="no-prompt-logprobs")
    assert "engine_rules" in row["missed"] and row["lowbscore"] == 0.0


def test_bf16_relabelled_as_int4_scores_zero(lowb_attack):
    from speculator_arena.checkpoints.quantize import make_planted_checkpoint

    ckpt = make_planted_checkpoint("lowb-smollm2", "relabelled-bf16", lowb_attack.home)
    row = lowb_attack("engines/dev-lowb-stock", artifact=str(ckpt), label="relabelled")
    assert row["reason"] == "contract" and row["lowbscore"] == 0.0
    assert "relabelled" in row["reason_detail"] or "16" in row["reason_detail"], row["reason_detail"]


@pytest.mark.full
def test_padding_the_checkpoint_scores_zero(lowb_attack):
    from speculator_arena.checkpoints.quantize import make_planted_checkpoint

    ckpt = make_planted_checkpoint("lowb-smollm2", "extra-tensors", lowb_attack.home)
    row = lowb_attack("engines/dev-lowb-stock", artifact=str(ckpt), label="extra-tensors")
    assert row["reason"] == "contract" and row["lowbscore"] == 0.0


@pytest.mark.full
def test_shorter_answers_miss_the_length_gate_and_earn_nothing(lowb_attack):
    row = lowb_attack("engines/attacks/lowb-short", label="short")
    assert row["delta_l"] < -0.10 and row["reason"] in ("length", "accuracy", "speed")
    assert row["g"] == pytest.approx(0.1)


@pytest.mark.full
def test_longer_answers_divide_t_and_miss_the_length_gate(lowb_attack):
    row = lowb_attack("engines/attacks/lowb-long", label="long")
    assert row["delta_l"] > 0.10 and row["g"] == pytest.approx(0.1)
    gmean = (row["s_serve"] * row["s_interactive"] * row["s_long"]) ** (1 / 3)
    assert row["T"] == pytest.approx(gmean / (1 + row["delta_l"]), rel=1e-9)


def test_a_scored_evaluation_pools_two_seeded_runs_of_hidden_items(lowb_attack):
    """On the test split both engines answer the hidden items twice, each run with seeds of its own
    and the same seeds for both engines; the board of the split shows it and no hidden text."""
    import json

    from speculator_arena.board.lowb import lowb_board_json
    from speculator_arena.pools.lowb import api
    from speculator_arena.warehouse import Warehouse

    home = lowb_attack.home
    row = lowb_attack("engines/dev-lowb-stock", label="bf16-test", split="test")
    eid = row["evaluation_id"]
    items = Warehouse(home).read_table("lowb_items", eid).to_pandas()
    hidden = api.load_items("lowb-smollm2", "test", home)
    public = api.load_items("lowb-smollm2", "dev", home)
    assert set(items["item_id"]) == {i.item_id for i in hidden}
    assert not set(items["item_id"]) & {i.item_id for i in public}
    for engine in ("candidate", "stock"):
        mine = items[items["engine"] == engine]
        assert sorted(mine["run_index"].unique()) == [0, 1]
        assert (mine.groupby("item_id")["seed"].nunique() == 2).all()  # each run its own seeds
    paired = items.pivot_table(index=["item_id", "run_index"], columns="engine", values="seed")
    assert (paired["candidate"] == paired["stock"]).all()  # the same seeds for both engines
    assert row["drop"] == 0.0 and row["kl"] == 0.0  # BF16 beside itself: the same answers, twice
    board = json.dumps(lowb_board_json(home, "lowb-smollm2", "test"), default=str)
    assert eid in board
    for item in hidden:
        for m in item.messages:
            assert m["content"][:200] not in board
