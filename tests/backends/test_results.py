"""The results path with real files: parts written by the warehouse's own writer into a results
directory (as the pod does), the manifest, verification, atomic landing, recovery after a crash."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from synthetic import write_synthetic_evaluation

from speculator_arena.backends.kubernetes.results import (
    MANIFEST,
    ResultsRejected,
    land,
    recover,
    staging_dir,
    verify_results,
    write_results_manifest,
)
from speculator_arena.runners.status import write_status
from speculator_arena.warehouse.evaluations import current_row
from speculator_arena.warehouse.schema import TABLES
from speculator_arena.warehouse.store import Warehouse

EID = "local-smollm2-k8s-1"


def _counts(wh: Warehouse, eid: str) -> dict[str, int]:
    return {t: wh.read_table(t, eid).num_rows for t in TABLES if t != "evaluations"}


@pytest.fixture
def pod_results(tmp_path):
    """A results directory as a finished pod leaves it, and the launcher's warehouse with the
    evaluation queued and running there."""
    results = tmp_path / "results" / EID
    write_synthetic_evaluation(Warehouse(results), EID, seed=3)
    (results / "runs" / EID).mkdir(parents=True)  # the runner's state lives beside raw/: not landed
    (results / "runs" / EID / "state.json").write_text("{}")
    manifest = write_results_manifest(results, EID)
    wh = Warehouse(tmp_path / "home")
    queued = dict(
        Warehouse(results).read_table("evaluations", EID).to_pylist()[0],
        status="queued",
        provenance=json.dumps({"launcher": True}),
    )
    row = write_status(wh, queued, "running", provenance={"backend": "kubernetes"})
    expected = _counts(Warehouse(results), EID)
    return {"results": results, "wh": wh, "row": row, "manifest": manifest, "expected": expected}


def _assert_nothing_landed(r):
    wh = r["wh"]
    assert all(n == 0 for n in _counts(wh, EID).values())
    assert current_row(wh, EID)["status"] == "running"
    assert not staging_dir(wh, EID).exists()


def test_whole_results_land_with_the_pods_status(pod_results):
    r = pod_results
    assert len(r["manifest"]["parts"]) == len(list((r["results"] / "raw").rglob("*.parquet")))
    assert sum(r["expected"].values()) > 100
    row = land(r["wh"], r["results"], EID, launcher_row=r["row"], provenance={"pod": "p-1"})
    assert _counts(r["wh"], EID) == r["expected"]
    assert row["status"] == "measured" == current_row(r["wh"], EID)["status"]
    prov = json.loads(current_row(r["wh"], EID)["provenance"])
    assert prov["backend"] == "kubernetes" and prov["pod"] == "p-1" and prov["launcher"] is True
    assert prov["landed"]["rows"]["requests"] == r["expected"]["requests"]
    assert not staging_dir(r["wh"], EID).exists()
    # The landed parts are the pod's bytes.
    pod_part = next((r["results"] / "raw" / "passes").rglob("*.parquet"))
    assert (r["wh"].partition_dir("passes", EID) / pod_part.name).read_bytes() == pod_part.read_bytes()


def _rejects(r, match: str):
    with pytest.raises(ResultsRejected, match=match):
        land(r["wh"], r["results"], EID, launcher_row=r["row"])
    _assert_nothing_landed(r)


def test_a_missing_part_lands_nothing(pod_results):
    next((pod_results["results"] / "raw" / "requests").rglob("*.parquet")).unlink()
    _rejects(pod_results, "missing part")


def test_a_wrong_hash_lands_nothing(pod_results):
    m = json.loads((pod_results["results"] / MANIFEST).read_text())
    m["parts"][-1]["sha256"] = "0" * 64
    (pod_results["results"] / MANIFEST).write_text(json.dumps(m))
    _rejects(pod_results, "sha256")


def test_a_changed_part_of_the_same_size_lands_nothing(pod_results):
    f = next((pod_results["results"] / "raw" / "replies").rglob("*.parquet"))
    data = bytearray(f.read_bytes())
    data[len(data) // 2] ^= 0xFF
    f.write_bytes(bytes(data))
    _rejects(pod_results, "sha256")


def test_an_extra_file_lands_nothing(pod_results):
    part = next((pod_results["results"] / "raw" / "passes").rglob("*.parquet"))
    (part.parent / ".tmp-abc.parquet").write_bytes(part.read_bytes())
    _rejects(pod_results, "does not list")


def test_a_truncated_parquet_lands_nothing(pod_results):
    """The pod hashed a part that was already cut short (a full disk): the hash matches, the file
    is not Parquet."""
    from speculator_arena.checkpoints.seal import sha256_file

    r = pod_results
    f = next((r["results"] / "raw" / "requests").rglob("*.parquet"))
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
    m = json.loads((r["results"] / MANIFEST).read_text())
    entry = next(p for p in m["parts"] if p["path"] == f.relative_to(r["results"]).as_posix())
    entry.update(bytes=f.stat().st_size, sha256=sha256_file(f))
    (r["results"] / MANIFEST).write_text(json.dumps(m))
    _rejects(r, "not a readable requests part")


def test_wrong_row_count_or_foreign_rows_land_nothing(pod_results):
    r = pod_results
    m = json.loads((r["results"] / MANIFEST).read_text())
    i = next(i for i, p in enumerate(m["parts"]) if p["table"] == "requests")
    m["parts"][i]["rows"] += 1
    (r["results"] / MANIFEST).write_text(json.dumps(m))
    _rejects(r, "rows")
    m["parts"][i]["rows"] -= 1
    m["parts"][i]["path"] = m["parts"][i]["path"].replace(EID, "someone-else")
    (r["results"] / MANIFEST).write_text(json.dumps(m))
    _rejects(r, "not a part of")


def test_no_manifest_lands_nothing(pod_results):
    (pod_results["results"] / MANIFEST).unlink()
    _rejects(pod_results, "no results-manifest")


def test_a_running_evaluation_in_the_results_is_refused(pod_results):
    r = pod_results
    pod_wh = Warehouse(r["results"])
    write_status(pod_wh, pod_wh.read_table("evaluations", EID).to_pylist()[0], "running")
    write_results_manifest(r["results"], EID)
    _rejects(r, "final status")


_CRASH = """
import os, sys
from speculator_arena.backends.kubernetes.results import land
from speculator_arena.warehouse.evaluations import current_row
from speculator_arena.warehouse.store import Warehouse
wh = Warehouse(sys.argv[1])
crash_at = sys.argv[4]
def step(name):
    if name == crash_at:
        os._exit(9)
