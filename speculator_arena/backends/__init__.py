"""Where an evaluation runs: `local` (the default: the harness on this machine) or `kubernetes`
(the same harness in a GPU pod, its raw rows brought back whole through a results volume).

Both take the harness's `EvaluationSpec` unchanged. The Dagster resource `backend`
(resource.py, `EvaluationBackendResource.run`) is the one entry: the `evaluation` asset calls it,
and `arena evaluate --backend` chooses it (after `preflight` below).
"""

from __future__ import annotations

BACKENDS = ("local", "kubernetes")
DEFAULT_BACKEND = "local"


def check_backend(name: str) -> str:
    if name not in BACKENDS:
        raise ValueError(f"unknown backend {name!r}; backends: {', '.join(BACKENDS)}")
    return name


def chosen(name: str = "") -> str:
    """The backend `name` names, else `ARENA_BACKEND`'s, else local: what the resource runs on, so
    the refusals below are that backend's."""
    from speculator_arena import settings

    return check_backend(name or settings.get("ARENA_BACKEND") or DEFAULT_BACKEND)


def preflight(backend: str, spec, home) -> None:
    """The backend's own refusals, before the evaluation is queued (a refusal stores nothing)."""
    if chosen(backend) == "kubernetes":
        from speculator_arena.backends.kubernetes.launcher import KubernetesLauncher
        from speculator_arena.backends.resource import EvaluationBackendResource

        KubernetesLauncher(EvaluationBackendResource(kind="kubernetes").settings(), home).preflight(spec)
    else:
        from speculator_arena.runners.engines import missing_runtime
        from speculator_arena.runners.privileges import preflight as privileges
        from speculator_arena.runners.spec import resolve_engine_path, stock_engine_of

        # engines run unprivileged or not at all; a participant's only where the operator allows
        privileges(submission=bool(spec.submission_id) and not spec.is_reference)
        problem = missing_runtime(resolve_engine_path(stock_engine_of(spec)))
        if problem:  # the arena's own side cannot run here: say so before anything is stored
            raise FileNotFoundError(f"the stock engine {problem}")


def resume(wh, evaluation_id: str, progress=None) -> str:
    """`arena evaluate --resume ID`: an evaluation whose runner (or, in a pod, whose launcher)
    died. A kubernetes evaluation still `running` is the pod's: its launcher follows the pod it
    named to its end and lands or voids it (KubernetesLauncher.resume); anything else is the
    harness's (runners.harness.resume_dead: void, rows kept)."""
    import json

    from speculator_arena.rules.status import RUNNING
    from speculator_arena.runners.harness import resume_dead
    from speculator_arena.warehouse.evaluations import current_row

    row = current_row(wh, evaluation_id)
    prov = json.loads((row or {}).get("provenance") or "{}")
    if row is not None and row["status"] == RUNNING and prov.get("backend") == "kubernetes" and prov.get("pod"):
        from speculator_arena.backends.kubernetes.launcher import KubernetesLauncher
        from speculator_arena.backends.resource import EvaluationBackendResource

        settings = EvaluationBackendResource(kind="kubernetes").settings()
        return KubernetesLauncher(settings, wh.home, progress=progress).resume(evaluation_id)
    return resume_dead(wh, evaluation_id, progress=progress)
