"""How an evaluation's pod ended, as a status and a reason: a pure function over a `V1Pod`.

The launcher polls the pod and calls `classify_pod` each time; `None` means it is still on its
way (pending within the unschedulable timeout, pulling its image, running). Every other answer
is final: `succeeded` (the container exited 0: the results volume holds the runner's results,
which results.py verifies) or `void` with the reason (the arena's side failed: refunded, nothing
scored). The shapes are those the API server returns: pod phase and reason, the PodScheduled
and DisruptionTarget conditions, the runner container's terminated state, and the waiting state
of every container (the engine's sidecar is an init container: while its image cannot be pulled
the runner only waits, `PodInitializing`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from kubernetes import client as k8s

from speculator_arena.rules.status import VOID

IMAGE_PULL_FAILURES = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull")
CONTAINER_CONFIG_FAILURES = ("CreateContainerConfigError", "CreateContainerError", "RunContainerError")
NODE_LOSS_DISRUPTIONS = ("DeletionByTaintManager", "DeletionByPodGC")


@dataclass(frozen=True)
class PodOutcome:
    kind: str  # succeeded | unschedulable | image_pull | container_config | oom_killed | evicted
    # | preempted | deadline_exceeded | node_lost | runner_failed | vanished
    status: str  # succeeded | void
    reason: str

    @property
    def ok(self) -> bool:
        return self.status == "succeeded"


def _void(kind: str, reason: str) -> PodOutcome:
    return PodOutcome(kind, VOID, reason[:500])


def _seconds_since(ts: datetime | None, now: datetime) -> float:
    return (now - ts).total_seconds() if ts is not None else 0.0


def _condition(pod: k8s.V1Pod, kind: str) -> k8s.V1PodCondition | None:
    return next((c for c in (pod.status.conditions or []) if c.type == kind), None)


def _container(pod: k8s.V1Pod, name: str | None) -> k8s.V1ContainerStatus | None:
    statuses = pod.status.container_statuses or []
    return next((c for c in statuses if name is None or c.name == name), None)


def _waiting(pod: k8s.V1Pod, reasons: tuple[str, ...]) -> tuple[str, k8s.V1ContainerStateWaiting] | None:
    """(container, waiting state) of the first container, init containers first, waiting for one
    of `reasons`."""
    for c in [*(pod.status.init_container_statuses or []), *(pod.status.container_statuses or [])]:
        w = c.state.waiting if c.state else None
        if w is not None and w.reason in reasons:
            return c.name, w
    return None


def classify_pod(
    pod: k8s.V1Pod | None, *, now: datetime, unschedulable_timeout_s: float, container: str | None = None
) -> PodOutcome | None:
    """The pod's final outcome, or None while it may still succeed.

    `pod` None: the API server no longer has it (deleted by the node lifecycle controller after
    its node was lost, or by someone else) before the launcher saw it end.
    """
    if pod is None:
        return _void("vanished", "the pod disappeared before it finished (node lost or pod deleted)")
    st = pod.status or k8s.V1PodStatus()
    phase, why, message = st.phase, st.reason or "", (st.message or "").strip()
    cs = _container(pod, container)
    term = cs.state.terminated if cs and cs.state else None

    disruption = _condition(pod, "DisruptionTarget")
    if disruption is not None and disruption.status == "True":
        if disruption.reason in NODE_LOSS_DISRUPTIONS:
            return _void("node_lost", f"node lost: {disruption.reason}: {disruption.message or ''}".strip())
        if disruption.reason == "PreemptionByScheduler":
            return _void("preempted", f"preempted by the scheduler: {disruption.message or ''}".strip())
        if phase in ("Failed", "Succeeded") or term is not None:
            return _void("evicted", f"evicted ({disruption.reason}): {message or disruption.message or ''}".strip())
    if phase == "Unknown" or why == "NodeLost":
        return _void("node_lost", f"node lost: {message or 'the pod state could not be obtained from its node'}")
    if why == "DeadlineExceeded":
        return _void(
            "deadline_exceeded",
            f"ran past activeDeadlineSeconds ({pod.spec.active_deadline_seconds} s): {message}".strip(),
        )
    if why == "Evicted":
        return _void("evicted", f"evicted: {message}")
    if why in ("Shutdown", "Terminated", "NodeShutdown"):
        return _void("node_lost", f"node shut down: {message}")
    if term is not None:
        if term.reason == "OOMKilled":
            return _void("oom_killed", f"the runner container was OOMKilled (exit code {term.exit_code})")
        if term.exit_code == 0 and phase != "Failed":
            return PodOutcome("succeeded", "succeeded", "the runner exited 0")
        detail = (term.message or "").strip()
        return _void(
            "runner_failed",
            f"the runner failed (exit code {term.exit_code}, {term.reason})" + (f": {detail}" if detail else ""),
        )
    if phase == "Failed":
        return _void("runner_failed", f"the pod failed: {why} {message}".strip())
    if phase == "Succeeded":
        return PodOutcome("succeeded", "succeeded", "the pod succeeded")
    pull = _waiting(pod, IMAGE_PULL_FAILURES)
    if pull is not None:
        who, w = pull
        return _void("image_pull", f"image pull failure ({w.reason}, container {who}): {w.message or ''}".strip())
    # The engine's sidecar restarts when it fails; crash-looping before the runner could start,
    # it keeps the pod from ever running.
    config = _waiting(pod, CONTAINER_CONFIG_FAILURES) or (
        None if is_started(pod, container) else _waiting(pod, ("CrashLoopBackOff",))
    )
    if config is not None:
        who, w = config
        waited = _seconds_since(pod.metadata.creation_timestamp, now)
        if waited > unschedulable_timeout_s:
            return _void(
                "container_config",
                f"the container {who} could not be created for {waited:.0f} s ({w.reason}): {w.message or ''}".strip(),
            )
    scheduled = _condition(pod, "PodScheduled")
    if phase == "Pending" and scheduled is not None and scheduled.status == "False":
        waited = _seconds_since(pod.metadata.creation_timestamp, now)
        if waited > unschedulable_timeout_s:
            return _void(
                "unschedulable",
                f"unschedulable for {waited:.0f} s ({scheduled.reason}): {scheduled.message or ''}".strip(),
            )
    return None


def is_started(pod: k8s.V1Pod | None, container: str | None = None) -> bool:
    """Whether the runner container has started (running or already ended): from then on the
    pod's logs (the Pipes messages) can be followed."""
    cs = _container(pod, container) if pod is not None and pod.status else None
    return bool(cs and cs.state and (cs.state.running or cs.state.terminated))
