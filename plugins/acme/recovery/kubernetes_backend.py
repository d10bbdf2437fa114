"""Recovery on Kubernetes: the job's pods, cordon + taint of a node, check pods, and the restarted pods.

A training job is the set of pods labelled ``acme.io/job-id=<job_id>`` in the recovery namespace
(``ACME_RECOVERY_NAMESPACE``), one per node, ranked by their ``acme.io/rank`` label. A crashed
job's pods stay (phase ``Failed``) until recovery replaces them, so they say where the job ran and
how to start it again.

Taking a node out is one patch of the Node: ``spec.unschedulable = true`` (what ``kubectl cordon``
does) and a ``NoSchedule`` taint ``<ACME_RECOVERY_TAINT_KEY>=<recovery id>`` (so that pods which
tolerate unschedulable nodes, e.g. DaemonSet-like GPU jobs, stay away too), with the reason as an
annotation. ``NoSchedule``, not ``NoExecute``: evicting other tenants' pods running on the node is
a person's decision. The taints list has no merge key, so the patch carries the node's existing
taints plus ours.

The restart creates one pod per rank from the crashed pods' specs, with the resume variables
(``RestartPlan.environment``), no ``nodeName`` (the scheduler places them) and a required node
affinity that excludes the cordoned nodes. Pod names derive from the job and the recovery id, so a
repeated restart meets ``409 AlreadyExists`` and creates nothing.

The check worlds run as pods through ``acme_airflow.gpu_pod.CheckPodOperator``; ``check_pod_specs``
says what each rank's pod runs and where.

Validating a cordoned node (``acme.recovery.validation``) runs one pod pinned to it (``nodeName``, which
bypasses the scheduler; it tolerates our taint and ``unschedulable``) with the node's GPUs, running
``acme.recovery.node_selftest.node_program`` in the check image; its log is the measurement. The pod's
name derives from the validation id and the node, so a retried task finds the pod it started. Returning
the node: ``spec.unschedulable = false`` and our taint removed (other taints stay).
"""

from __future__ import annotations

import copy
import hashlib
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from acme.errors import AcmeError, InputError
from acme.recovery.backend import JobInfo, RestartPlan, UnknownJobError
from acme.recovery.node_selftest import node_program, read_node_output, unmeasured

if TYPE_CHECKING:
    from acme.recovery.localize import WorldResult
    from acme.recovery.node_selftest import NodeMeasurements, ValidationSpec
    from acme.settings import RecoverySettings

JOB_LABEL = "acme.io/job-id"
RANK_LABEL = "acme.io/rank"
REASON_ANNOTATION = "acme.io/cordon-reason"
CHECK_PORT = 29400
"""Rendezvous port on the world's first node (the check pods use the host network)."""


class KubernetesApiError(AcmeError):
    """The Kubernetes API refused or failed a call recovery needed: nothing was decided on it."""


def _api_call(what: str, call: Any, *args: Any, **kwargs: Any) -> Any:
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    try:
        return call(*args, **kwargs)
    except ApiException as exc:
        raise KubernetesApiError(f"Kubernetes API: {what} failed: HTTP {exc.status} {exc.reason}") from exc
    except (HTTPError, OSError) as exc:
        raise KubernetesApiError(f"Kubernetes API: {what} failed: {exc}") from exc


def _short_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def check_pod_name(check_id: str, round_number: int, world: Sequence[str], rank: int) -> str:
    """A pod name, unique per check, round, world and rank, within Kubernetes' 63 characters."""
    digest = _short_hash(f"{check_id}|{round_number}|{'|'.join(world)}")
    return f"acme-check-r{round_number}-{digest}-{rank}"


def check_pod_specs(
    world: Sequence[str], round_number: int, check_id: str, settings: RecoverySettings
) -> list[dict[str, Any]]:
    """What the pod of each rank of ``world`` runs and where: name, node, environment, arguments.

    Rank 0 listens on its node's address (host network), so the others reach it by node name.
    """
    world = list(world)
    specs = []
    for rank, node in enumerate(world):
        specs.append(
            {
                "name": check_pod_name(check_id, round_number, world, rank),
                "node": node,
                "rank": rank,
                "env": {
                    "RANK": str(rank),
                    "WORLD_SIZE": str(len(world)),
                    "LOCAL_RANK": "0",
                    "MASTER_ADDR": world[0],
                    "MASTER_PORT": str(CHECK_PORT),
                    "ACME_NODE_NAME": node,
                    "ACME_CHECK_WORLD": ",".join(world),  # for people reading the pod, and test fakes
                },
                "arguments": [
                    "--timeout-s",
                    f"{settings.check_timeout_s:g}",
                    "--node",
                    node,
                    *settings.check_args,
                ],
                "labels": {
                    "acme.io/check-id": check_id[:63],
                    "acme.io/round": str(round_number),
                    "acme.io/node": node,
                    RANK_LABEL: str(rank),
                },
            }
        )
    return specs


