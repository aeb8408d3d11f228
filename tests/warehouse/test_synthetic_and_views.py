import pytest
from synthetic import write_synthetic_evaluation, write_synthetic_warehouse

from speculator_arena.protocol import load_protocol
from speculator_arena.scoring.connection import sql_text
from speculator_arena.warehouse import TABLES, Warehouse
from speculator_arena.warehouse.store import macro_statements, sql_statements


def test_synthetic_protocol_scale_writes_every_table_at_protocol_size(tmp_path):
    wh = Warehouse(tmp_path)
    write_synthetic_evaluation(wh, "p", task_id="qwen3-8b", scale="protocol")
    for table in TABLES:  # but `slices`: only a sliced pass (runners/sliced.py) has slices
        assert table == "slices" or wh.read_table(table, "p").num_rows > 0, table
    tp = load_protocol().task("qwen3-8b")
    passes = wh.read_table("passes", "p").to_pandas()
    assert len(passes) == 2 * 3 * tp.passes_per_workload
    busy = passes[passes.workload == "busy"].iloc[0]
    assert busy.lanes == tp.lanes["busy"] and busy.ends_at - busy.started_at == tp.workloads["busy"].pass_seconds
    scored = wh.read_table("probe_scored", "p").to_pandas()
    assert len(scored) == 2 * tp.gates.sampled_likelihood.replies
    req = wh.read_table("requests", "p").to_pandas()
    assert (req.chunk_tokens.map(sum) == req.output_tokens).all()


def test_unknown_attack_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="unknown attack"):
        write_synthetic_evaluation(Warehouse(tmp_path), "x", attack="nonsense")
    assert not (tmp_path / "raw").exists()


def test_write_synthetic_warehouse_and_views(tmp_path):
    wh = Warehouse(tmp_path)
    ids = write_synthetic_warehouse(wh, 3, task_ids=("local-smollm2",), scale="small", progress=False)
    assert len(ids) == 3
    con = wh.connect()
    try:
        assert con.execute("SELECT count(DISTINCT evaluation_id) FROM staged_requests").fetchone()[0] == 3
        assert (
            con.execute(
                "SELECT count(*) FROM pass_speeds WHERE busy_window_speed IS NULL AND workload <> 'solo'"
            ).fetchone()[0]
            == 0
        )
        assert con.execute("SELECT count(*) FROM board_latest").fetchone()[0] == 3
    finally:
        con.close()
    ro = wh.connect(read_only=True)
    try:
        assert ro.execute("SELECT count(*) FROM raw_evaluations").fetchone()[0] == 3
    finally:
        ro.close()


def test_only_numbered_sql_files_are_views():
    """Every connection defines the macros first (the views call them), then one view per file."""
    macros = macro_statements()
    stmts = sql_statements()
    assert macros and all("CREATE OR REPLACE MACRO" in s for s in macros) and stmts[: len(macros)] == macros
    assert stmts[len(macros) :] and all("CREATE OR REPLACE VIEW" in s for s in stmts[len(macros) :])
    assert "$ids" in sql_text("pass_ratios.sql")


def test_parts_written_before_a_column_was_added_read_it_as_null(tmp_path):
    """A warehouse keeps parts written under an older schema (contention gained foreign_top):
    the raw view, the packs and the scorer read them, the new column NULL, the rest unchanged."""
    import pyarrow.parquet as pq

    from speculator_arena.scoring import score_warehouse
    from speculator_arena.warehouse.packs import pack

    wh = Warehouse(tmp_path)
    write_synthetic_evaluation(wh, "old")
    write_synthetic_evaluation(wh, "new")
    before = score_warehouse(wh).evaluations.set_index("evaluation_id").specscore
    (part,) = (wh.raw / "contention" / "evaluation_id=old").glob("*.parquet")
    t = pq.read_table(part)
    pq.write_table(t.drop_columns(["foreign_top"]), part)
    with wh.connect(read_only=True) as con:
        rows = dict(
            con.sql(
                "SELECT evaluation_id, count(*) FILTER (WHERE foreign_top IS NULL) FROM raw_contention GROUP BY ALL"
            ).fetchall()
        )
    assert rows["old"] == t.num_rows > 0
    after = score_warehouse(wh).evaluations.set_index("evaluation_id").specscore
    assert after.to_dict() == before.to_dict()
    pack(wh.home)  # the packed copy of the old part reads the same
    assert score_warehouse(wh).evaluations.set_index("evaluation_id").specscore.to_dict() == before.to_dict()