land(wh, sys.argv[2], sys.argv[3], launcher_row=current_row(wh, sys.argv[3]), on_step=step)
"""


def _crash_landing(r, at: str) -> None:
    p = subprocess.run(
        [sys.executable, "-c", _CRASH, str(r["wh"].home), str(r["results"]), EID, at],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 9, p.stderr


def test_a_crash_after_the_commit_point_is_finished_by_recovery(pod_results):
    r = pod_results
    _crash_landing(r, "landed replies")  # a real process death between two partition renames
    landed = _counts(r["wh"], EID)
    assert landed["replies"] == r["expected"]["replies"] and landed["requests"] == 0
    assert current_row(r["wh"], EID)["status"] == "running"  # readers do not take it as finished
    assert recover(r["wh"], EID) == "finished"
    assert _counts(r["wh"], EID) == r["expected"]
    assert current_row(r["wh"], EID)["status"] == "measured"


def test_a_crash_before_the_commit_point_leaves_nothing(pod_results):
    r = pod_results
    _crash_landing(r, "staged " + r["manifest"]["parts"][3]["path"])
    assert staging_dir(r["wh"], EID).exists()
    assert recover(r["wh"], EID) == "dropped"
    _assert_nothing_landed(r)
    # The results are still whole: landing them again works.
    land(r["wh"], r["results"], EID, launcher_row=current_row(r["wh"], EID))
    assert _counts(r["wh"], EID) == r["expected"]


def test_verification_reports_parts_and_the_final_row(pod_results):
    parts, row = verify_results(pod_results["results"], EID)
    with_rows = {t for t, n in pod_results["expected"].items() if n}
    assert {p.table for p in parts} == with_rows | {"evaluations"} and {"requests", "passes"} <= with_rows
    assert row["status"] == "measured"
    assert all(pq.ParquetFile(Path(pod_results["results"]) / p.path).metadata.num_rows == p.rows for p in parts)


# ---- the launcher's conclusion after the pod is gone --------------------------------------------
def _conclude(r, outcome):
    from speculator_arena.backends.kubernetes.launcher import KubernetesLauncher
    from speculator_arena.backends.kubernetes.settings import KubernetesSettings

    launcher = KubernetesLauncher(KubernetesSettings(), r["wh"].home, progress=lambda m: None)
    return launcher.conclude(r["row"], outcome, r["results"], {"backend": "kubernetes", "pod": "p-1"})


def test_a_pod_that_succeeded_lands_and_its_results_directory_goes(pod_results):
    from speculator_arena.backends.kubernetes.outcome import PodOutcome

    row = _conclude(pod_results, PodOutcome("succeeded", "succeeded", "the runner exited 0"))
    assert row["status"] == "measured" and _counts(pod_results["wh"], EID) == pod_results["expected"]
    assert not pod_results["results"].exists()


def test_a_pod_that_ended_badly_is_void_with_its_reason_and_lands_nothing(pod_results):
    from speculator_arena.backends.kubernetes.outcome import PodOutcome

    row = _conclude(pod_results, PodOutcome("oom_killed", "void", "the runner container was OOMKilled (exit code 137)"))
    assert row["status"] == "void" and row["void_reason"].startswith(
        "pod oom_killed: the runner container was OOMKilled"
    )
    assert all(n == 0 for n in _counts(pod_results["wh"], EID).values())
    assert current_row(pod_results["wh"], EID)["status"] == "void" and not pod_results["results"].exists()


def test_a_pod_that_succeeded_with_broken_results_is_void(pod_results):
    from speculator_arena.backends.kubernetes.outcome import PodOutcome

    next((pod_results["results"] / "raw" / "passes").rglob("*.parquet")).unlink()
    row = _conclude(pod_results, PodOutcome("succeeded", "succeeded", "the runner exited 0"))
    assert row["status"] == "void" and row["void_reason"].startswith("results rejected: missing part")
    assert all(n == 0 for n in _counts(pod_results["wh"], EID).values())
