"""The kubernetes backend's pod, run for real without a cluster: its runner container's entry
point (the same harness, the real local pools, real stdlib SSE engines) launched from a Dagster
asset through Pipes (PipesSubprocessClient: the same Pipes protocol PipesK8sClient speaks over the
pod's log), its engines started in the pod's engine container (engine_container.py: the
supervisor under the engine's uid of its own when this runs as root), its results directory
verified and landed into the warehouse whole.

An evaluation void because the machine was contended is made again under a fresh id, as the
session's real evaluation is (tests/real_evaluation.py; SCORING.md "Host contention").

Here (not in tests/backends) because it shares this directory's session-scoped `built_home`.
"""

import json
import sys

import dagster as dg

from speculator_arena.backends.kubernetes.in_pod import pod_command
from speculator_arena.backends.kubernetes.results import MANIFEST, land
from speculator_arena.runners.lifecycle import stage_tree
from speculator_arena.runners.privileges import ISOLATION_SIDECAR
from speculator_arena.runners.queued import queue
from speculator_arena.runners.spec import EvaluationSpec
from speculator_arena.warehouse import Warehouse
from speculator_arena.warehouse.evaluations import current_row

from .engine_container import ROOT, EngineContainer, readable_dir, remove
from .stand_in import FAST, make_engine

ATTEMPTS = 3


def _run_pod(spec, home, results, sidecar: str):
    """The pod's runner from a Dagster asset: (its Pipes messages, the run's log lines)."""
    command = [sys.executable, *pod_command(spec)[1:], "--home", str(results), "--artifacts", str(home)]

    @dg.asset
    def pod(context: dg.AssetExecutionContext, pipes: dg.PipesSubprocessClient) -> dg.MaterializeResult:
        invocation = pipes.run(command=command, context=context, env={"ARENA_ENGINE_SIDECAR": sidecar})
        return dg.MaterializeResult(metadata={"messages": list(invocation.get_custom_messages())})

    instance = dg.DagsterInstance.ephemeral()
    res = dg.materialize([pod], resources={"pipes": dg.PipesSubprocessClient()}, instance=instance, raise_on_error=True)
    messages = res.asset_materializations_for_node("pod")[0].metadata["messages"].value
    return messages, [e.user_message for e in instance.all_logs(res.run_id)]


def test_the_pods_runner_reports_through_pipes_and_its_rows_land_whole(built_home, profile, tmp_path):
    profile(**FAST)
    home = built_home["home"]
    shared = readable_dir("arena-in-pod-")  # what the engine container mounts: the target, the engines
    try:
        target = stage_tree(built_home["target"], shared / "target")
        eng = make_engine(shared / "engines", "ok")
        spec = EvaluationSpec(
            task_id="local-smollm2",
            engine=str(eng),
            stock_engine=str(eng),
            evaluation_id="k8s-in-pod-1",
            target=str(target),
            label="sse-ok",
        )
        for attempt in range(1, ATTEMPTS + 1):
            launcher_row = queue(spec, home)
            results = tmp_path / "results" / spec.evaluation_id
            container = EngineContainer(shared / f"engine-scratch-{attempt}")  # a fresh pod's
            try:
                messages, logs = _run_pod(spec, home, results, container.listen)
            finally:
                container.stop()
            final = messages[-1]
            contended = final.get("status") == "void" and "host contended" in (final.get("reason") or "")
            if not contended or attempt == ATTEMPTS:
                break
            print(f"[in-pod] void ({final['reason']}): made again (attempt {attempt})", file=sys.stderr)
            spec = spec.again()
    finally:
        remove(shared)
    eid = spec.evaluation_id
    assert [m["status"] for m in messages if m["event"] == "status"] == ["queued", "running"]
    assert final["event"] == "results" and final["status"] == "measured" and final["parts"] > 10, final
    assert any(m.startswith(f"[evaluate {eid}] stock busy-2") for m in logs)  # progress, as Pipes log lines

    # The engines ran in the engine container, under its uid (a uid of its own when root).
    pod_wh = Warehouse(results)
    starts = pod_wh.read_table("engine_starts", eid).to_pylist()
    assert len(starts) == 4  # candidate and stock, timed and probe
    if ROOT:
        assert {s["run_as_user"] for s in starts} == {f"uid {container.uid}"}
        assert all(s["unprivileged"] for s in starts)
    prov = json.loads(pod_wh.read_table("evaluations", eid).to_pylist()[0]["provenance"])
    assert prov["engine_isolation"] == ISOLATION_SIDECAR

    # The results directory: raw parts of the warehouse's writer, the manifest, no rows yet at home.
    assert (results / MANIFEST).is_file()
    wh = Warehouse(home)
    assert wh.read_table("passes", eid).num_rows == 0
    row = land(wh, results, eid, launcher_row=launcher_row, provenance={"pod": "test"})
    assert row["status"] == "measured" == current_row(wh, eid)["status"]
    assert wh.read_table("passes", eid).num_rows == 18
    for table in ("requests", "replies", "probe_scored", "engine_starts"):
        assert wh.read_table(table, eid).num_rows == pod_wh.read_table(table, eid).num_rows > 0
