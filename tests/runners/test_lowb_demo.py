"""LowBArena end to end on the embedded default: `arena demo --task lowb-smollm2` as a user runs it
(tests/lowb_fixtures.py), then everything that reads its warehouse: the board it printed, the gates
that must catch the lossy reference, an independent recomputation of every figure from the raw
rows, a re-score under a changed rule, the analysts' file, the API and the speculator arena's
scorer, which must not see these evaluations."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scoring"))
import independent_lowb  # noqa: E402

FIGURES = ["T", "P", "A", "g", "lowbscore", "s_serve", "s_interactive", "s_long", "delta_l", "c_serve", "c_long"]
FIGURES += ["c_serve_bf16", "c_long_bf16", "drop", "kl", "D", "perplexity_ratio", "device_seconds"]


def _scores(demo, version=None, protocol_dir=None):
    """The demo's warehouse scored under its staged version (or `version` staged in `protocol_dir`)."""
    from speculator_arena.scoring.lowb import score_lowb
    from speculator_arena.warehouse import Warehouse

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ARENA_PROTOCOL_DIR", str(protocol_dir or demo.protocol_dir))
        return score_lowb(Warehouse(demo.home), version=version or demo.version)


def _by_label(demo, version=None, protocol_dir=None):
    ev = _scores(demo, version, protocol_dir).evaluations
    return {r["label"]: r for r in ev.to_dict(orient="records")}


def test_demo_measures_every_reference_and_prints_the_board(lowb_demo):
    assert lowb_demo.rc == 0, lowb_demo.stderr[-3000:]
    out = lowb_demo.stdout
    assert "LowBArena board: lowb-smollm2 (dev)" in out
    assert "lacking: commonsense, knowledge, math" in out  # the board says which gated domains it lacks
    for ref in lowb_demo.references:
        assert f"{ref}: LowBScore" in out, out
    assert out.count("    T: serve") == len(lowb_demo.references)  # each reference's figures under its axes
    rows = _by_label(lowb_demo)
    assert sorted(rows) == sorted(lowb_demo.references)


def test_bf16_beside_itself_keeps_every_axis_near_one(lowb_demo):
    """The A/A: the same checkpoint served twice. What must be exact is exact (KL 0, the same
    answers and lengths, every gate but speed passed); speed and capacity are measurements: in CI
    only sane (CI's machine is not the one the noise was calibrated on), with the full profile
    within the task's calibrated A/A noise (protocol data `aa_noise`), as the board's A/A line says."""
    from ci_profile import full_profile

    from speculator_arena.protocol.lowb import load_lowb_protocol

    aa = _by_label(lowb_demo)["bf16"]
    gates = _scores(lowb_demo).gates
    gates = gates[(gates["evaluation_id"] == aa["evaluation_id"]) & gates["gate"].isin(["contract", "engine_rules"])]
    assert aa["kl"] == 0.0 and aa["perplexity_ratio"] == 1.0  # the same weights score every prompt alike
    # sampled answers served four at once are not bit-identical between two starts (a fresh CI run:
    # generated length +2.2%), so lengths and scores are measurements too, within the length gate
    assert abs(aa["delta_l"]) <= 0.10, aa
    assert set(gates["verdict"]) == {"pass"}, gates
    assert abs(aa["speed_gmean"] - 1) < 0.5 and abs(aa["P"] - 1) < 0.5, aa
    if full_profile():
        noise = load_lowb_protocol(lowb_demo.version).task("lowb-smollm2").aa_noise
        assert abs(aa["lowbscore"] - 1) <= noise.max_abs_error, aa
        assert "within the calibrated A/A noise" in lowb_demo.stdout


def test_the_lossy_reference_is_caught(lowb_demo):
    """2-bit weights move the model's distribution far beyond the contract's 0.15 nats: score 0."""
    lossy = _by_label(lowb_demo)["rtn-w2-g64-lossy"]
    assert lossy["kl"] > 0.15
    assert lossy["reason"] == "contract" and lossy["lowbscore"] == 0.0


def test_an_independent_recomputation_agrees(lowb_demo, monkeypatch):
    mine = _scores(lowb_demo).evaluations.set_index("evaluation_id")
    monkeypatch.setenv("ARENA_PROTOCOL_DIR", str(lowb_demo.protocol_dir))  # where it reads the version too
    theirs = independent_lowb.recompute(lowb_demo.home, lowb_demo.version)
    assert sorted(mine.index) == sorted(theirs) and len(theirs) == len(lowb_demo.references)
    for eid, fig in theirs.items():
        for col in FIGURES:
            a, b = float(mine.loc[eid, col]), float(fig[col])
            assert (math.isnan(a) and math.isnan(b)) or abs(a - b) <= 1e-9 * max(1.0, abs(b)), (eid, col, a, b)
        reason = mine.loc[eid, "reason"]
        assert (reason if isinstance(reason, str) and reason else None) == fig["reason"]


