"""The kubernetes backend: one GPU pod per evaluation, launched through dagster-k8s Pipes.

- settings.py: what an operator configures (namespace, image, volumes, node labels, timeouts)
- deadline.py: the pod's activeDeadlineSeconds from the protocol's limits
- manifests.py: every object the backend creates, built with the `kubernetes` client's models
- podsecurity.py: the Pod Security Standards' restricted profile as a checker
- outcome.py: how a pod ended (a pure function over a V1Pod) -> status and reason
- results.py: the results directory, its manifest, verification and atomic landing
- in_pod.py: the pod's entry point (the same harness, then the results manifest)
- launcher.py: create the objects, run the pod with PipesK8sClient, classify, land, clean up
"""
