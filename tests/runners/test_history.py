"""History per entry, the regression flag and the acceptance spread (issue 51), on three real
evaluations of one participant account (tests/runners/history_runs.py): two of n-gram, then an
honestly slower one (`engines/attacks/dev-slow-ngram`). "A participant with three submissions
sees their history and a regression flag when the third is slower beyond the interval."

Every expected number is the scorer's over the whole warehouse (`score_warehouse`, the board's
own `board_rows`), or recomputed here from the raw metrics rows."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from history_runs import ACCOUNT, LABEL, TASK, run_history_evaluations

pytestmark = [pytest.mark.slow, pytest.mark.engines]
REPO_APP = "speculator_arena/dashboards/app.py"


@pytest.fixture(scope="module")
def runs(built_home, tmp_path_factory):
    mp = pytest.MonkeyPatch()
    try:
        yield run_history_evaluations(built_home, tmp_path_factory.mktemp("history"), mp)
    finally:
        mp.undo()


@pytest.fixture(scope="module")
def whole(runs):
    """The scorer over every evaluation of the home, and the board's rows of it."""
    from speculator_arena.board.ranking import board_rows
    from speculator_arena.scoring import score_warehouse
    from speculator_arena.warehouse import Warehouse

    scores = score_warehouse(Warehouse(runs["home"]))
    return scores, board_rows(scores, TASK, "dev")


def _history(runs):
    from speculator_arena.board.history import entry_history
    from speculator_arena.board.memo import BoardMemo

    return entry_history(BoardMemo(runs["home"]), TASK, "dev", account=ACCOUNT)


def test_history_lists_three_points_and_flags_the_slower_third(runs, whole):
    scores, _ = whole
    h = _history(runs)
    rows = h.rows
    ids = runs["ids"]
    assert rows["evaluation_id"].tolist() == ids  # oldest first
    assert rows["created_at"].is_monotonic_increasing
    assert rows["regression"].tolist() == [False, False, True]
    assert rows["previous_evaluation_id"].tolist()[1:] == ids[:2] and pd.isna(rows["previous_evaluation_id"].iloc[0])
    third, second = rows.iloc[2], rows.iloc[1]
    assert third["specscore"] < second["interval_low"] == third["previous_interval_low"]
    assert second["specscore"] >= rows.iloc[0]["interval_low"]
    assert rows["engine"].tolist() == ["dev-ngram", "dev-ngram", "dev-slow-ngram"]
    assert rows["engine_digest"].iloc[0] == rows["engine_digest"].iloc[1] != rows["engine_digest"].iloc[2]
    assert (rows["run_protocol_version"] == runs["version"]).all() and h.protocol_version == runs["version"]
    assert (rows["label"] == LABEL).all()
    # the scorer's SpecScores and figures; intervals hold their score
    ev = scores.evaluations.set_index("evaluation_id").loc[ids]
    assert rows["specscore"].tolist() == pytest.approx(ev["specscore"].tolist(), rel=1e-12)
    assert ((rows["interval_low"] <= rows["specscore"]) & (rows["specscore"] <= rows["interval_high"])).all()
    acc = ev["candidate_mean_acceptance_length"].to_numpy(dtype=float)
    assert rows["mean_acceptance_length"].to_numpy(dtype=float) == pytest.approx(acc, rel=1e-12)
    assert (rows["mean_acceptance_length"] > 1).all()
    # no device memory on CPU: blank with its reason, never 0
    assert rows["memory_peak_bytes"].isna().all() and (rows["memory_peak_reason"] == "no device memory samples").all()


def test_board_row_carries_the_flag_and_its_interval(runs, whole):
    """The board's row of the account is the third evaluation, flagged from what the memo holds
    (the `evaluation` asset stored each evaluation's scores as it landed), with the interval the
    whole-warehouse ranking gives it."""
    from speculator_arena.board.memo import BoardMemo

    _, board = whole
    frames = BoardMemo(runs["home"]).board(TASK, None)
    row = frames.boards["dev"].set_index("account_id").loc[ACCOUNT]
    assert row["evaluation_id"] == runs["ids"][2]
    assert row["regression"] is True and row["previous_evaluation_id"] == runs["ids"][1]
    expected = board.set_index("evaluation_id").loc[runs["ids"][2]]
    assert row["interval_low"] == pytest.approx(expected["interval_low"], rel=1e-12)
    h = _history(runs).rows.set_index("evaluation_id").loc[runs["ids"][2]]
    assert h["interval_low"] == pytest.approx(expected["interval_low"], rel=1e-12)


def test_api_board_and_history_routes(runs):
    from fastapi.testclient import TestClient

    from speculator_arena.frontdoor.api import create_app

    with TestClient(create_app(runs["home"])) as client:
        board = client.get("/api/board", params={"task": TASK, "split": "dev"}).json()
        (ours,) = [r for r in board["participants"] if r["account_id"] == ACCOUNT]
        assert ours["evaluation_id"] == runs["ids"][2]
        assert ours["regression"] is True and ours["previous_evaluation_id"] == runs["ids"][1]
        got = client.get("/api/history", params={"task": TASK, "split": "dev", "account": ACCOUNT})
        assert got.status_code == 200, got.text
        doc = got.json()
        assert [p["evaluation_id"] for p in doc["points"]] == runs["ids"]
        assert [p["regression"] for p in doc["points"]] == [False, False, True]
        assert doc["points"][2]["previous_evaluation_id"] == runs["ids"][1]
        assert doc["points"][2]["specscore"] == pytest.approx(ours["specscore"], rel=1e-12)
        assert doc["points"][2]["interval_low"] == pytest.approx(ours["interval_low"], rel=1e-12)
        assert doc["points"][0]["memory_peak_bytes"] is None
        assert doc["acceptance_spread"]["n"] == 3 and doc["acceptance_spread"]["sd"] is not None
        assert "provenance" not in doc["points"][0] and "entry" not in doc["points"][0]
        assert client.get("/api/history", params={"task": TASK, "split": "dev"}).status_code == 422
        both = {"task": TASK, "split": "dev", "account": ACCOUNT, "label": LABEL}
        assert client.get("/api/history", params=both).status_code == 422
        assert client.get("/api/history", params={"task": "nope", "account": ACCOUNT}).status_code == 404
        empty = client.get("/api/history", params={"task": TASK, "split": "test", "account": ACCOUNT}).json()
        assert empty["points"] == [] and empty["acceptance_spread"]["sd"] is None


