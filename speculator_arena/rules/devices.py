"""The devices evaluations run on: the tag that holds a run to one, and which lists of them work.

Why a rule of its own: the queue starts runs per device (frontdoor/queue.py reads `ARENA_DEVICE`),
every launcher tags its runs with one, and the kubernetes backend pins a pod to its device's
node; all of them read the tag here, below them all.
"""

from __future__ import annotations

LOCAL_DEVICE = "local"  # the default device: on the kubernetes backend it pins no node
DEVICE_TAG = "arena/device"  # a Dagster run's device: no second run starts on it while one is in flight


def parse_devices(text: str | None) -> list[str]:
    """The comma-separated device names (`local` when none)."""
    return [d.strip() for d in (text or "").split(",") if d.strip()] or [LOCAL_DEVICE]


def devices_problem(names: list[str], backend: str) -> str | None:
    """Why the queue cannot use these devices, or None. More than one only on the kubernetes
    backend, where each is a GPU node (the pod is pinned to it): on one host two evaluations would
    count each other's CPU as foreign and void each other (SCORING.md "Host contention")."""
    if len(set(names)) != len(names):
        return f"ARENA_DEVICE names a device twice: {','.join(names)}"
    if len(names) > 1 and backend != "kubernetes":
        return (
            f"ARENA_DEVICE names {len(names)} devices on the {backend} backend: evaluations on one host count "
            "each other's CPU as foreign and void; name one device, or use the kubernetes backend (one GPU node each)"
        )
    return None
