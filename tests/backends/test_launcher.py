"""The backend choice (Dagster resource, `arena evaluate --backend`), the launcher's refusals
(nothing stored), and, with a reachable cluster, `arena evaluate --backend kubernetes` for real."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from speculator_arena.backends.resource import EvaluationBackendResource
from speculator_arena.cli import main
from speculator_arena.warehouse import Warehouse
from speculator_arena.warehouse.evaluations import current_row


def test_the_backend_resource_defaults_to_local(monkeypatch):
    monkeypatch.delenv("ARENA_BACKEND", raising=False)
    assert EvaluationBackendResource().backend == "local"
    monkeypatch.setenv("ARENA_BACKEND", "kubernetes")
    assert EvaluationBackendResource().backend == "kubernetes"
    assert EvaluationBackendResource(kind="local").backend == "local"
    with pytest.raises(ValueError, match="unknown backend"):
        _ = EvaluationBackendResource(kind="slurm").backend
    monkeypatch.setenv("ARENA_K8S_NAMESPACE", "arena-test")
    monkeypatch.setenv("ARENA_K8S_UNSCHEDULABLE_TIMEOUT_S", "30")
    s = EvaluationBackendResource(kind="kubernetes", image="registry.example/arena-runner:1").settings()
    assert (s.namespace, s.image, s.unschedulable_timeout_s) == ("arena-test", "registry.example/arena-runner:1", 30.0)


def test_the_launcher_reads_the_runners_log_in_bounded_reads(monkeypatch):
    """The log reader's every read gives up after `log_read_timeout_s` and reconnects (dagster-k8s'
    own default is an hour, which an ended pod's stream left open held in full)."""
    from speculator_arena.backends.kubernetes.launcher import BoundedLogReader
    from speculator_arena.backends.kubernetes.settings import KubernetesSettings

    assert KubernetesSettings().log_read_timeout_s == 60.0
    monkeypatch.setenv("ARENA_K8S_LOG_READ_TIMEOUT_S", "7")
    s = KubernetesSettings.from_env()
    assert BoundedLogReader(s.log_read_timeout_s)._get_consume_logs_request_timeout() == 7
    monkeypatch.setenv("DAGSTER_PIPES_K8S_CONSUME_POD_LOGS_REQUEST_TIMEOUT", "3600")  # the arena's bound wins
    assert BoundedLogReader(s.log_read_timeout_s)._get_consume_logs_request_timeout() == 7


def test_definitions_carry_the_backend_resource():
    from speculator_arena.dagster_project.definitions import build_definitions

    defs = build_definitions()
    assert isinstance(defs.resources["backend"], EvaluationBackendResource)
    assert "backend" in defs.get_assets_def("evaluation").required_resource_keys


@pytest.mark.parametrize(
    "extra, words",
    [
        ([], "needs a sealed target on the artifacts volume"),
        (["--target", "/somewhere/not/on/the/volume"], "not under the artifacts volume"),
    ],
)
def test_kubernetes_refusals_store_nothing(tmp_path, monkeypatch, capsys, extra, words):
    monkeypatch.setenv("ARENA_K8S_ARTIFACTS_ROOT", str(tmp_path / "artifacts"))
    home = tmp_path / "home"
    rc = main(
        [
            "evaluate",
            "--backend",
            "kubernetes",
            "--task",
            "local-smollm2",
            "--engine",
            "engines/dev-stock",
            "--home",
            str(home),
            "--evaluation-id",
            "k8s-refused",
            *extra,
        ]
    )
    assert rc == 2 and words in capsys.readouterr().err
    assert current_row(Warehouse(home), "k8s-refused") is None


def test_a_pool_missing_from_the_artifacts_volume_is_refused(tmp_path, monkeypatch, capsys):
    artifacts = tmp_path / "artifacts"
    (artifacts / "checkpoints" / "local-smollm2").mkdir(parents=True)
    monkeypatch.setenv("ARENA_K8S_ARTIFACTS_ROOT", str(artifacts))
    rc = main(
        [
            "evaluate",
            "--backend",
            "kubernetes",
            "--task",
            "local-smollm2",
            "--engine",
            "engines/dev-stock",
            "--home",
            str(tmp_path / "home"),
            "--evaluation-id",
            "k8s-refused",
            "--target",
            str(artifacts / "checkpoints" / "local-smollm2"),
        ]
    )
    assert rc == 2 and "copy the built pools to the artifacts volume" in capsys.readouterr().err
    assert current_row(Warehouse(tmp_path / "home"), "k8s-refused") is None


