import dagster as dg
from synthetic import write_synthetic_evaluation

from speculator_arena.assets.resources import default_resources
from speculator_arena.assets.scores import scores
from speculator_arena.scoring.registry import scores_dir
from speculator_arena.warehouse import Warehouse


def test_scores_asset_materializes_a_protocol_partition(tmp_path):
    wh = Warehouse(tmp_path / "home")
    write_synthetic_evaluation(wh, "e1", split="test", label="fast-one")
    write_synthetic_evaluation(wh, "e2", split="test", label="broken", attack="fidelity", account_id="other")
    result = dg.materialize([scores], partition_key="1", resources=default_resources(wh.home))
    assert result.success
    mat = result.asset_materializations_for_node("scores")[0]
    md = mat.metadata
    assert md["evaluations"].value == 2 and md["with_specscore"].value == 2
    ranking = md["ranking"].value
    assert ranking.index("fast-one") < ranking.index("broken") and "target_fidelity" in ranking
    assert (scores_dir(wh, 1) / "evaluations.parquet").exists()
    # the caller gets the frames it scored (launch.score returns them; nothing scores twice)
    frames = result.asset_value(scores.key)
    assert set(frames.evaluations["evaluation_id"]) == {"e1", "e2"} and frames.protocol_version == 1


def test_definitions_load_with_scores_asset():
    from speculator_arena.dagster_project.definitions import build_definitions

    defs = build_definitions()
    assert defs.resolve_assets_def("scores").partitions_def is not None
