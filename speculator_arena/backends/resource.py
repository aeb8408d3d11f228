"""The backend choice as a Dagster resource: `local` (default) or `kubernetes`.

`ARENA_BACKEND` sets the default kind; the kubernetes settings come from `ARENA_K8S_*`
variables (settings.py) unless set here. The `evaluation` asset calls `run`.
"""

from __future__ import annotations

import dagster as dg

from speculator_arena.backends import chosen


class EvaluationBackendResource(dg.ConfigurableResource):
    kind: str = ""  # local | kubernetes (default: ARENA_BACKEND, else local)
    namespace: str = ""
    image: str = ""
    artifacts_root: str = ""
    results_root: str = ""
    kubeconfig: str = ""
    kube_context: str = ""

    @property
    def backend(self) -> str:
        return chosen(self.kind)

    def settings(self):
        from speculator_arena.backends.kubernetes.settings import KubernetesSettings

        return KubernetesSettings.from_env(
            namespace=self.namespace,
            image=self.image,
            artifacts_root=self.artifacts_root,
            results_root=self.results_root,
            kubeconfig=self.kubeconfig,
            kube_context=self.kube_context,
        )

    def run(self, spec, home, context, progress=None) -> str:
        """Run the evaluation on the chosen backend; its final status."""
        if self.backend == "local":
            from speculator_arena.backends.local import run_local

            return run_local(spec, home, progress)
        from speculator_arena.backends.kubernetes.launcher import KubernetesLauncher

        return KubernetesLauncher(self.settings(), home, progress).run(spec, context)