def _pass_lengths(home, evaluation_id: str) -> list[float]:
    """Each timed pass's 1 + accepted / drafts, from the raw metrics rows (read with pyarrow)."""
    from speculator_arena.warehouse import Warehouse

    m = Warehouse(home).read_table("metrics", evaluation_id).to_pandas()
    m = m[(m["engine"] == "candidate") & ~m["pass_id"].str.startswith("warmup")]
    out = []
    for _, p in m.groupby("pass_id"):
        side = {}
        for counter, name in (
            ("drafts", "vllm:spec_decode_num_drafts"),
            ("accepted", "vllm:spec_decode_num_accepted_tokens"),
        ):
            c = p[p["name"].isin([name, name + "_total"])]
            side[counter] = c.loc[c["phase"] == "after", "value"].sum() - c.loc[c["phase"] == "before", "value"].sum()
        if side["drafts"] > 0:
            out.append(1.0 + side["accepted"] / side["drafts"])
    return out


def test_acceptance_spread_across_passes_and_evaluations(runs):
    from speculator_arena.board.spread import evaluation_spread, with_pass_spread

    rows = with_pass_spread(runs["home"], _history(runs).rows)
    for r in rows.itertuples():
        lengths = np.array(_pass_lengths(runs["home"], r.evaluation_id))
        assert r.acceptance_passes == len(lengths) >= 2, r.acceptance_pass_reason
        assert r.acceptance_pass_sd == pytest.approx(np.std(lengths, ddof=1), rel=1e-9)
        assert (r.acceptance_pass_min, r.acceptance_pass_max) == pytest.approx((lengths.min(), lengths.max()))
        assert r.acceptance_pass_min <= r.mean_acceptance_length <= r.acceptance_pass_max
    spread = evaluation_spread(rows)
    means = rows["mean_acceptance_length"].to_numpy(dtype=float)
    assert spread["n"] == 3 and spread["sd"] == pytest.approx(np.std(means, ddof=1), rel=1e-12)
    one = evaluation_spread(rows.iloc[:1])
    assert one["sd"] is None and "needs 2" in one["reason"]


def test_evaluation_page_shows_the_history(runs, monkeypatch):
    from pathlib import Path

    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("ARENA_HOME", str(runs["home"]))
    app = Path(__file__).resolve().parents[2] / REPO_APP
    at = AppTest.from_file(str(app), default_timeout=180)
    at.query_params.update({"task": TASK, "split": "dev", "evaluation": runs["ids"][2]})
    at.run()
    at.switch_page("views/evaluation.py").run()
    assert not at.exception, [e.value for e in at.exception]
    assert "History of this entry" in [s.value for s in at.subheader]
    history = next(t.value for t in at.table if "regression" in t.value.columns)
    assert history["regression"].tolist() == ["no", "no", f"yes, below {runs['ids'][1]}"]
    assert history["evaluation"].tolist()[2] == f"{runs['ids'][2]} ◀"
    assert any("Regression:" in w.value for w in at.warning)
    assert any("Across evaluations" in c.value for c in at.caption)
    at.switch_page("views/references.py").run()
    assert not at.exception, [e.value for e in at.exception]


def test_the_history_seen_in_a_browser(runs):
    """The participant's page, served and loaded in headless Chromium: the section, the flag on the
    third evaluation (naming the one it fell below) and its SpecScore."""
    from browser_pages import page_shows

    from speculator_arena.dashboards import formatting as fmt

    third = _history(runs).rows.set_index("evaluation_id").loc[runs["ids"][2]]
    page_shows(
        runs["home"],
        f"/evaluation?task={TASK}&split=dev&evaluation={runs['ids'][2]}",
        ["History of this entry", f"yes, below {runs['ids'][1]}", fmt.score(third["specscore"])],
        "history-evaluation",
    )


def test_the_step_sleep_is_off_unless_asked_and_checked(tmp_path):
    """DEV_ENGINE_STEP_SLEEP_MS (docs/engine.md): 0 unless an engine directory sets it, and only
    engines/attacks/dev-slow-ngram does."""
    from pathlib import Path

    from speculator_arena.engine.config import ConfigError, EngineConfig

    env = {"TARGET": str(tmp_path), "PORT": "1", "MAX_MODEL_LEN": "2048"}
    assert EngineConfig.from_env(env).step_sleep_ms == 0.0
    assert EngineConfig.from_env({**env, "DEV_ENGINE_STEP_SLEEP_MS": "200"}).step_sleep_ms == 200.0
    for bad in ("-1", "20000", "nan", "slow"):
        with pytest.raises(ConfigError, match="DEV_ENGINE_STEP_SLEEP_MS"):
            EngineConfig.from_env({**env, "DEV_ENGINE_STEP_SLEEP_MS": bad})
    engines = Path(__file__).resolve().parents[2] / "engines"
    setting = sorted(p.parent.name for p in engines.rglob("launch.sh") if "DEV_ENGINE_STEP_SLEEP_MS" in p.read_text())
    assert setting == ["dev-slow-ngram"]
