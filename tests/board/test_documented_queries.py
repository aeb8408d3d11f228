"""The DuckDB queries of docs/warehouse.md ("The figures shown beside a score") run on an analysts'
database and give the board's numbers, for a dev and a test evaluation; the file holds no metric
name or label a test evaluation's engine wrote beyond the counters' names and draft positions."""

from __future__ import annotations

import json
import re
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow as pa
import pytest
from synthetic import write_synthetic_evaluation

from speculator_arena.board import acceptance, context, curves, goodput, shown
from speculator_arena.warehouse import Warehouse, analysts
from speculator_arena.warehouse.schema import TABLES

DOC = Path(__file__).resolve().parents[2] / "docs" / "warehouse.md"
HIDDEN = ("HIDDEN-METRIC-NAME-4e1", "HIDDEN-LABEL-9c2", "HIDDEN-LABEL-77d")
IDS = ("d", "t")


def documented() -> dict[str, str]:
    """{figure: query} of every ```sql block that starts with `-- figure: <name>`."""
    blocks = re.findall(r"```sql\n(-- figure: (\w+)\n.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)
    return {name: sql for sql, name in blocks}


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    wh = Warehouse(tmp_path_factory.mktemp("documented") / "arena_home")
    write_synthetic_evaluation(wh, "d", account_id="acct-q", label="q", seed=80, per_position=True)
    write_synthetic_evaluation(wh, "t", account_id="acct-q", label="q", split="test", seed=81, per_position=True)
    m = wh.read_table("metrics", "t").to_pandas()
    per_pos = m["name"].str.contains("per_pos")
    m.loc[per_pos, "labels"] = [
        json.dumps({**json.loads(x), "note": HIDDEN[2]}) for x in m.loc[per_pos, "labels"]
    ]  # still readable: the position is kept, the note is not copied
    planted = m.iloc[:2].assign(name="vllm:" + HIDDEN[0], labels=json.dumps({"x": HIDDEN[1]}))
    m = pd.concat([m, planted], ignore_index=True)
    wh.write_rows("metrics", "t", pa.Table.from_pandas(m, schema=TABLES["metrics"], preserve_index=False), replace=True)
    analysts.refresh(wh.home)
    return wh.home


@pytest.fixture(scope="module")
def con(home):
    c = duckdb.connect(str(home / analysts.FILE_NAME), read_only=True)
    yield c
    c.close()


@pytest.fixture(scope="module")
def rows(home):
    return shown.read_shown(home, IDS)


def _q(con, name: str) -> pd.DataFrame:
    return con.execute(documented()[name]).fetchdf()


def test_every_documented_figure_has_a_query():
    assert set(documented()) == {
        "throughput_interactivity",
        "acceptance_by_position",
        "verification_steps",
        "tokens_per_chunk",
        "tokens_per_chunk_by_family",
        "acceptance_by_context",
        "speedup_proxy",
        "goodput",
    }


def test_throughput_and_acceptance_queries_give_the_board_s_numbers(con, rows):
    got = _q(con, "throughput_interactivity").set_index(["evaluation_id", "engine", "workload"])
    board = curves.interactivity_points(rows).set_index(["evaluation_id", "engine", "workload"])
    assert len(got) == len(board) == 12
    for key, r in board.iterrows():
        assert got.loc[key, ["throughput", "per_user"]].tolist() == pytest.approx([r.throughput, r.per_user], rel=1e-12)

    got = _q(con, "acceptance_by_position").set_index(["evaluation_id", "engine", "workload", "position"])
    board = acceptance.by_position(rows)
    board = board[board["rate"].notna() & (board["workload"] != "all")]
    assert set(board["evaluation_id"]) == set(IDS)  # the test evaluation's positions are in the file
    for r in board.itertuples():
        assert got.loc[(r.evaluation_id, r.engine, r.workload, r.position), "rate"] == pytest.approx(r.rate, rel=1e-12)

    got = _q(con, "verification_steps").set_index(["evaluation_id", "engine", "workload", "accepted_tokens"])
    board = acceptance.step_histogram(rows)
    board = board[(board["source"] == acceptance.STEPS) & (board["workload"] != "all")]
    assert len(got) == len(board) > 0
    for r in board.itertuples():
        assert got.loc[(r.evaluation_id, r.engine, r.workload, r.value), "steps"] == pytest.approx(r.count, rel=1e-9)


def test_chunk_proxy_and_goodput_queries_give_the_board_s_numbers(con, rows):
    got = _q(con, "tokens_per_chunk").groupby(["evaluation_id", "engine", "workload", "tokens"])["chunks"].sum()
    want = rows.chunks.groupby(["evaluation_id", "engine", "workload", "tokens"])["chunks"].sum()
    assert got.to_dict() == want.to_dict()

    got = _q(con, "tokens_per_chunk_by_family").set_index(["evaluation_id", "engine", "workload", "family", "app"])
    board = acceptance.by_family(rows)
    board = board[(board["app"] != "all") & (board["workload"] != "all")]
    assert len(got) == len(board) > 0
    for r in board.itertuples():
        key = (r.evaluation_id, r.engine, r.workload, r.family, r.app)
        assert got.loc[key, "tokens_per_chunk"] == pytest.approx(r.tokens_per_chunk, rel=1e-12)

    got = _q(con, "acceptance_by_context").set_index(
        ["evaluation_id", "engine", "workload", "family", "axis", "bin_low"]
    )
    board = context.by_context(rows)
    board = board[board["workload"] != "all"]
    assert len(got) == len(board) > 0 and set(board["evaluation_id"]) == set(IDS)
    for r in board.itertuples():
        key = (r.evaluation_id, r.engine, r.workload, r.family, r.axis, r.bin_low)
        assert got.loc[key, ["acceptance_length", "acceptance_length_per_request"]].tolist() == pytest.approx(
            [r.acceptance_length, r.acceptance_length_per_request], rel=1e-12
        )

    got = _q(con, "speedup_proxy").set_index(["evaluation_id", "workload"])
    for r in acceptance.speedup_proxy(rows).itertuples():
        assert got.loc[(r.evaluation_id, r.workload), "proxy"] == pytest.approx(r.proxy, rel=1e-12)

    got = _q(con, "goodput").set_index(["evaluation_id", "engine", "workload"])
    board = goodput.goodput(rows)
    board = board[board["workload"] != "all"]
    assert set(rows.objectives["ttft_seconds"]) == {2.0} and set(rows.objectives["tpot_seconds"]) == {0.1}
    for r in board.itertuples():
        assert got.loc[(r.evaluation_id, r.engine, r.workload), "goodput"] == pytest.approx(r.share, rel=1e-12)


def test_the_file_keeps_only_counter_names_and_positions_of_a_test_evaluation(con):
    names = dict(con.execute("SELECT column_name, copied FROM analyst_columns WHERE table_name = 'metrics'").fetchall())
    assert names["name"] == analysts.KNOWN and names["labels"] == analysts.POSITION
    text = " ".join(str(v) for row in con.execute("SELECT * FROM raw_metrics").fetchall() for v in row)
    assert not [h for h in HIDDEN if h in text]
    t = con.execute("SELECT name, labels FROM raw_metrics WHERE evaluation_id = 't'").fetchall()
    assert {n for n, _ in t} >= {None, "vllm:spec_decode_num_accepted_tokens_per_pos_total"}
    positions = {lab for n, lab in t if n and "per_pos" in n}
    assert positions == {'{"position":"0"}', '{"position":"1"}', '{"position":"2"}'}
    # a dev evaluation's labels are copied whole
    d = con.execute("SELECT labels FROM raw_metrics WHERE evaluation_id = 'd' AND name LIKE '%per_pos%'").fetchall()
    assert all('"model_name"' in lab for (lab,) in d)
