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


def test_an_unpaired_caller_gets_the_inputs_and_a_queued_row(built_home):
    """What the calibration's m/c fit runs its own passes on (`Evaluation.begin_unpaired`): the
    spec's target, its tokenizer and the dev pool, the row queued once, the home protected."""
    import stat

    from speculator_arena.runners.harness import Evaluation
    from speculator_arena.runners.spec import calibration_spec, default_stock_engine

    home, eid = built_home["home"], "spec-unpaired"
    spec = calibration_spec(
        task_id="local-smollm2",
        engine=default_stock_engine("local-smollm2"),
        evaluation_id=eid,
        label="unpaired",
        account_id="arena-calibration",
        protocol_version=None,
        target=str(built_home["target"]),
    )
    ev = Evaluation(spec, home=home)
    pool = ev.begin_unpaired()
    assert pool is ev.pool and pool.passes(eid, "solo", 0, 1)  # the pool serves passes
    assert ev.target == Path(built_home["target"]) and ev.tokenizer.encode("hello")
    assert ev.row == current_row(Warehouse(home), eid) and ev.row["status"] == "queued"
    assert ev.row["account_id"] == "arena-calibration" and not ev.row["is_reference"]
    for sub in ("raw", "runs", "dagster"):
        assert stat.S_IMODE((Path(home) / sub).stat().st_mode) & 0o007 == 0, sub  # others (the engine's user): nothing