def validation_pod(node: str, spec: ValidationSpec, settings: RecoverySettings) -> dict[str, Any]:
    """The pod that validates ``node``: pinned to it, tolerating the cordon, with ``spec.ranks`` GPUs."""
    name = f"acme-validate-{_short_hash(f'{spec.validation_id}|{node}')}"
    program = node_program(spec, node, "python", "/opt/acme/allgather_check.py")
    tolerations = [
        {"key": settings.taint_key, "operator": "Exists", "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
    ]
    container = {
        "name": "validate",
        "image": settings.check_image,
        "command": program,
        "env": [{"name": "ACME_NODE_NAME", "value": node}],
        "resources": {"limits": {"nvidia.com/gpu": str(spec.ranks)}},
        "securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}},  # dcgmi diag reads GPU counters
    }
    labels = {"acme.io/validation": spec.validation_id[:63], "acme.io/node": node[:63]}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": settings.namespace, "labels": labels},
        "spec": {
            "nodeName": node,
            "restartPolicy": "Never",
            "tolerations": tolerations,
            "containers": [container],
        },
    }


class KubernetesBackend:
    """Cordon, taint and restart through the Kubernetes API (``kubernetes.client.CoreV1Api``)."""

    name = "kubernetes"
    poll_s = 2.0
    """Seconds between two reads of a validation pod's phase."""

    def __init__(self, settings: RecoverySettings, core_v1: Any = None):
        self.settings = settings
        if core_v1 is None:
            from kubernetes import client, config

            config.load_kube_config()
            core_v1 = client.CoreV1Api()
        self.api = core_v1

    def describe_job(self, job_id: str) -> JobInfo:
        pods = _api_call(
            f"listing the pods of job {job_id}",
            self.api.list_namespaced_pod,
            self.settings.namespace,
            label_selector=f"{JOB_LABEL}={job_id}",
        ).items
        if not pods:
            raise UnknownJobError(
                f"job {job_id}",
                f"no pod labelled {JOB_LABEL}={job_id} in namespace {self.settings.namespace}",
            )

        def rank(pod: Any) -> int:
            raw = (pod.metadata.labels or {}).get(RANK_LABEL, "")
            return int(raw) if raw.isdigit() else 1 << 30

        pods = sorted(pods, key=lambda p: (rank(p), p.metadata.name))
        nodes = [p.spec.node_name for p in pods if p.spec.node_name]
        if not nodes:
            raise InputError(f"job {job_id}", "none of its pods was ever scheduled on a node")
        serialize = self.api.api_client.sanitize_for_serialization
        templates = [serialize(p) for p in pods]
        return JobInfo(job_id, tuple(dict.fromkeys(nodes)), {"pods": templates})

    def run_world(self, world: list[str], round_number: int, check_id: str) -> WorldResult:
        raise NotImplementedError(
            "on Kubernetes the check worlds run as pods through acme_airflow.gpu_pod.CheckPodOperator"
        )

    def _read_node(self, node: str) -> Any:
        return _api_call(f"reading node {node}", self.api.read_node, node)

    def cordoned(self, nodes: Sequence[str]) -> set[str]:
        return {node for node in nodes if self._read_node(node).spec.unschedulable}

    def cordon(self, node: str, reason: str) -> dict[str, Any]:
        current = self._read_node(node)
        taints = [self.api.api_client.sanitize_for_serialization(t) for t in (current.spec.taints or [])]
        ours = {"key": self.settings.taint_key, "value": "true", "effect": "NoSchedule"}
        has_taint = any(t.get("key") == ours["key"] and t.get("effect") == "NoSchedule" for t in taints)
        if current.spec.unschedulable and has_taint:
            return {"node": node, "already_cordoned": True, "backend": self.name}
        body = {
            "metadata": {"annotations": {REASON_ANNOTATION: reason[:1000]}},
            "spec": {"unschedulable": True, "taints": taints if has_taint else [*taints, ours]},
        }
        _api_call(f"cordoning node {node}", self.api.patch_node, node, body)
        return {"node": node, "already_cordoned": False, "backend": self.name, "taint": ours}

    def uncordon(self, node: str, reason: str) -> dict[str, Any]:
        current = self._read_node(node)
        taints = [self.api.api_client.sanitize_for_serialization(t) for t in (current.spec.taints or [])]
        kept = [t for t in taints if t.get("key") != self.settings.taint_key]
        if not current.spec.unschedulable and len(kept) == len(taints):
            return {"node": node, "already_uncordoned": True, "backend": self.name}
        body = {
            "metadata": {"annotations": {REASON_ANNOTATION: None, "acme.io/uncordon-reason": reason[:1000]}},
            "spec": {"unschedulable": False, "taints": kept},
        }
        _api_call(f"uncordoning node {node}", self.api.patch_node, node, body)
        return {"node": node, "already_uncordoned": False, "backend": self.name}

    def run_validation(self, node: str, spec: ValidationSpec) -> NodeMeasurements:
        pod = validation_pod(node, spec, self.settings)
        name, namespace = pod["metadata"]["name"], self.settings.namespace
        self._create_unless_there(pod)
        deadline = time.monotonic() + self.settings.pod_startup_timeout_s + spec.timeout_s * 3 + 60
        deadline += 3600 if spec.dcgm_level else 0
        phase = ""
        while time.monotonic() < deadline:
            phase = _api_call(
                f"reading pod {name}", self.api.read_namespaced_pod, name, namespace
            ).status.phase
            if phase in ("Succeeded", "Failed"):
                break
            time.sleep(self.poll_s)
        else:
            self._delete_pod(name)
            return unmeasured(node, self.name, f"validation pod {name} did not finish (last phase {phase})")
        # Raw bytes: with its default decoding the client json-loads a log that is one JSON document.
        response = _api_call(
            f"reading the log of pod {name}", self.api.read_namespaced_pod_log, name, namespace,
            container="validate", _preload_content=False,
        )  # fmt: skip
        log = response.data.decode("utf-8", errors="replace")
        self._delete_pod(name)
        measured = read_node_output(log, node, self.name, spec.dcgm_level)
        if measured.problem:
            return unmeasured(node, self.name, f"pod {name} ({phase}): {measured.problem}")
        return measured

    def _create_unless_there(self, pod: dict[str, Any]) -> None:
        from kubernetes.client.exceptions import ApiException

        name = pod["metadata"]["name"]
        try:
            _api_call(f"creating pod {name}", self.api.create_namespaced_pod, self.settings.namespace, pod)
        except KubernetesApiError as exc:
            cause = exc.__cause__
            if not (isinstance(cause, ApiException) and cause.status == 409):
                raise

    def _delete_pod(self, name: str) -> None:
        _api_call(f"deleting pod {name}", self.api.delete_namespaced_pod, name, self.settings.namespace)

    def restart_pods(self, job: JobInfo, plan: RestartPlan) -> list[dict[str, Any]]:
        """The pods of the restarted job (manifests as dicts), one per rank of the crashed job."""
        templates = job.spec.get("pods") or []
        if not templates:
            raise InputError(f"job {job.job_id}", "no pod specs to restart it from")
        tag = _short_hash(plan.recovery_id)
        extra_env = [{"name": k, "value": v} for k, v in plan.environment().items()]
        pods = []
        for index, template in enumerate(templates):
            spec = copy.deepcopy(template.get("spec") or {})
            spec.pop("nodeName", None)
            spec["restartPolicy"] = "Never"
            if plan.exclude_nodes:
                affinity = spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})
                required = affinity.setdefault(
                    "requiredDuringSchedulingIgnoredDuringExecution", {"nodeSelectorTerms": [{}]}
                )
                terms = required.setdefault("nodeSelectorTerms", [{}]) or [{}]
                exclusion = {
                    "key": "kubernetes.io/hostname",
                    "operator": "NotIn",
                    "values": list(plan.exclude_nodes),
                }
                for term in terms:  # every term (they are ORed) must exclude the nodes
                    term.setdefault("matchExpressions", []).append(exclusion)
                required["nodeSelectorTerms"] = terms
            for container in spec.get("containers") or []:
                names = {e["name"] for e in extra_env}
                container["env"] = [e for e in container.get("env") or [] if e.get("name") not in names]
                container["env"] += extra_env
            metadata = template.get("metadata") or {}
            labels = dict(metadata.get("labels") or {})
            labels.update({JOB_LABEL: job.job_id, "acme.io/restart-of": job.job_id, "acme.io/recovery": tag})
            rank = labels.get(RANK_LABEL, str(index))
            pods.append(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": f"{job.job_id[:40].lower()}-r{tag}-{rank}",
                        "namespace": self.settings.namespace,
                        "labels": labels,
                        "annotations": {"acme.io/resume-from": plan.resume_from},
                    },
                    "spec": spec,
                }
            )
        return pods

    def restart(self, job: JobInfo, plan: RestartPlan) -> dict[str, Any]:
        from kubernetes.client.exceptions import ApiException

        created, existing = [], []
        for pod in self.restart_pods(job, plan):
            name = pod["metadata"]["name"]
            try:
                _api_call(
                    f"creating pod {name}", self.api.create_namespaced_pod, self.settings.namespace, pod
                )
                created.append(name)
            except KubernetesApiError as exc:
                cause = exc.__cause__
                if isinstance(cause, ApiException) and cause.status == 409:
                    existing.append(name)
                    continue
                raise
        return {"backend": self.name, "pods_created": created, "pods_already_there": existing}
