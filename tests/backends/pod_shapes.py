"""Pods in the shapes the API server returns, built with the `kubernetes` client's models: how an
evaluation's pod looks on its way and at each of its ends (test_outcome.py classifies them;
test_launcher_api.py's recording server serves them)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from kubernetes import client as k8s

NOW = datetime(2026, 12, 1, 6, 0, tzinfo=UTC)
TIMEOUT = 900.0


def status(name, state):
    return k8s.V1ContainerStatus(
        name=name, image="img", image_id="", ready=state.running is not None, restart_count=0, state=state
    )


def pod(
    phase="Running",
    *,
    age_s=60.0,
    reason=None,
    message=None,
    conditions=(),
    state=None,
    engine=None,
    deadline=3600,
    now=NOW,
):
    """A pod created `age_s` before `now`; `state` is the runner container's, `engine` the
    engine sidecar's (an init container)."""
    statuses = [status("runner", state)] if state is not None else None
    return k8s.V1Pod(
        metadata=k8s.V1ObjectMeta(
            name="p", namespace="arena-evaluations", creation_timestamp=now - timedelta(seconds=age_s)
        ),
        spec=k8s.V1PodSpec(containers=[k8s.V1Container(name="runner")], active_deadline_seconds=deadline),
        status=k8s.V1PodStatus(
            phase=phase,
            reason=reason,
            message=message,
            conditions=list(conditions) or None,
            container_statuses=statuses,
            init_container_statuses=[status("engine", engine)] if engine is not None else None,
        ),
    )


def terminated(exit_code, reason, message=None):
    return k8s.V1ContainerState(
        terminated=k8s.V1ContainerStateTerminated(exit_code=exit_code, reason=reason, message=message)
    )


def waiting(reason, message=None):
    return k8s.V1ContainerState(waiting=k8s.V1ContainerStateWaiting(reason=reason, message=message))


RUNNING = k8s.V1ContainerState(running=k8s.V1ContainerStateRunning(started_at=NOW))


def unschedulable(age_s, now=NOW):
    return pod(
        "Pending",
        age_s=age_s,
        now=now,
        conditions=[
            k8s.V1PodCondition(
                type="PodScheduled",
                status="False",
                reason="Unschedulable",
                message="0/4 nodes are available: 4 Insufficient nvidia.com/gpu.",
            )
        ],
    )


def disruption(reason, message):
    return k8s.V1PodCondition(type="DisruptionTarget", status="True", reason=reason, message=message)


# Every end of the outcome table: (case, pod or None, kind, words of the reason).
ENDS = [
    ("succeeded", pod("Succeeded", state=terminated(0, "Completed")), "succeeded", "exited 0"),
    ("unschedulable past the timeout", unschedulable(TIMEOUT + 1), "unschedulable", "Insufficient nvidia.com/gpu"),
    (
        "image pull failure",
        pod("Pending", state=waiting("ImagePullBackOff", 'Back-off pulling image "r/x:1"')),
        "image_pull",
        "Back-off pulling image",
    ),
    (
        "image pull failure of the engine's sidecar",
        pod(
            "Pending",
            state=waiting("PodInitializing"),
            engine=waiting("ErrImagePull", 'failed to pull "r/x:1": not found'),
        ),
        "image_pull",
        "container engine",
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
            conditions=[disruption("EvictionByEvictionAPI", "Eviction API: evicting")],
        ),
        "evicted",
        "EvictionByEvictionAPI",
    ),
    (
        "preempted",
        pod(
            "Running",
            state=RUNNING,
            conditions=[disruption("PreemptionByScheduler", "Preempted by a pod of higher priority")],
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
            conditions=[disruption("DeletionByTaintManager", "Taint manager: deleting due to NoExecute taint")],
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
    (
        "a container that cannot be created, past the timeout",
        pod("Pending", age_s=TIMEOUT + 5, state=waiting("CreateContainerConfigError", 'secret "x" not found')),
        "container_config",
        "not found",
    ),
    (
        "the engine's sidecar crash-looping before the runner started, past the timeout",
        pod(
            "Pending",
            age_s=TIMEOUT + 5,
            state=waiting("PodInitializing"),
            engine=waiting("CrashLoopBackOff", "back-off 5m0s restarting failed container=engine"),
        ),
        "container_config",
        "container engine",
    ),
    ("pod vanished", None, "vanished", "disappeared"),
]
