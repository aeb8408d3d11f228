"""The submission_queue sensor, evaluated with Dagster's own testing API (build_sensor_context)
on a temporary instance and warehouse: what it starts, in which order, and that it waits while
its device is busy."""

from __future__ import annotations

import uuid

import dagster as dg
import pytest

from .conftest import finish_evaluation, submission


@pytest.fixture
def instance():
    with dg.instance_for_test() as inst:
        yield inst


def _tick(instance, home):
    from speculator_arena.assets.resources import default_resources
    from speculator_arena.assets.submissions import submission_queue

    with dg.build_sensor_context(instance=instance, resources=default_resources(home)) as ctx:
        return submission_queue(ctx)


def _run_with_tags(instance, tags: dict, status=dg.DagsterRunStatus.SUCCESS) -> None:
    from dagster._core.storage.dagster_run import DagsterRun

    instance.add_run(DagsterRun(job_name="submission_evaluation", run_id=str(uuid.uuid4()), status=status, tags=tags))


def test_sensor_starts_the_oldest_waiting_submission(front, instance):
    from speculator_arena.frontdoor.queue import SUBMISSION_TAG
    from speculator_arena.rules.devices import DEVICE_TAG

    assert "no accepted submission" in _tick(instance, front.home).skip_message
    first = front.post(submission()).json()
    front.post(submission(solution={"method": "other", "kind": "suffix"}))

    result = _tick(instance, front.home)
    assert isinstance(result, dg.SensorResult) and len(result.run_requests) == 1
    req = result.run_requests[0]
    assert req.partition_key == first["evaluation_id"] and req.run_key == first["evaluation_id"]
    assert req.tags == {DEVICE_TAG: "local", SUBMISSION_TAG: first["submission_id"]}
    from speculator_arena.runners.spec import EvaluationSpec

    spec = EvaluationSpec.from_json(req.run_config["ops"]["evaluation"]["config"]["spec"])
    assert spec.engine.endswith(f"/sealed/{first['engine_digest']}/tree")
    assert spec.is_reference is False and spec.label == "alice" and spec.evaluation_id == first["evaluation_id"]
    assert spec.account_id == front.account_id and spec.submission_id == first["submission_id"]
    assert list(result.dynamic_partitions_requests[0].partition_keys) == [first["evaluation_id"]]

    # while a run is in flight on the device, nothing else starts
    _run_with_tags(instance, {DEVICE_TAG: "local", SUBMISSION_TAG: first["submission_id"]}, dg.DagsterRunStatus.STARTED)
    assert "every device is busy (local)" in _tick(instance, front.home).skip_message


def test_sensor_moves_on_once_a_submission_has_its_run(front, instance, monkeypatch):
    from speculator_arena.frontdoor.queue import SUBMISSION_TAG
    from speculator_arena.rules.devices import DEVICE_TAG

    done = front.post(submission()).json()
    finish_evaluation(front.home, done["evaluation_id"], "measured")  # run elsewhere: not waiting
    first = front.post(submission()).json()
    second = front.post(submission()).json()
    assert _tick(instance, front.home).run_requests[0].tags[SUBMISSION_TAG] == first["submission_id"]
    _run_with_tags(instance, {DEVICE_TAG: "local", SUBMISSION_TAG: first["submission_id"]})
    req = _tick(instance, front.home).run_requests[0]
    assert req.tags[SUBMISSION_TAG] == second["submission_id"]
    # another device is not held up by this one's runs
    _run_with_tags(
        instance, {DEVICE_TAG: "local", SUBMISSION_TAG: second["submission_id"]}, dg.DagsterRunStatus.STARTED
    )
    monkeypatch.setenv("ARENA_DEVICE", "gpu-1")
    third = front.post(submission()).json()
    req = _tick(instance, front.home).run_requests[0]
    assert req.tags == {DEVICE_TAG: "gpu-1", SUBMISSION_TAG: third["submission_id"]}


def test_sensor_is_part_of_the_code_location():
    from speculator_arena.dagster_project.definitions import defs

    sensor = defs.resolve_sensor_def("submission_queue")
    assert sensor.job_name == "submission_evaluation"
    assert defs.resolve_job_def("submission_evaluation").partitions_def.name == "evaluations"


def test_two_devices_run_two_submissions_at_once_and_a_third_waits(front, instance, monkeypatch):
    """Issue 32: `ARENA_DEVICE` names two GPU nodes (kubernetes backend): one tick starts the two
    oldest submissions, one per device; the third waits while both are busy and goes to the
    device that frees first; a device never gets a second run while one is in flight."""
    from speculator_arena.frontdoor.queue import SUBMISSION_TAG
    from speculator_arena.rules.devices import DEVICE_TAG

    monkeypatch.setenv("ARENA_BACKEND", "kubernetes")
    monkeypatch.setenv("ARENA_DEVICE", "gpu-a, gpu-b")
    subs = [front.post(submission()).json() for _ in range(3)]
    result = _tick(instance, front.home)
    assert [r.tags for r in result.run_requests] == [
        {DEVICE_TAG: "gpu-a", SUBMISSION_TAG: subs[0]["submission_id"]},
        {DEVICE_TAG: "gpu-b", SUBMISSION_TAG: subs[1]["submission_id"]},
    ]
    assert list(result.dynamic_partitions_requests[0].partition_keys) == [s["evaluation_id"] for s in subs[:2]]
    for r in result.run_requests:
        _run_with_tags(instance, r.tags, dg.DagsterRunStatus.STARTED)
    assert "every device is busy (gpu-a, gpu-b)" in _tick(instance, front.home).skip_message
    # gpu-b's run ends: the third goes there, and gpu-a (still busy) gets nothing
    busy_b = instance.get_runs(filters=dg.RunsFilter(tags={SUBMISSION_TAG: subs[1]["submission_id"]}))[0]
    instance.report_run_canceled(busy_b)
    (req,) = _tick(instance, front.home).run_requests
    assert req.tags == {DEVICE_TAG: "gpu-b", SUBMISSION_TAG: subs[2]["submission_id"]}


@pytest.mark.parametrize(
    ("backend", "devices", "why"),
    [("local", "gpu-a,gpu-b", "2 devices on the local backend"), ("kubernetes", "gpu-a,gpu-a", "a device twice")],
)
def test_devices_the_queue_cannot_use_are_refused_with_the_reason(front, instance, monkeypatch, backend, devices, why):
    """Two evaluations on one host would count each other's CPU as foreign and void each other: more
    than one device needs the kubernetes backend, and a device is named once."""
    from speculator_arena.frontdoor.queue import DeviceSettingError

    monkeypatch.setenv("ARENA_BACKEND", backend)
    monkeypatch.setenv("ARENA_DEVICE", devices)
    front.post(submission())
    with pytest.raises(DeviceSettingError, match=why):
        _tick(instance, front.home)


def test_the_instance_queue_holds_one_run_per_device(tmp_path):
    """The second guard beside the sensor's own check: a fresh ARENA_HOME's Dagster instance
    limits in-progress runs to one per value of the `arena/device` tag (the daemon's run queue)."""
    from speculator_arena.dagster_project.launch import dagster_instance
    from speculator_arena.rules.devices import DEVICE_TAG

    limits = dagster_instance(tmp_path).get_concurrency_config().run_queue_config.tag_concurrency_limits
    assert [(x["key"], x["value"], x["limit"]) for x in limits] == [(DEVICE_TAG, {"applyLimitPerUniqueValue": True}, 1)]
