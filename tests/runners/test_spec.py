"""One spec module and one queued row: nothing in the product builds an `EvaluationSpec` but
its builders (runners/spec.py), nothing outside the runner writes the queued row but the
kubernetes backend, and writing it is idempotent (runners/queued.py), against a real home."""

from __future__ import annotations

import ast
from pathlib import Path

import speculator_arena
from speculator_arena.runners.queued import preflight, queue
from speculator_arena.runners.spec import REPO, EvaluationSpec
from speculator_arena.runners.status import write_status
from speculator_arena.warehouse import Warehouse
from speculator_arena.warehouse.evaluations import current_row

PACKAGE = Path(speculator_arena.__file__).resolve().parent
# The launchers that need the row before the harness runs where they are (the pod's).
QUEUE_WRITERS_OUTSIDE = {"backends/kubernetes/launcher.py", "backends/kubernetes/in_pod.py"}


def _trees():
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path.relative_to(PACKAGE).as_posix(), ast.parse(path.read_text(encoding="utf-8"))


def _called_name(node: ast.Call) -> str | None:
    f = node.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None


def test_only_the_builders_construct_a_spec():
    found = [
        f"{rel}:{node.lineno}"
        for rel, tree in _trees()
        if rel != "runners/spec.py"
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and _called_name(node) == "EvaluationSpec"
    ]
    assert found == [], "build it with a builder of runners/spec.py:\n" + "\n".join(found)


def test_only_the_runner_and_the_kubernetes_backend_write_the_queued_row():
    writers = set()
    for rel, tree in _trees():
        if rel.startswith("runners/"):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "speculator_arena.runners.queued":
                if any(a.name == "queue" for a in node.names):
                    writers.add(rel)
            elif isinstance(node, ast.Attribute) and node.attr == "queue":
                if isinstance(node.value, ast.Name) and node.value.id == "queued":
                    writers.add(rel)
            elif isinstance(node, ast.Call) and _called_name(node) == "queue" and not node.args:
                writers.add(rel)  # an `Evaluation.queue()` of old, or anything shaped like it
    assert writers <= QUEUE_WRITERS_OUTSIDE, sorted(writers - QUEUE_WRITERS_OUTSIDE)
    assert writers, "the kubernetes backend writes the row before its pod starts"


def test_queue_is_idempotent_and_preflight_writes_nothing(built_home):
    home, eid = built_home["home"], "spec-queue-once"
    wh = Warehouse(home)
    spec = EvaluationSpec(
        task_id="local-smollm2",
        engine=str(REPO / "engines" / "dev-ngram"),
        evaluation_id=eid,
        target=str(built_home["target"]),
        label="queue-once",
    )
    preflight(spec, home)
    assert current_row(wh, eid) is None  # the refusals only: nothing stored
    first = queue(spec, home)
    assert first["status"] == "queued" and first["label"] == "queue-once"
    again = queue(spec, home)
    assert again == first and wh.read_table("evaluations", eid).num_rows == 1
    running = write_status(wh, first, "running")
    assert queue(spec, home) == running  # never reset: the stored row is the evaluation's
    assert wh.read_table("evaluations", eid).num_rows == 1
    preflight(spec, home)  # an evaluation already stored passes (run() says what happens to it)
    assert current_row(wh, eid) == running


def test_a_fit_plan_is_checked_when_the_spec_is_built_and_travels_in_its_json():
    """The m/c fit's plan (runners/fit_passes.py) is validated before anything is stored: a spec
    that carries a malformed one is never built, and a good one survives the spec's JSON (what
    the `evaluation` asset's config and the pod's command carry)."""
    import pytest

    from speculator_arena.runners.spec import calibration_spec

    def spec(fit, **kw):
        return calibration_spec(
            task_id="local-smollm2",
            engine="engines/dev-stock",
            evaluation_id="fit-plan",
            label="fit",
            account_id="arena-calibration",
            protocol_version=None,
            target=None,
            fit=fit,
            **kw,
        )

    good = spec({"workload": "busy", "seconds": 2, "points": [[1, 0.5], [2, 2]]})
    assert good.fit == {"workload": "busy", "seconds": 2.0, "points": [[1, 0.5], [2, 2.0]]}
    assert EvaluationSpec.from_json(good.to_json()) == good
    bad = [
        ({"workload": "busy", "seconds": 2}, "exactly the keys"),
        ({"workload": "nightly", "seconds": 2, "points": [[1, 1]]}, "workload"),
        ({"workload": "busy", "seconds": 0, "points": [[1, 1]]}, "positive"),
        ({"workload": "busy", "seconds": float("nan"), "points": [[1, 1]]}, "positive"),
        ({"workload": "busy", "seconds": 2, "points": []}, "grid points"),
        ({"workload": "busy", "seconds": 2, "points": [[0, 1]]}, "whole number"),
        ({"workload": "busy", "seconds": 2, "points": [[1.5, 1]]}, "whole number"),
        ({"workload": "busy", "seconds": 2, "points": [[1, -1]]}, "think-time"),
        ({"workload": "busy", "seconds": 2, "points": [[1, 1], [1, 1.0]]}, "twice"),
        ({"workload": "busy", "seconds": 2, "points": [[1, 1]] * 101}, "grid points"),
        ("busy", "exactly the keys"),
    ]
    for fit, words in bad:
        with pytest.raises(ValueError, match=words):
            spec(fit)
    with pytest.raises(ValueError, match="dev split"):
        EvaluationSpec.from_json(good.to_json().replace('"split": "dev"', '"split": "test"'))


def test_the_runner_entry_takes_a_fit_plan_from_its_command_line():
    """`python -m speculator_arena.runners.evaluate --fit 1:0.5,2:2` (and `arena evaluate`, which
    shares its arguments): the GPU image without Dagster runs the fit's passes as it runs any
    evaluation; a malformed list is refused before a spec exists."""
    import argparse

    import pytest

    from speculator_arena.protocol import load_protocol
    from speculator_arena.runners.evaluate import add_arguments
    from speculator_arena.runners.spec import spec_from_args

    p = argparse.ArgumentParser()
    add_arguments(p)
    base = ["--task", "local-smollm2", "--engine", "engines/dev-stock", "--account", "arena-calibration"]
    spec = spec_from_args(p.parse_args([*base, "--fit", "1:0.5, 2:2", "--fit-seconds", "3"]))
    assert spec.fit == {"workload": "busy", "seconds": 3.0, "points": [[1, 0.5], [2, 2.0]]}
    busy = load_protocol().task("local-smollm2").workloads["busy"].pass_seconds
    assert spec_from_args(p.parse_args([*base, "--fit", "4:1"])).fit["seconds"] == busy
    assert spec_from_args(p.parse_args(base)).fit is None
    for bad in ("1", "1:x", "a:1", "1:0.5,,2:2", "0:1"):
        with pytest.raises(ValueError):
            spec_from_args(p.parse_args([*base, "--fit", bad]))