def test_without_target_the_task_sealed_on_the_artifacts_volume_is_used(tmp_path, monkeypatch):
    """A submission names no target (the task fixes it): the launcher takes the task's sealed target
    prepared on the artifacts volume (laid out like a home), as the pod sees it; without one it
    refuses, naming where it looked."""
    from speculator_arena.backends.kubernetes.launcher import KubernetesLauncher
    from speculator_arena.backends.kubernetes.settings import KubernetesSettings
    from speculator_arena.runners.spec import EvaluationSpec

    artifacts = tmp_path / "artifacts"
    launcher = KubernetesLauncher(KubernetesSettings(artifacts_root=str(artifacts)), tmp_path / "home")
    spec = EvaluationSpec(task_id="local-smollm2", engine="engines/dev-stock", evaluation_id="k8s-target")
    with pytest.raises(ValueError, match=f"none at {artifacts}/checkpoints/local-smollm2"):
        launcher.with_target(spec)
    sealed = artifacts / "checkpoints" / "local-smollm2"
    sealed.mkdir(parents=True)
    (sealed / "manifest.json").write_text("{}")
    assert launcher.with_target(spec).target == str(sealed)
    named = EvaluationSpec(task_id="local-smollm2", engine="engines/dev-stock", evaluation_id="k8s-t", target="/x")
    assert launcher.with_target(named).target == "/x"


# ---- against a real API server ---------------------------------------------------------------
def _cluster_or_skip() -> None:
    if not os.environ.get("KUBECONFIG"):
        pytest.skip(
            "no Kubernetes cluster: set KUBECONFIG (and ARENA_K8S_IMAGE, ARENA_K8S_ARTIFACTS_ROOT, "
            "ARENA_K8S_RESULTS_ROOT; docs/operators/kubernetes.md) to run the kubernetes backend against a real API server"
        )
    from kubernetes import client, config

    try:
        config.load_kube_config()
        client.VersionApi().get_code(_request_timeout=10)
    except Exception as exc:  # any failure to reach it is a skip, with the reason
        pytest.skip(f"KUBECONFIG is set but its API server is not reachable: {exc}")
    for var in ("ARENA_K8S_IMAGE", "ARENA_K8S_ARTIFACTS_ROOT", "ARENA_K8S_RESULTS_ROOT"):
        if not os.environ.get(var):
            pytest.skip(f"a cluster is reachable but {var} is not set (docs/operators/kubernetes.md)")


def summary_of(stdout: str) -> dict:
    """`arena evaluate`'s summary as the command prints it: one indented JSON document
    (printing.print_json: its first line is `{`), the last thing on stdout. Lines before it (a
    pod's log lines, which dagster-k8s forwards to stdout where the launcher does not send them
    to stderr) do not belong to it."""
    lines = stdout.splitlines()
    starts = [i for i, line in enumerate(lines) if line == "{"]
    assert starts, f"no JSON summary on stdout: {stdout[-2000:]!r}"
    return json.loads("\n".join(lines[starts[-1] :]))


def test_the_summary_is_read_as_the_command_prints_it(capsys):
    from speculator_arena.printing import print_json

    print('{"event": "results", "status": "measured"}')  # a forwarded pod log line
    print_json({"status": "void", "rows": {"passes": 0}, "attempts": [{"status": "void"}]})
    assert summary_of(capsys.readouterr().out) == {
        "status": "void",
        "rows": {"passes": 0},
        "attempts": [{"status": "void"}],
    }


def _home_with_artifact_pools(tmp_path) -> Path:
    home = tmp_path / "home"
    shutil.copytree(
        Path(os.environ["ARENA_K8S_ARTIFACTS_ROOT"]) / "pools" / "local-smollm2", home / "pools" / "local-smollm2"
    )
    return home


def _evaluate_on_cluster(tmp_path, capsys, eid: str) -> dict:
    home = _home_with_artifact_pools(tmp_path)
    target = Path(os.environ["ARENA_K8S_ARTIFACTS_ROOT"]) / "checkpoints" / "local-smollm2"
    rc = main(
        [
            "evaluate",
            "--backend",
            "kubernetes",
            "--task",
            "local-smollm2",
            "--engine",
            "engines/dev-ngram",
            "--home",
            str(home),
            "--evaluation-id",
            eid,
            "--target",
            str(target),
        ]
    )
    assert rc == 0
    out = summary_of(capsys.readouterr().out)
    from kubernetes import client

    ns = os.environ.get("ARENA_K8S_NAMESPACE", "arena-evaluations")
    assert (
        client.CoreV1Api().list_namespaced_pod(ns, label_selector=f"speculator-arena/evaluation-id={eid}").items == []
    )
    return out


def test_cluster_evaluation_lands_its_rows(tmp_path, capsys):
    _cluster_or_skip()
    out = _evaluate_on_cluster(tmp_path, capsys, "k8s-cluster-1")
    assert out["status"] == "measured", out
    assert out["rows"]["passes"] > 0 and out["rows"]["probe_scored"] > 0


def test_cluster_image_pull_failure_is_void_and_cleaned_up(tmp_path, capsys, monkeypatch):
    _cluster_or_skip()
    monkeypatch.setenv("ARENA_K8S_IMAGE", "registry.invalid/speculator-arena/no-such-image:0")
    out = _evaluate_on_cluster(tmp_path, capsys, "k8s-cluster-pull")
    assert out["status"] == "void" and "image_pull" in out["void_reason"]
    assert out["rows"]["passes"] == 0
