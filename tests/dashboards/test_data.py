"""The board's data layer without Streamlit: scoped reads, what it scores, diffs, the data card."""

from __future__ import annotations

import math
import time

import pandas as pd
import pytest
import yaml

from speculator_arena.board import data
from speculator_arena.board.memo import BoardMemo
from speculator_arena.board.protocol_diff import flatten, protocol_diff
from speculator_arena.dashboards import formatting as fmt
from speculator_arena.pools.builder.datacard import load_data_card
from speculator_arena.protocol import load_protocol
from speculator_arena.warehouse import Warehouse, catalog

from .conftest import TASK, scores_of_whole_warehouse


def _snapshot(home):
    return sorted((p.relative_to(home).as_posix(), p.stat().st_mtime_ns) for p in home.rglob("*"))


def test_scoped_scores_equal_the_whole_warehouse_and_touch_nothing(synthetic_home):
    # the scorer's own answer first: a whole-warehouse scoring may write its request store (the
    # board's scoped reads must not, whatever ran before them)
    whole = scores_of_whole_warehouse(synthetic_home)
    before = _snapshot(synthetic_home)
    ids = ["ev-alpha", "ev-longer", "ev-partial"]
    scoped = data.evaluation_scores(synthetic_home, "ev-alpha")
    frames, _ = data.score_frames(synthetic_home, ids, None)
    w = whole.evaluations.set_index("evaluation_id")
    s = frames.evaluations.set_index("evaluation_id")
    assert sorted(s.index) == sorted(ids)
    for eid in ids:
        for col in ("specscore", "r_solo", "r_team", "r_busy"):
            a, b = s.at[eid, col], w.at[eid, col]
            assert (pd.isna(a) and pd.isna(b)) or math.isclose(a, b, rel_tol=1e-12), (eid, col, a, b)
        assert s.at[eid, "specscore_reason"] == w.at[eid, "specscore_reason"] or (
            pd.isna(s.at[eid, "specscore_reason"]) and pd.isna(w.at[eid, "specscore_reason"])
        )
    assert list(scoped.evaluations["evaluation_id"]) == ["ev-alpha"]
    assert set(scoped.gates["evaluation_id"]) == {"ev-alpha"}
    # the page's own scoring carries the account's gap flag, as the board's does
    assert bool(scoped.evaluations["gap_flag"].iloc[0]) == bool(w.at["ev-alpha", "gap_flag"])
    assert _snapshot(synthetic_home) == before  # read-only: no arena.duckdb, no new file, no mtime changed


def test_scoped_warehouse_links_only_the_chosen_partitions(synthetic_home):
    before = {p: p.stat().st_mtime_ns for p in synthetic_home.rglob("*")}
    with data.scoped_warehouse(synthetic_home, ["ev-beta", "ev-alpha"]) as wh:
        parts = {p.name for p in (wh.raw / "requests").iterdir()}
        assert parts == {"evaluation_id=ev-beta", "evaluation_id=ev-alpha"}
        root = wh.home
        assert Warehouse(root).read_table("evaluations").column("evaluation_id").to_pylist() == ["ev-alpha", "ev-beta"]
        con = wh.connect(read_only=True)
        n = con.execute("SELECT count(*) FROM raw_requests WHERE evaluation_id = 'ev-beta'").fetchone()[0]
        assert n == Warehouse(synthetic_home).read_table("requests", "ev-beta").num_rows > 0
        assert {r[0] for r in con.execute("SELECT DISTINCT evaluation_id FROM raw_passes").fetchall()} == {
            "ev-beta",
            "ev-alpha",
        }
        con.close()
    assert not root.exists()
    assert {p: p.stat().st_mtime_ns for p in synthetic_home.rglob("*")} == before  # nothing written


def test_board_candidates_are_each_accounts_last_finished_evaluation(synthetic_home):
    idx = data.evaluations_index(synthetic_home)
    assert len(idx) == 9 and idx["created_at"].is_monotonic_decreasing
    ids = data.board_candidates(idx, TASK)
    assert "ev-alpha" in ids and "ev-alpha-old" not in ids  # older dev evaluation of the same account
    assert "ev-alpha-test" in ids  # the other split, for the gap flag
    assert "ev-partial" not in ids and "ev-void" not in ids  # running, and refunded
    assert "ev-ref-ngram" in ids and "ev-gpu" not in ids  # references kept; other tasks not
    assert data.board_candidates(idx, "qwen3-8b") == ["ev-gpu"]
    assert data.board_candidates(idx, "no-such-task") == []


