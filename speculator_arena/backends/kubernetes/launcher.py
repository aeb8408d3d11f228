"""Launching one evaluation as a pod, from a Dagster asset, through dagster-k8s Pipes.

Order: refuse bad input before storing anything (paths the pod cannot see, no sealed target, a
pool that differs from the artifacts volume's); queue the evaluation in the warehouse as the
local backend does; create (or find) the namespace objects; name the pod, once, and run it with
dagster-k8s' Pipes client under that name (its progress and status arrive as Pipes messages
through the runner container's log); read how the pod ended (outcome.py); delete the pod
whatever happened; then land the results whole (results.py) or mark the evaluation void with the
reason (refunded). The results sub-directory is removed once its rows landed or the evaluation
is void.

Why the launcher names the pod: `PipesK8sClient.run()` (dagster-k8s 0.29.27) draws its own
name with `get_pod_name()`, a random suffix per call, and overrides any `base_pod_meta` name, so
a launcher that drew one beforehand watched, read and deleted a pod that never existed and left
the real one behind (seen against a real API server: ../shared/FACTS.md). `ArenaPipesK8sClient`
therefore runs the pod as dagster-k8s does (one Pipes session, the bootstrap variables in the
runner container, dagster-k8s' own waits and log reader) under the name it is given.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from contextlib import contextmanager, redirect_stdout
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from dagster import PipesClientCompletedInvocation, open_pipes_session
from dagster_k8s import PipesK8sClient
from dagster_k8s.client import DagsterKubernetesClient
from dagster_k8s.pipes import PipesK8sPodLogsMessageReader, get_pod_name
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException

from speculator_arena import settings
from speculator_arena.backends.kubernetes import manifests
from speculator_arena.backends.kubernetes.deadline import active_deadline_seconds
from speculator_arena.backends.kubernetes.outcome import PodOutcome, classify_pod, is_started
from speculator_arena.backends.kubernetes.results import ResultsRejected, land
from speculator_arena.backends.kubernetes.settings import KubernetesSettings
from speculator_arena.checkpoints.prepare import checkpoint_dir
from speculator_arena.errors import ArenaError
from speculator_arena.pools.layout import pool_root, split_path
from speculator_arena.protocol import load_protocol
from speculator_arena.rules.devices import DEVICE_TAG, LOCAL_DEVICE
from speculator_arena.rules.status import FINAL, RUNNING, VOID
from speculator_arena.runners.privileges import ISOLATION_SIDECAR
from speculator_arena.runners.queued import queue
from speculator_arena.runners.spec import EvaluationSpec
from speculator_arena.runners.status import EvaluationStateError, write_status
from speculator_arena.sealed.store import open_for_pods, sealed_root
from speculator_arena.warehouse.store import Warehouse


class PodEnded(ArenaError):
    """The pod ended (or can never start) before its logs could be followed."""

    def __init__(self, outcome: PodOutcome):
        super().__init__(outcome.reason)
        self.outcome = outcome


def read_pod(core: k8s.CoreV1Api, namespace: str, name: str) -> k8s.V1Pod | None:
    try:
        return core.read_namespaced_pod(name, namespace)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def _follow(core, namespace: str, name: str, s: KubernetesSettings, *, until_started: bool, timeout_s=None, sleep):
    """Poll the pod: with `until_started`, None once the runner runs (or ran) and the outcome of
    a pod that cannot; else its final outcome, or None after `timeout_s`."""
    waited, t0 = False, time.monotonic()
    while True:
        pod = read_pod(core, namespace, name)
        if pod is None and not waited:
            sleep(s.poll_interval_s)  # not visible yet right after its creation
            waited = True
            continue
        outcome = classify_pod(
            pod,
            now=datetime.now(UTC),
            unschedulable_timeout_s=s.unschedulable_timeout_s,
            container=manifests.RUNNER_CONTAINER,
        )
        if outcome is not None and (not outcome.ok or not until_started):
            return outcome
        if until_started and is_started(pod, manifests.RUNNER_CONTAINER):
            return None
        if timeout_s is not None and time.monotonic() - t0 > timeout_s:
            return None
        sleep(s.poll_interval_s)


def wait_until_started(core: k8s.CoreV1Api, namespace: str, name: str, s: KubernetesSettings, sleep=time.sleep) -> None:
    """Return once the runner container runs (or ran); raise PodEnded for a pod that cannot."""
    outcome = _follow(core, namespace, name, s, until_started=True, sleep=sleep)
    if outcome is not None:
        raise PodEnded(outcome)


def wait_until_ended(
    core: k8s.CoreV1Api, namespace: str, name: str, s: KubernetesSettings, timeout_s: float, sleep=time.sleep
) -> PodOutcome | None:
    """How the pod ended, by the outcome table (outcome.py); None when it has not after `timeout_s`.

    The arena's and not dagster-k8s' wait for the end: dagster-k8s waits for a terminated
    container or a deleted pod, so a preempted pod or one on a lost node, whose container the
    API still shows running, would hold the launcher until the pod is deleted."""
    return _follow(core, namespace, name, s, until_started=False, timeout_s=timeout_s, sleep=sleep)


class BoundedLogReader(PipesK8sPodLogsMessageReader):
    """dagster-k8s' reader of the runner's log (Pipes messages), whose every read of the stream
    waits at most `read_timeout_s` for a byte, then reconnects from the last line it saw (its own
    retry, deduplicated by timestamp). Why: it follows the log before the launcher watches the
    pod's end, with an hour's timeout by default, and a stream left open after the container
    ended (seen with the cluster tests' evicted, deadlined and killed pods in a whole-suite run)
    held the launcher that long; a reconnect to an ended container's log returns what is left
    and closes, and to a deleted pod fails, which the launcher reads as the pod's end."""

    def __init__(self, read_timeout_s: float, **kwargs):
        super().__init__(**kwargs)
        self.read_timeout_s = read_timeout_s

    def _get_consume_logs_request_timeout(self) -> int | None:
        return max(1, int(self.read_timeout_s))


class ArenaPipesK8sClient(PipesK8sClient):
    """dagster-k8s' Pipes client, running the pod under the name the launcher gave it
    (`run_pod`), with the arena's own watch over the pod's start and end: dagster-k8s waits
    hours for a pod no node can take; the arena voids it after `unschedulable_timeout_s`, and an
    image that cannot be pulled at once."""

    def __init__(self, settings: KubernetesSettings, **kwargs):
        super().__init__(**kwargs)
        self.settings = settings

    @contextmanager
    def consume_pod_logs(self, context, client, namespace, pod_name, **kwargs):
        wait_until_started(client.core_api, namespace, pod_name, self.settings)
        with super().consume_pod_logs(context, client, namespace, pod_name, **kwargs):
            yield

    def run_pod(self, *, context, pod: dict, pod_wait_timeout: float) -> PipesClientCompletedInvocation:
        """Create `pod` (the API's JSON, named) and follow it to its end under its own name.

        `PipesK8sClient.run` less its own naming, its wait for the end (`wait_until_ended`) and
        its delete (the launcher deletes the pod whatever happened). Only the runner container
        gets the Pipes variables, and only its log is read (the API server's default container:
        the engine's is an init container), so an engine cannot speak Pipes. The pod's log lines
        that are not Pipes messages go to stderr: stdout is the command's, and `arena evaluate`
        prints its summary there."""
        self._load_k8s_config()
        client = DagsterKubernetesClient.production_client()
        name, namespace = pod["metadata"]["name"], pod["metadata"]["namespace"]
        ignore = {c["name"] for c in pod["spec"].get("initContainers") or []}
        with open_pipes_session(
            context=context, context_injector=self.context_injector, message_reader=self.message_reader
        ) as session:
            body = with_env(pod, manifests.RUNNER_CONTAINER, {**session.get_bootstrap_env_vars(), **(self.env or {})})
            client.core_api.create_namespaced_pod(namespace, body)
            with redirect_stdout(sys.stderr):
                with self.consume_pod_logs(
                    context=context, client=client, namespace=namespace, pod_name=name, ignore_containers=ignore
                ):
                    wait_until_ended(client.core_api, namespace, name, self.settings, pod_wait_timeout)
        return PipesClientCompletedInvocation(session)


def with_env(pod: dict, container: str, env: dict[str, str]) -> dict:
    """`pod` with `env` added to one container's environment (a copy)."""
    out = json.loads(json.dumps(pod))
    for c in out["spec"]["containers"]:
        if c["name"] == container:
            c["env"] = [*(c.get("env") or []), *({"name": k, "value": v} for k, v in env.items())]
    return out


class KubernetesLauncher:
    def __init__(self, settings: KubernetesSettings, home, progress=None):
        self.s = settings
        self.wh = Warehouse(home)
        self.say = progress or (lambda msg: print(msg, file=sys.stderr, flush=True))
        self._core = None

    # ---- the API -------------------------------------------------------------------------
    def _load_config(self) -> None:
        from kubernetes import config

        if self.s.kubeconfig or self.s.kube_context or not settings.get("KUBERNETES_SERVICE_HOST"):
            config.load_kube_config(config_file=self.s.kubeconfig or None, context=self.s.kube_context or None)
        else:
            config.load_incluster_config()

    @property
    def core(self) -> k8s.CoreV1Api:
        if self._core is None:
            self._load_config()
            self._core = k8s.CoreV1Api()
        return self._core

    def ensure_namespace_objects(self) -> None:
        """Create the namespace, its quota and its network policy, or bring them up to date;
        check that the two volumes exist (the operator provisions storage)."""
        s = self.s
        core = self.core  # loads the configuration the networking client uses too
        net = k8s.NetworkingV1Api()
        create_patch = {
            "Namespace": (lambda o: core.create_namespace(o), lambda o: core.patch_namespace(s.namespace, o)),
            "ResourceQuota": (
                lambda o: core.create_namespaced_resource_quota(s.namespace, o),
                lambda o: core.patch_namespaced_resource_quota(o.metadata.name, s.namespace, o),
            ),
            "NetworkPolicy": (
                lambda o: net.create_namespaced_network_policy(s.namespace, o),
                lambda o: net.patch_namespaced_network_policy(o.metadata.name, s.namespace, o),
            ),
        }
        for obj in manifests.namespace_objects(s):
            create, patch = create_patch[obj.kind]
            try:
                create(obj)
            except ApiException as exc:
                if exc.status != 409:
                    raise
                patch(obj)
        for claim in (s.artifacts_claim, s.results_claim):
            try:
                core.read_namespaced_persistent_volume_claim(claim, s.namespace)
            except ApiException as exc:
                if exc.status == 404:
                    raise RuntimeError(
                        f"no PersistentVolumeClaim {claim} in namespace {s.namespace}: "
                        "apply `arena k8s manifests` (volumes.yaml) or create it"
                    ) from None
                raise

    # ---- one evaluation ---------------------------------------------------------------------
    def preflight(self, spec: EvaluationSpec) -> EvaluationSpec:
        """Bad input fails here, before anything is stored: the spec as the pod sees it."""
        pod_spec = manifests.pod_spec_of(self.with_target(spec), self.s)
        ours = pool_root(spec.task_id, self.wh.home)
        theirs = pool_root(spec.task_id, self.s.artifacts_root)  # the artifacts volume is laid out like a home
        for rel in (split_path(spec.split) / "manifest.json", "probes.jsonl"):
            a, b = ours / rel, theirs / rel
            if not b.is_file() or not a.is_file() or a.read_bytes() != b.read_bytes():
                raise ValueError(
                    f"the artifacts volume's pool {b} is missing or differs from {a}: "
                    "copy the built pools to the artifacts volume"
                )
        if any(sealed_root(p, self.wh.home) for p in (spec.engine, spec.speculator)):
            open_for_pods(self.wh.home)  # the pods' runner reaches a submission's sealed inputs
        return pod_spec

    def with_target(self, spec: EvaluationSpec) -> EvaluationSpec:
        """The spec with its sealed target: the one it names, or the task's prepared on the
        artifacts volume (`checkpoints/<task>/`, laid out like a home: `ARENA_HOME=<artifacts root>
        arena checkpoints prepare`). Why a default: a submission names no target (the task fixes
        it), and the pod has no network to prepare one, so without it the queue could run no
        submission on this backend."""
        if spec.target:
            return spec
        sealed = checkpoint_dir(spec.task_id, self.s.artifacts_root)
        if not (sealed / "manifest.json").is_file():
            raise ValueError(
                f"the kubernetes backend needs a sealed target on the artifacts volume: none at {sealed} "
                "(prepare it there, or pass --target; the pod has no network to prepare one)"
            )
        return replace(spec, target=str(sealed))

    def run(self, spec: EvaluationSpec, context) -> str:
        """Run the evaluation in a pod from a Dagster asset's `context`; the final status."""
        task = load_protocol(spec.protocol_version).task(spec.task_id)
        pod_spec = self.preflight(spec)
        row = queue(spec, self.wh.home)  # the row before the pod starts (the pod's runner writes its own)
        if row["status"] in FINAL or row["status"] == RUNNING:
            raise EvaluationStateError(f"evaluation {spec.evaluation_id} is already {row['status']}")
        results = Path(self.s.results_root) / spec.evaluation_id
        if results.exists() and any(results.iterdir()):
            raise EvaluationStateError(f"{results} already holds results: a pod of {spec.evaluation_id} ran before")
        results.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            os.chown(results, self.s.runner_uid, self.s.runner_uid)
        else:
            os.chmod(results, 0o777)  # the pod's user must write it; the volume is the arena's alone
        self.ensure_namespace_objects()
        pod_name = self.name_pod(context)
        where = {
            "backend": "kubernetes",
            "namespace": self.s.namespace,
            "pod": pod_name,
            "engine_isolation": ISOLATION_SIDECAR,
        }
        pod = manifests.evaluation_pod(pod_spec, task, self.s, name=pod_name, node=self.device_node(context))
        where["active_deadline_seconds"] = pod.spec.active_deadline_seconds  # what a resumed launcher waits
        row = write_status(self.wh, row, RUNNING, provenance=where)
        outcome = self.run_pod(context, pod, task)
        self.say(f"[evaluate {spec.evaluation_id}] pod {pod_name}: {outcome.kind}: {outcome.reason}")
        return self.conclude(row, outcome, results, where)["status"]

    @staticmethod
    def device_node(context) -> str | None:
        """The GPU node the run's device names (its `arena/device` tag, `ARENA_DEVICE`): the pod
        is pinned there, so one evaluation per device is one per node. `local`, the default
        device, pins nothing (any node with the task's GPU)."""
        device = context.run.tags.get(DEVICE_TAG)
        return device if device and device != LOCAL_DEVICE else None

    @staticmethod
    def name_pod(context) -> str:
        """The pod's one name, drawn once per evaluation, in dagster-k8s' form (run id and step)."""
        return get_pod_name(context.run.run_id, context.op_execution_context.op.name)

    def conclude(self, row: dict, outcome: PodOutcome, results: Path, where: dict) -> dict:
        """After the pod is gone: land its results whole, or void the evaluation with the reason
        (nothing landed); the results sub-directory is removed either way. The final row."""
        eid = row["evaluation_id"]
        try:
            if outcome.ok:
                try:
                    return land(
                        self.wh, results, eid, launcher_row=row, provenance={**where, "pod_outcome": outcome.kind}
                    )
                except ResultsRejected as exc:
                    reason = f"results rejected: {exc.reason}"
            else:
                reason = f"pod {outcome.kind}: {outcome.reason}"
            return write_status(self.wh, row, VOID, void_reason=reason[:500], provenance={"pod_outcome": outcome.kind})
        finally:
            shutil.rmtree(results, ignore_errors=True)

    def run_pod(self, context, pod: k8s.V1Pod, task) -> PodOutcome:
        """Run the named pod to its end from a Dagster asset's `context`, read how it ended and
        delete it: every call names `pod`'s own name."""
        body = manifests.to_dict(pod)
        pipes = ArenaPipesK8sClient(
            self.s,
            kubeconfig_file=self.s.kubeconfig or None,
            kube_context=self.s.kube_context or None,
            poll_interval=self.s.poll_interval_s,
            message_reader=BoundedLogReader(self.s.log_read_timeout_s),
        )
        name, ns = body["metadata"]["name"], self.s.namespace
        outcome, error = None, None
        try:
            invocation = pipes.run_pod(
                context=context,
                pod=body,
                pod_wait_timeout=(pod.spec.active_deadline_seconds or active_deadline_seconds(task))
                + self.s.unschedulable_timeout_s,
            )
            for message in invocation.get_custom_messages():
                self.say(f"[pod {name}] {json.dumps(message, default=str)}")
        except PodEnded as exc:
            outcome = exc.outcome
        except Exception as exc:  # dagster-k8s raises on a failed container; the pod says why
            error = exc
        finally:
            try:
                final = read_pod(self.core, ns, name)
                outcome = outcome or classify_pod(
                    final,
                    now=datetime.now(UTC),
                    unschedulable_timeout_s=self.s.unschedulable_timeout_s,
                    container=manifests.RUNNER_CONTAINER,
                )
            finally:
                self.delete_pod(name)
        if outcome is None:
            outcome = PodOutcome("runner_failed", VOID, f"the launcher stopped following the pod: {error}"[:500])
        return outcome

    def delete_pod(self, name: str) -> None:
        """Delete the pod (grace 0: the kubelet stops whatever still runs), then release the
        arena's finalizer (manifests.OUTCOME_FINALIZER), which held the ended pod for the
        launcher to read; the API server then removes it."""
        try:
            pod = self.core.delete_namespaced_pod(name, self.s.namespace, grace_period_seconds=0)
        except ApiException as exc:
            if exc.status != 404:
                raise
            return
        meta = getattr(pod, "metadata", None)
        if meta is not None and manifests.OUTCOME_FINALIZER in (meta.finalizers or []):
            release = {"metadata": {"$deleteFromPrimitiveList/finalizers": [manifests.OUTCOME_FINALIZER]}}
            try:
                self.core.patch_namespaced_pod(name, self.s.namespace, release)
            except ApiException as exc:
                if exc.status != 404:
                    raise

    def resume(self, evaluation_id: str, sleep=time.sleep) -> str:
        """`arena evaluate --resume` of an evaluation whose launcher died while its pod ran: find
        the pod it named, wait for its end (no longer than the pod's deadline allows), delete it,
        and land its results whole or void the evaluation by how the pod ended, as `run` would
        have. A pod that is gone is `vanished` (void). The final status."""
        from speculator_arena.warehouse.evaluations import current_row

        row = current_row(self.wh, evaluation_id)
        prov = json.loads(row.get("provenance") or "{}")
        name, ns = prov["pod"], prov.get("namespace") or self.s.namespace
        where = {
            k: prov[k]
            for k in ("backend", "namespace", "pod", "engine_isolation", "active_deadline_seconds")
            if k in prov
        }
        task = load_protocol(row["protocol_version"]).task(row["task_id"])
        self.say(f"[evaluate {evaluation_id}] resuming: following pod {name} in {ns}")
        s = replace(self.s, namespace=ns)
        outcome = wait_until_ended(
            self.core,
            ns,
            name,
            s,
            (prov.get("active_deadline_seconds") or active_deadline_seconds(task)) + s.unschedulable_timeout_s,
            sleep=sleep,
        )
        if outcome is None:
            outcome = PodOutcome("runner_failed", VOID, "the pod did not end within its deadline after a resume")
        self.delete_pod(name)
        self.say(f"[evaluate {evaluation_id}] pod {name}: {outcome.kind}: {outcome.reason}")
        return self.conclude(row, outcome, Path(self.s.results_root) / evaluation_id, where)["status"]
