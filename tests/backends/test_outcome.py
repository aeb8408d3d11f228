"""Every way an evaluation's pod ends, as status objects of the shapes the API server returns,
built with the `kubernetes` client's models, classified by the pure function the launcher uses."""

from __future__ import annotations

import pytest

from speculator_arena.backends.kubernetes.outcome import classify_pod, is_started

from .pod_shapes import ENDS, NOW, RUNNING, TIMEOUT, pod, terminated, unschedulable, waiting


def classify(p):
    return classify_pod(p, now=NOW, unschedulable_timeout_s=TIMEOUT, container="runner")


@pytest.mark.parametrize("case, the_pod, kind, words", ENDS)
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
            "the engine's sidecar restarting, the runner not started yet",
            pod("Pending", age_s=10, state=waiting("PodInitializing"), engine=waiting("CrashLoopBackOff")),
        ),
        (
            "a config error that may still resolve",
            pod("Pending", age_s=10, state=waiting("CreateContainerConfigError")),
        ),
    ],
)
def test_pods_on_their_way_are_not_ended(case, the_pod):
    assert classify(the_pod) is None, case


def test_started_means_running_or_ended():
    assert is_started(pod("Running", state=RUNNING), "runner")
    assert is_started(pod("Failed", state=terminated(1, "Error")), "runner")
    assert not is_started(pod("Pending", state=waiting("ContainerCreating")), "runner")
    assert not is_started(unschedulable(5), "runner") and not is_started(None)