def test_board_scores_rank_each_split(synthetic_home):
    frames = BoardMemo(synthetic_home).board(TASK, None)
    dev = frames.boards["dev"]
    ranked = dev[(dev["section"] == "participants") & dev["ranked"]]
    assert list(ranked["evaluation_id"]) == ["ev-alpha", "ev-beta"]
    assert list(frames.boards["test"]["evaluation_id"]) == ["ev-alpha-test"]
    assert frames.protocol_digest and frames.protocol_version == load_protocol().version


def test_empty_and_missing_warehouses(tmp_path):
    missing = tmp_path / "missing"
    st = data.warehouse_state(missing)
    assert not st.exists and st.evaluations == 0 and "No warehouse at" in st.message
    assert not missing.exists()
    (tmp_path / "empty" / "raw" / "evaluations").mkdir(parents=True)
    st = data.warehouse_state(tmp_path / "empty")
    assert st.exists and st.evaluations == 0 and "holds no evaluations yet" in st.message
    idx = data.evaluations_index(tmp_path / "empty")
    assert idx.empty and list(idx.columns) == data.INDEX_COLUMNS
    assert BoardMemo(tmp_path / "empty").board(TASK, None).empty


def test_evaluation_raw_reads_plots_inputs_without_text(synthetic_home):
    raw = data.evaluation_raw(synthetic_home, "ev-gpu")
    req = Warehouse(synthetic_home).read_table("requests", "ev-gpu").to_pandas()
    req = req[~req["pass_id"].str.startswith("warmup")]
    # every chunk token lands in one bin: the plot's total is the stored total
    total = sum(sum(t) for t in req["chunk_tokens"])
    assert math.isclose(raw.throughput["tokens_per_second"].sum(), total)
    assert set(raw.throughput["engine"]) == {"candidate", "stock"}
    mem = Warehouse(synthetic_home).read_table("memory", "ev-gpu")
    assert len(raw.memory) == mem.num_rows > 0
    assert (raw.memory["second"] >= -1e-9).all()
    counts = raw.row_counts.set_index("table")["rows"]
    assert counts["passes"] == 18


def test_memory_budget():
    assert data.memory_budget_bytes(100 * data.GIB, 0.9, 4.0) == pytest.approx(94 * data.GIB)
    assert data.memory_budget_bytes(None, 0.9, 4.0) is None
    assert data.memory_budget_bytes(float("nan"), 0.9, 4.0) is None


def test_protocol_diff_names_each_changed_value(tmp_path, monkeypatch):
    from importlib import resources

    from speculator_arena.protocol import load_protocol

    n = load_protocol().version  # the latest shipped version; the staged one is n + 1
    doc = yaml.safe_load((resources.files("speculator_arena.protocol") / "versions" / f"v{n}.yaml").read_text())
    doc["version"] = n + 1
    doc["tasks"]["qwen3-8b"]["limits"]["fidelity_ceiling"] = 0.002
    del doc["quotas"]["study_agent"]
    (tmp_path / f"v{n + 1}.yaml").write_text(yaml.safe_dump(doc))
    monkeypatch.setenv("ARENA_PROTOCOL_DIR", str(tmp_path))
    rows = {r["value"]: r for r in protocol_diff(n, n + 1)}
    assert rows["tasks.qwen3-8b.limits.fidelity_ceiling"][f"v{n}"] == "0.001"
    assert rows["tasks.qwen3-8b.limits.fidelity_ceiling"][f"v{n + 1}"] == "0.002"
    assert rows["quotas.study_agent.dev"][f"v{n + 1}"] == "(absent)"
    assert set(rows) == {
        "version",
        "tasks.qwen3-8b.limits.fidelity_ceiling",
        "quotas.study_agent.dev",
        "quotas.study_agent.test",
    }
    # v1 -> v2 names what issue 10 added (the counted slack, host contention)
    shipped = {r["value"] for r in protocol_diff(1, 2)}
    assert {"count_slack_tokens", "contention.max_foreign_cpu_share", "gates.memory.max_sample_gap_seconds"} <= shipped
    assert protocol_diff(1, 1) == []
    assert flatten({"a": {"b": [1, 2]}}) == {"a.b": [1, 2]}


def test_data_card_refuses_paths(tmp_path):
    for bad in ("../etc", "a/b", "", "hidden"):
        with pytest.raises(ValueError):
            load_data_card(bad, tmp_path)
    assert load_data_card("qwen3-8b", tmp_path) is None or load_data_card("qwen3-8b", tmp_path).source