def test_a_rule_change_rescores_lowbarena_alone(lowb_demo, tmp_path):
    """A staged version that weighs T more re-scores the stored evaluations from their stored rows
    (BF16's A/A moves with its measured T; the lossy one stays 0); the speculator arena's scorer
    never reads these evaluations."""
    from speculator_arena.scoring import score_warehouse
    from speculator_arena.warehouse import Warehouse

    doc = yaml.safe_load((lowb_demo.protocol_dir / f"lowb-p{lowb_demo.version}.yaml").read_text())
    doc["version"] = lowb_demo.version + 1
    doc["score"]["axis_exponents"]["T"] = 0.5
    staged = tmp_path / "protocol"
    staged.mkdir()
    for f in lowb_demo.protocol_dir.iterdir():
        (staged / f.name).write_text(f.read_text())
    (staged / f"lowb-p{doc['version']}.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    before, after = _by_label(lowb_demo), _by_label(lowb_demo, doc["version"], staged)
    aa, aa2 = before["bf16"], after["bf16"]
    assert aa2["T"] == aa["T"] and aa2["P"] == aa["P"] and aa2["A"] == aa["A"]  # the same stored measurements
    want = aa["g"] * aa["T"] ** 0.5 * aa["P"] ** (1 / 3) * aa["A"] ** (1 / 3)
    assert aa2["lowbscore"] == pytest.approx(want, rel=1e-12)
    assert aa["T"] == 1.0 or aa2["lowbscore"] != aa["lowbscore"]
    assert after["rtn-w2-g64-lossy"]["lowbscore"] == before["rtn-w2-g64-lossy"]["lowbscore"] == 0.0
    assert score_warehouse(Warehouse(lowb_demo.home)).evaluations.empty


def test_analysts_file_and_api(lowb_demo, monkeypatch):
    import duckdb
    from fastapi.testclient import TestClient

    from speculator_arena.frontdoor.api import create_app

    con = duckdb.connect(str(lowb_demo.home / "arena.duckdb"), read_only=True)
    try:
        n = con.execute("SELECT count(*) FROM raw_lowb_logprobs WHERE token_id IS NOT NULL").fetchone()[0]
        items = con.execute("SELECT count(*), count(DISTINCT item_id) FROM raw_lowb_items").fetchone()
    finally:
        con.close()
    assert n > 0 and items[0] > 0 and items[1] > 0  # dev evaluations keep their token ids
    monkeypatch.setenv("ARENA_PROTOCOL_DIR", str(lowb_demo.protocol_dir))
    client = TestClient(create_app(lowb_demo.home))
    proto = client.get("/api/protocol", params={"arena": "lowbarena", "version": 28}).json()
    assert proto["accuracy"]["drop_weight"] == 0.79 and proto["gates"]["contract"]["max_kl_nats_per_token"] == 0.15
    board = client.get("/api/board", params={"task": "lowb-smollm2", "split": "dev"})
    assert board.status_code == 200, board.text
    rows = {r["label"]: r for r in board.json()["rows"]}
    assert rows["rtn-w2-g64-lossy"]["reason"] == "contract" and rows["bf16"]["section"] == "references"


@pytest.fixture(scope="module")
def calibrated(lowb_demo, tmp_path_factory) -> dict:
    """`arena calibrate --task lowb-smollm2 --aa 2` in a copy of the demo's home (the demo's A/A
    counts, one more is made), then `arena protocol publish` of the candidate version it wrote."""
    import os
    import shutil
    import subprocess

    home = tmp_path_factory.mktemp("lowb_calibration") / "home"
    shutil.copytree(lowb_demo.home, home, symlinks=True)
    env = dict(os.environ, ARENA_HOME=str(home), ARENA_PROTOCOL_DIR=str(lowb_demo.protocol_dir))
    arena = str(Path(sys.executable).parent / "arena")
    cal = subprocess.run(
        [arena, "calibrate", "--task", "lowb-smollm2", "--aa", "2"], env=env, capture_output=True, text=True
    )
    version = lowb_demo.version + 1
    pub = [arena, "protocol", "publish", "--task", "lowb-smollm2", "--candidate", str(version)]
    published = subprocess.run(pub, env=env, capture_output=True, text=True) if cal.returncode == 0 else None
    return {"home": home, "env": env, "calibrate": cal, "publish": pub, "published": published, "version": version}


def test_calibration_sets_the_aa_noise_from_bf16_beside_itself(lowb_demo, calibrated):
    """The candidate's `aa_noise` is the two A/A runs' largest deviations widened by a quarter;
    `arena protocol publish` puts it in force unchanged."""
    from speculator_arena.protocol.lowb import load_lowb_protocol
    from speculator_arena.scoring.lowb import score_lowb
    from speculator_arena.warehouse import Warehouse

    cal, published = calibrated["calibrate"], calibrated["published"]
    assert cal.returncode == 0, cal.stdout[-2000:] + cal.stderr[-2000:]
    assert "1 A/A run(s) already measured" in cal.stdout
    assert published.returncode == 0, published.stderr[-2000:]
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ARENA_HOME", str(calibrated["home"]))
        mp.setenv("ARENA_PROTOCOL_DIR", str(lowb_demo.protocol_dir))
        noise = load_lowb_protocol(calibrated["version"]).task("lowb-smollm2").aa_noise
        ev = score_lowb(Warehouse(calibrated["home"]), version=lowb_demo.version).evaluations
    aa = ev[ev["label"] == "bf16"]
    assert len(aa) == 2 and noise.runs == 2
    assert noise.max_abs_error == pytest.approx(round(1.25 * (aa["lowbscore"] - 1).abs().max(), 3), abs=1e-12)
    assert noise.speed_max_abs_error == pytest.approx(round(1.25 * (aa["speed_gmean"] - 1).abs().max(), 3), abs=1e-12)


def test_a_published_calibration_is_never_replaced(calibrated):
    import subprocess

    assert calibrated["published"] is not None and calibrated["published"].returncode == 0
    again = subprocess.run(calibrated["publish"], env=calibrated["env"], capture_output=True, text=True)
    assert again.returncode != 0 and "never replaced" in again.stderr  # versions are immutable
