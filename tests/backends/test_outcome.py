"""Every way an evaluation's pod ends, as status objects of the shapes the API server returns,
built with the `kubernetes` client's models, classified by the pure function the launcher uses."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from kubernetes import client as k8s

from speculator_arena.backends.kubernetes.outcome import classify_pod, is_started

NOW = datetime(2026, 12, 1, 6, 0, tzinfo=UTC)
TIMEOUT = 900.0


def pod(phase="Running", *, age_s=60.0, reason=None, message=None, conditions=(), state=None, deadline=3600):
    statuses = None
    if state is not None:
        statuses = [
            k8s.V1ContainerStatus(
                name="runner", image="img", image_id="", ready=state.running is not None, restart_count=0, state=state
            )
        ]
    return k8s.V1Pod(
        metadata=k8s.V1ObjectMeta(
            name="p", namespace="arena-evaluations", creation_timestamp=NOW - timedelta(seconds=age_s)
        ),
        spec=k8s.V1PodSpec(containers=[k8s.V1Container(name="runner")], active_deadline_seconds=deadline),
        status=k8s.V1PodStatus(
            phase=phase,
            reason=reason,
            message=message,
            conditions=list(conditions) or None,
            container_statuses=statuses,
        ),
    )


def terminated(exit_code, reason, message=None):
    return k8s.V1ContainerState(
        terminated=k8s.V1ContainerStateTerminated(exit_code=exit_code, reason=reason, message=message)
    )


def waiting(reason, message=None):
    return k8s.V1ContainerState(waiting=k8s.V1ContainerStateWaiting(reason=reason, message=message))


RUNNING = k8s.V1ContainerState(running=k8s.V1ContainerStateRunning(started_at=NOW))


def unschedulable(age_s):
    return pod(
        "Pending",
        age_s=age_s,
        conditions=[
            k8s.V1PodCondition(
                type="PodScheduled",
                status="False",
                reason="Unschedulable",
                message="0/4 nodes are available: 4 Insufficient nvidia.com/gpu.",
            )
        ],
    )


def classify(p):
    return classify_pod(p, now=NOW, unschedulable_timeout_s=TIMEOUT, container="runner")


@pytest.mark.parametrize(
    "case, the_pod, kind, words",
    [
        ("succeeded", pod("Succeeded", state=terminated(0, "Completed")), "succeeded", "exited 0"),
        ("unschedulable past the timeout", unschedulable(TIMEOUT + 1), "unschedulable", "Insufficient nvidia.com/gpu"),
        (
            "image pull failure",
            pod("Pending", state=waiting("ImagePullBackOff", 'Back-off pulling image "r/x:1"')),
            "image_pull",
            "Back-off pulling image",
        ),
        (
            "image pull error",
            pod("Pending", state=waiting("ErrImagePull", "manifest unknown")),
            "image_pull",
            "manifest",
        ),
        ("OOMKilled", pod("Failed", state=terminated(137, "OOMKilled")), "oom_killed", "OOMKilled"),
        (
            "evicted by the kubelet",
            pod(
                "Failed",
                reason="Evicted",
                message="The node was low on resource: memory.",
                state=terminated(137, "Error"),
            ),
            "evicted",
            "low on resource",
        ),
        (
            "evicted through the eviction API",
            pod(
                "Failed",
                state=terminated(143, "Error"),
                conditions=[
                    k8s.V1PodCondition(
                        type="DisruptionTarget",
                        status="True",
                        reason="EvictionByEvictionAPI",
                        message="Eviction API: evicting",
                    )
                ],
            ),
            "evicted",
            "EvictionByEvictionAPI",
        ),
        (
            "preempted",
            pod(
                "Running",
                state=RUNNING,
                conditions=[
                    k8s.V1PodCondition(
                        type="DisruptionTarget",
                        status="True",
                        reason="PreemptionByScheduler",
                        message="Preempted by a pod of higher priority",
                    )
                ],
            ),
            "preempted",
            "higher priority",
        ),
        (
            "deadline exceeded",
            pod(
                "Failed",
                reason="DeadlineExceeded",
                message="Pod was active on the node longer than the specified deadline",
                state=terminated(137, "Error"),
            ),
            "deadline_exceeded",
            "3600 s",
        ),
        (
            "node lost (taint manager)",
            pod(
                "Running",
                state=RUNNING,
                conditions=[
                    k8s.V1PodCondition(
                        type="DisruptionTarget",
                        status="True",
                        reason="DeletionByTaintManager",
                        message="Taint manager: deleting due to NoExecute taint",
                    )
                ],
            ),
            "node_lost",
            "NoExecute",
        ),
        (
            "node lost (unknown phase)",
            pod("Unknown", reason="NodeLost", message="Node n1 which was running pod p is unresponsive"),
            "node_lost",
            "unresponsive",
        ),
        (
            "node shut down",
            pod("Failed", reason="Terminated", message="Pod was terminated in response to imminent node shutdown."),
            "node_lost",
            "node shutdown",
        ),
        ("runner failed", pod("Failed", state=terminated(1, "Error", "Traceback ...")), "runner_failed", "exit code 1"),
        ("pod vanished", None, "vanished", "disappeared"),
    ],
)
def test_every_end_has_a_status_and_a_reason(case, the_pod, kind, words):
    out = classify(the_pod)
    assert out is not None, case
    assert out.kind == kind and words in out.reason
    assert out.status == ("succeeded" if kind == "succeeded" else "void")


@pytest.mark.parametrize(
    "case, the_pod",
    [
        ("unschedulable within the timeout", unschedulable(TIMEOUT - 1)),
        ("scheduled, creating the container", pod("Pending", state=waiting("ContainerCreating"))),
        ("running", pod("Running", state=RUNNING)),
        ("just created, no status yet", pod("Pending")),
        (
            "a config error that may still resolve",
            pod("Pending", age_s=10, state=waiting("CreateContainerConfigError")),
        ),
    ],
)
def test_pods_on_their_way_are_not_ended(case, the_pod):
    assert classify(the_pod) is None, case


def test_a_container_that_cannot_be_created_ends_after_the_timeout():
    out = classify(
        pod("Pending", age_s=TIMEOUT + 5, state=waiting("CreateContainerConfigError", 'secret "x" not found'))
    )
    assert out.kind == "container_config" and "not found" in out.reason


def test_started_means_running_or_ended():
    assert is_started(pod("Running", state=RUNNING), "runner")
    assert is_started(pod("Failed", state=terminated(1, "Error")), "runner")
    assert not is_started(pod("Pending", state=waiting("ContainerCreating")), "runner")
    assert not is_started(unschedulable(5), "runner") and not is_started(None)
