"""The analysts' database on a synthetic warehouse: dev text kept, test text withheld, the
command, the Dagster asset, and a hook that never fails the evaluation it follows."""

from __future__ import annotations

import duckdb
import pytest
from synthetic import write_synthetic_evaluation

from speculator_arena.cli import main
from speculator_arena.warehouse import Warehouse, analysts


@pytest.fixture
def home(tmp_path, monkeypatch):
    h = tmp_path / "arena_home"
    wh = Warehouse(h)
    write_synthetic_evaluation(wh, "d", seed=1)
    write_synthetic_evaluation(wh, "t", split="test", seed=2)
    for eid, text in (("d", "DEV-REPLY-visible-1"), ("t", "TEST-REPLY-hidden-2")):
        wh.write_rows("replies", eid, [{"request_id": "planted", "engine": "candidate", "text": text}])
    monkeypatch.setenv("ARENA_HOME", str(h))
    return h


def test_arena_warehouse_analysts_builds_the_file(home, capsys):
    assert main(["warehouse", "analysts"]) == 0
    out = capsys.readouterr().out
    assert "withheld" in out and "duckdb -readonly" in out
    con = duckdb.connect(str(home / "arena.duckdb"), read_only=True)
    try:
        texts = dict(con.execute("SELECT evaluation_id, text FROM raw_replies WHERE request_id = 'planted'").fetchall())
        assert texts == {"d": "DEV-REPLY-visible-1", "t": None}
        assert con.execute("SELECT count(*) FROM raw_requests WHERE evaluation_id = 't'").fetchone()[0] > 0
        assert con.execute("SELECT count(*) FROM pass_speeds WHERE evaluation_id = 't'").fetchone()[0] > 0
        cols = {r[0] for r in con.execute("DESCRIBE raw_evaluations").fetchall()}
        assert "split" in cols and "evaluation_id" in cols
    finally:
        con.close()


def test_the_dagster_asset_materializes_it(home):
    import dagster as dg

    from speculator_arena.assets.analysts import analysts_db
    from speculator_arena.assets.resources import default_resources

    res = dg.materialize([analysts_db], resources=default_resources(home))
    meta = res.get_asset_materialization_events()[0].materialization.metadata
    assert res.success and meta["test_evaluations_text_withheld"].value == 1
    assert (home / "arena.duckdb").is_file()


def test_the_hook_reports_and_never_raises(home):
    (home / "arena.duckdb").mkdir()  # the place of the file is taken: the rename fails
    said = []
    analysts.refresh_after_evaluation(home, say=said.append)
    assert said and "not refreshed" in said[0] and "arena warehouse analysts" in said[0]
    assert not list(home.glob(".arena.duckdb.*"))  # no temporary file left behind
