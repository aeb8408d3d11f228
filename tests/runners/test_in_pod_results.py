"""The kubernetes backend's pod entry point, run for real without a cluster: the same harness,
real stdlib SSE engines and the real local pools, launched from a Dagster asset through Pipes
(PipesSubprocessClient: the same Pipes protocol PipesK8sClient speaks over the pod's log), its
results directory verified and landed into the warehouse whole.

Here (not in tests/backends) because it shares this directory's session-scoped `built_home`.
"""

import sys

import dagster as dg

from speculator_arena.backends.kubernetes.in_pod import pod_command
from speculator_arena.backends.kubernetes.results import MANIFEST, land
from speculator_arena.runners.queued import queue
from speculator_arena.runners.spec import EvaluationSpec
from speculator_arena.warehouse import Warehouse
from speculator_arena.warehouse.evaluations import current_row

from .test_evaluate_asset import FAST


def test_the_pods_runner_reports_through_pipes_and_its_rows_land_whole(built_home, engine_factory, profile, tmp_path):
    profile(**FAST)
    home, eid = built_home["home"], "k8s-in-pod-1"
    eng = engine_factory("ok")
    spec = EvaluationSpec(
        task_id="local-smollm2",
        engine=str(eng),
        stock_engine=str(eng),
        evaluation_id=eid,
        target=str(built_home["target"]),
        label="sse-ok",
    )
    launcher_row = queue(spec, home)
    results = tmp_path / "results" / eid
    command = [sys.executable, *pod_command(spec)[1:], "--home", str(results), "--artifacts", str(home)]

    @dg.asset
    def pod(context: dg.AssetExecutionContext, pipes: dg.PipesSubprocessClient) -> dg.MaterializeResult:
        invocation = pipes.run(command=command, context=context)
        return dg.MaterializeResult(metadata={"messages": list(invocation.get_custom_messages())})

    instance = dg.DagsterInstance.ephemeral()
    res = dg.materialize([pod], resources={"pipes": dg.PipesSubprocessClient()}, instance=instance, raise_on_error=True)
    messages = res.asset_materializations_for_node("pod")[0].metadata["messages"].value
    assert [m["status"] for m in messages if m["event"] == "status"] == ["queued", "running"]
    final = messages[-1]
    assert final["event"] == "results" and final["status"] == "measured" and final["parts"] > 10, final
    logs = [e.user_message for e in instance.all_logs(res.run_id)]
    assert any(m.startswith(f"[evaluate {eid}] stock busy-2") for m in logs)  # progress, as Pipes log lines

    # The results directory: raw parts of the warehouse's writer, the manifest, no rows yet at home.
    assert (results / MANIFEST).is_file()
    wh = Warehouse(home)
    assert wh.read_table("passes", eid).num_rows == 0
    row = land(wh, results, eid, launcher_row=launcher_row, provenance={"pod": "test"})
    assert row["status"] == "measured" == current_row(wh, eid)["status"]
    assert wh.read_table("passes", eid).num_rows == 18
    pod_wh = Warehouse(results)
    for table in ("requests", "replies", "probe_scored", "engine_starts"):
        assert wh.read_table(table, eid).num_rows == pod_wh.read_table(table, eid).num_rows > 0