def test_formatting_is_what_the_tests_expect():
    assert fmt.score(1.23456) == "1.2346" and fmt.ratio(1.23456) == "1.235"
    assert fmt.score(None) == fmt.score(float("nan")) == fmt.score(pd.NA) == fmt.BLANK
    assert fmt.ms(0.0123) == "12.3" and fmt.pct(0.5) == "50.0%"
    assert fmt.md_escape("a|b [x](javascript:y)") == "a\\|b \\[x\\]\\(javascript:y\\)"
    assert fmt.general(2.5e-7) == "2.500e-07" and fmt.general(0.0123) == "0.0123"
    assert fmt.flag(True) == "FLAGGED" and fmt.flag(False) == "ok"


def test_memo_rereads_and_rescores_only_what_changed(tmp_path):
    from synthetic import write_synthetic_evaluation

    from speculator_arena.board.memo import BoardMemo

    from .conftest import SYNTHETIC, write_synthetic

    home = tmp_path / "home"
    wh = write_synthetic(home, [e for e in SYNTHETIC if e[0] in ("ev-alpha", "ev-alpha-test", "ev-beta")])
    settle = lambda: time.sleep(3 * catalog.RACY_FINE_NS / 1e9)  # noqa: E731 - mtimes older than the racy window
    settle()
    memo = BoardMemo(home)
    first = memo.board(TASK, None)
    # the writers kept the catalog current: listing read no evaluation's part (at most re-checked
    # ones written too recently to trust); scoring read all three
    assert memo.last_refresh == {"index_parts_read": 0, "evaluations_scored": 3}
    assert len(memo.index()) == 3
    direct = BoardMemo(home).board(TASK, None)
    cols = [
        "evaluation_id",
        "rank",
        "tie",
        "specscore",
        "interval_low",
        "interval_high",
        "r_solo",
        "r_team",
        "r_busy",
        "gap_flag",
        "failed_gates",
    ]
    for split in data.SPLITS:
        pd.testing.assert_frame_equal(first.boards[split][cols], direct.boards[split][cols])
    memo.board(TASK, None)
    assert memo.last_refresh == {"index_parts_read": 0, "evaluations_scored": 0}
    # a new evaluation: only it is read and scored; the gap flag spans memoized and new rows
    write_synthetic_evaluation(
        wh,
        "ev-beta-test",
        account_id="acct-b",
        label="beta",
        split="test",
        seed=31,
        created_at=1.8e9 + 99,
        speedups={"solo": 1.3, "team": 1.2, "busy": 1.1},
    )
    settle()
    again = memo.board(TASK, None)
    assert memo.last_refresh == {"index_parts_read": 1, "evaluations_scored": 1}
    test_rows = again.boards["test"].set_index("evaluation_id")
    assert test_rows.at["ev-beta-test", "gap_flag"] == False
    assert bool(test_rows.at["ev-alpha-test", "gap_flag"])
    # a rewritten status row (the evaluation voided after the fact) is seen and re-scored
    row = wh.read_table("evaluations", "ev-beta").to_pylist()[0]
    row.update(status="void", void_reason="operator voided it")
    wh.write_rows("evaluations", "ev-beta", [row], replace=True)
    after = memo.board(TASK, None)
    assert memo.last_refresh["index_parts_read"] == 1
    assert "ev-beta" not in set(after.boards["dev"]["evaluation_id"])  # void: no longer a candidate


def test_only_groups_without_a_score_reach_further_back():
    """`score_board_candidates` extends only the groups whose candidates are all unscored, and
    what it scores holds, for every group, its evaluations down to its last scored one (all of
    them when none is scored): what the ranking and the gap flag read."""
    rows = []
    for acct, void_latest in (("a", 0), ("b", 3), ("c", 9)):  # c: every evaluation void
        for k in range(6):
            rows.append(
                {
                    "evaluation_id": f"{acct}-{k}",
                    "task_id": TASK,
                    "split": "dev",
                    "account_id": acct,
                    "is_reference": False,
                    "label": f"{acct}-{k}",
                    "status": "measured",
                    "created_at": float(100 - k),  # k = 0 is the latest
                    "void": k < void_latest,
                }
            )
    index = pd.DataFrame(rows)
    asked = []

    def score(ids):
        asked.append(list(ids))
        ev = index[index["evaluation_id"].isin(ids)].copy()
        ev["specscore"] = ev["void"].map({True: float("nan"), False: 1.0})
        return type("S", (), {"evaluations": ev})()

    data.score_board_candidates(index, TASK, score)
    last = set(asked[-1])
    assert {f"a-{k}" for k in range(6)} & last == {"a-0"}  # scored at once: never reaches back
    assert {f"b-{k}" for k in range(6)} & last == {f"b-{k}" for k in range(4)}  # down to b-3, its last scored
    assert {f"c-{k}" for k in range(6)} <= last  # none scored: every one
