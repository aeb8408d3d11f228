"""A new protocol version re-scores stored evaluations without a run; used versions are immutable."""

import json

import pandas as pd
import pytest
import yaml
from synthetic import write_synthetic_evaluation

from speculator_arena.cli import main
from speculator_arena.protocol import load_protocol
from speculator_arena.protocol.version_files import _versions_dirs
from speculator_arena.scoring import score_warehouse
from speculator_arena.scoring.registry import ProtocolChangedError, score_and_record, scores_dir
from speculator_arena.warehouse import Warehouse

SHIPPED = load_protocol().version  # the latest shipped version
NEXT = SHIPPED + 1


def stage_next(dirpath, likelihood_bound):
    """Stage v<NEXT>: the latest shipped version with another likelihood bound on the local task."""
    doc = yaml.safe_load((_versions_dirs()[0] / f"v{SHIPPED}.yaml").read_text())
    doc["version"] = NEXT
    doc["tasks"]["local-smollm2"]["limits"]["likelihood_bound"] = likelihood_bound
    dirpath.mkdir(exist_ok=True)
    (dirpath / f"v{NEXT}.yaml").write_text(yaml.safe_dump(doc))


def test_changed_limit_flips_gate_under_new_version_old_unchanged(arena_home, tmp_path, monkeypatch):
    wh = Warehouse(arena_home)
    write_synthetic_evaluation(wh, "l", attack="likelihood")
    v1 = score_and_record(wh, SHIPPED)
    e1 = v1.evaluations.set_index("evaluation_id").loc["l"]
    assert e1.specscore == 0.0 and e1.failed_gates == "sampled_likelihood"

    staged = tmp_path / "staged"
    stage_next(staged, likelihood_bound=1.0)
    monkeypatch.setenv("ARENA_PROTOCOL_DIR", str(staged))
    assert load_protocol(NEXT).task("local-smollm2").limits.likelihood_bound == 1.0
    v2 = score_and_record(wh, NEXT)
    e2 = v2.evaluations.set_index("evaluation_id").loc["l"]
    g2 = v2.gates[(v2.gates.evaluation_id == "l") & (v2.gates.gate == "sampled_likelihood")].iloc[0]
    assert g2.verdict == "pass" and g2.limit == 1.0
    assert e2.specscore > 1 and e2.protocol_version == NEXT and e2.run_protocol_version == SHIPPED

    again = score_warehouse(wh, SHIPPED)
    for name in ("evaluations", "passes", "gates", "figures"):
        pd.testing.assert_frame_equal(getattr(again, name), getattr(v1, name))
    stored = pd.read_parquet(scores_dir(wh, SHIPPED) / "evaluations.parquet")
    assert stored.set_index("evaluation_id").loc["l", "specscore"] == 0.0


def test_a_used_version_cannot_change(arena_home, tmp_path, monkeypatch, capsys):
    wh = Warehouse(arena_home)
    write_synthetic_evaluation(wh, "e")
    staged = tmp_path / "staged"
    stage_next(staged, likelihood_bound=0.05)
    monkeypatch.setenv("ARENA_PROTOCOL_DIR", str(staged))
    score_and_record(wh, NEXT)
    pin = json.loads((scores_dir(wh, NEXT) / "protocol.json").read_text())
    stage_next(staged, likelihood_bound=0.5)  # edit the staged version after it was used
    with pytest.raises(ProtocolChangedError, match="immutable"):
        score_and_record(wh, NEXT)
    assert json.loads((scores_dir(wh, NEXT) / "protocol.json").read_text()) == pin
    assert main(["score", "--protocol", str(NEXT)]) == 2
    assert "immutable" in capsys.readouterr().err
    assert main(["score", "--protocol", "1"]) == 0  # other versions are unaffected


def test_arena_score_command_json_and_the_board_pointer(arena_home, capsys):
    wh = Warehouse(arena_home)
    write_synthetic_evaluation(wh, "e1", split="test", label="fast", account_id="A")
    write_synthetic_evaluation(wh, "e2", split="test", label="partial", account_id="B", attack="partial")
    assert main(["score", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    by = {e["evaluation_id"]: e for e in out["evaluations"]}
    assert by["e1"]["specscore"] > 1 and by["e2"]["specscore"] is None
    assert "running" in by["e2"]["specscore_reason"]
    # the board as text is one command's: `arena score --board` says where, and prints no board
    assert main(["score", "--board", "--split", "test"]) == 2
    said = capsys.readouterr()
    assert "`arena board --text --split test`" in said.err and "==" not in said.out
    assert main(["board", "--text", "--split", "test"]) == 0
    text = capsys.readouterr().out
    assert "== local-smollm2 (test) ==" in text and "fast" in text
    assert main(["score"]) == 0
    assert f"scored 2 evaluations under protocol v{SHIPPED}" in capsys.readouterr().out


def test_each_version_scores_the_passes_the_run_made(arena_home):
    """v3 runs three passes per workload on the embedded task, v4 on two: re-scored under the other
    version, each evaluation keeps every pass it ran (none dropped, none waited for), and its
    SpecScore is the same number under both (v3's and v5's rules differ in limits only, which an
    honest synthetic run passes under both)."""
    wh = Warehouse(arena_home)
    speedups = {"solo": 1.6, "team": 1.3, "busy": 1.1}
    write_synthetic_evaluation(wh, "ran-v3", protocol_version=3, speedups=speedups, seed=3)
    write_synthetic_evaluation(wh, "ran-v4", protocol_version=4, speedups=speedups, seed=4)
    runs = {"ran-v3": 3, "ran-v4": 2}
    assert [load_protocol(v).task("local-smollm2").passes_per_workload for v in (3, 4)] == [3, 2]
    by_version = {}
    for version in (3, 5):
        s = score_warehouse(wh, version)
        for eid, n in runs.items():
            passes = s.passes[s.passes.evaluation_id == eid]
            assert sorted(passes.pass_id) == sorted(f"{w}-{i}" for w in ("solo", "team", "busy") for i in range(n))
            assert passes.ratio.notna().all(), (version, eid)
        by_version[version] = s.evaluations.set_index("evaluation_id").specscore
    for eid in runs:
        assert by_version[3][eid] == pytest.approx(by_version[5][eid]) and by_version[3][eid] > 1
