"""The organisation's default GPU pod: a KubernetesPodOperator whose every default has a reason.

``GpuPodOperator`` runs one container on whole GPUs of one node (or any GPU node); the recovery
check worlds (``CheckPodOperator``) and the evaluation's inference pods use it. Import this module
inside a task, never at a DAG file's top: the Kubernetes provider costs about 0.6 s to import and
DAG files must parse in well under a second.

Configuration (read by ``acme.settings.evaluation()``, not here): ``ACME_GPU_POD_IMAGE`` (default
image), ``ACME_GPU_POD_NAMESPACE`` (default ``training``), ``ACME_GPU_POD_KUBERNETES_CONN_ID`` (default
``kubernetes_default``, an Airflow connection of type ``kubernetes``; its ``kube_config_path`` or
in-cluster setting says where the API is). Arguments passed to the constructor win.

``run_gpu_pod(pod)`` runs one pod inside the current task: the pod runner the evaluation's
``KubernetesTrialRunner`` is given (``acme.evaluation.runners``).
"""

from __future__ import annotations

import re
from typing import Any

from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator
from airflow.sdk.exceptions import AirflowException

GPU_RESOURCE = "nvidia.com/gpu"
HOSTNAME_LABEL = "kubernetes.io/hostname"
_LABEL_VALUE = re.compile(r"[^A-Za-z0-9._-]+")


def _label(value: str) -> str:
    return _LABEL_VALUE.sub("-", str(value))[:63].strip("-._") or "none"


class GpuPodOperator(KubernetesPodOperator):
    """A pod on ``gpus`` GPUs, pinned to ``node_name`` when given, with the org defaults below."""

    def __init__(
        self,
        *,
        node_name: str | None = None,
        gpus: int = 8,
        job_labels: dict[str, str] | None = None,
        image: str | None = None,
        namespace: str | None = None,
        **kwargs: Any,
    ) -> None:
        from kubernetes.client import models as k8s

        from acme import settings

        if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 0:
            raise ValueError(f"gpus={gpus!r} must be a whole number >= 0")
        # Image: one place to bump the CUDA/torch image for every GPU task.
        kwargs["image"] = image or settings.evaluation().gpu_pod_image
        # Namespace: GPU quotas and priority classes are set per namespace by the platform team.
        kwargs["namespace"] = namespace or settings.evaluation().gpu_pod_namespace
        kwargs.setdefault("kubernetes_conn_id", settings.evaluation().gpu_pod_kubernetes_conn_id)
        # GPUs as requests AND limits: extended resources cannot be overcommitted, so Kubernetes
        # requires them equal; a whole node's GPUs keep other jobs from sharing its NVLink/NICs.
        gpu = {GPU_RESOURCE: str(gpus)} if gpus else {}
        kwargs.setdefault("container_resources", k8s.V1ResourceRequirements(requests=gpu, limits=gpu))
        # Pinning by required node affinity on the hostname label, not spec.nodeName: nodeName
        # bypasses the scheduler (no GPU accounting; the pod fails instead of waiting for the GPUs).
        if node_name:
            kwargs.setdefault(
                "affinity",
                k8s.V1Affinity(
                    node_affinity=k8s.V1NodeAffinity(
                        required_during_scheduling_ignored_during_execution=k8s.V1NodeSelector(
                            node_selector_terms=[
                                k8s.V1NodeSelectorTerm(
                                    match_expressions=[
                                        k8s.V1NodeSelectorRequirement(
                                            key=HOSTNAME_LABEL, operator="In", values=[node_name]
                                        )
                                    ]
                                )
                            ]
                        )
                    )
                ),
            )
        # GPU nodes carry the device plugin's NoSchedule taint so CPU pods stay off them.
        kwargs.setdefault(
            "tolerations",
            [k8s.V1Toleration(key=GPU_RESOURCE, operator="Exists", effect="NoSchedule")],
        )
        # No service links: a busy namespace injects hundreds of *_SERVICE_HOST variables, slowing
        # start-up and clashing with names like MASTER_PORT that torch.distributed reads.
        kwargs.setdefault(
            "full_pod_spec", k8s.V1Pod(spec=k8s.V1PodSpec(containers=[], enable_service_links=False))
        )
        # The container's output is the task's log (and, for checks, its result).
        kwargs.setdefault("get_logs", True)
        # Delete the pod when done, whatever the outcome: a finished pod must not hold GPUs.
        kwargs.setdefault("on_finish_action", "delete_pod")
        # Multi-GB CUDA images take minutes to pull on a fresh node.
        kwargs.setdefault("startup_timeout_seconds", 600)
        # A pod that does not start says why only in its events.
        kwargs.setdefault("log_events_on_failure", True)
        # XCom through the sidecar needs pod exec rights we do not grant; results are read from logs.
        kwargs.setdefault("do_xcom_push", False)
        labels = {"acme.io/managed-by": "airflow", **{k: _label(v) for k, v in (job_labels or {}).items()}}
        kwargs["labels"] = {**labels, **(kwargs.get("labels") or {})}
        super().__init__(**kwargs)
        self.node_name = node_name


def run_gpu_pod(pod: dict[str, Any]) -> None:
    """Run one pod (``GpuPodOperator`` keyword arguments) inside the current task, until it finishes."""
    from airflow.sdk import get_current_context

    GpuPodOperator(**pod).execute(get_current_context())


class CheckPodOperator(GpuPodOperator):
    """One rank of an all-gather check world: returns the rank's log, even when the check failed.

    The check's verdict is data, not a task failure: a failed container (the check said the world
    is broken) or a pod that never started on its node (the node may be down) comes back as
    ``{"log": …, "pod_failed": reason}``. Failures of the Kubernetes API itself still raise, so
    nobody is blamed for the API being down.
    """

    def __init__(self, **kwargs: Any) -> None:
        # The ranks reach rank 0 by its node's address, and NCCL uses the host's NICs/InfiniBand.
        kwargs.setdefault("hostnetwork", True)
        kwargs.setdefault("dnspolicy", "ClusterFirstWithHostNet")
        # Checks are short: a node that cannot start a pod in 5 minutes counts as silent.
        kwargs.setdefault("startup_timeout_seconds", 300)
        super().__init__(**kwargs)
        self.check_log: str = ""
        self.pod_failed: str | None = None

    def cleanup(self, pod: Any, remote_pod: Any, xcom_result: Any = None, context: Any = None) -> None:
        if remote_pod is not None and not self._killed:
            self.check_log = self._read_base_log(remote_pod)
        try:
            super().cleanup(pod=pod, remote_pod=remote_pod, xcom_result=xcom_result, context=context)
        except AirflowException as exc:
            phase = getattr(getattr(remote_pod, "status", None), "phase", None)
            if phase != "Failed":
                raise
            self.pod_failed = str(exc).splitlines()[0]

    def _read_base_log(self, remote_pod: Any) -> str:
        try:
            # Raw bytes: with its default decoding the client json-loads a log that is one JSON line
            # and hands back the Python repr of the object (single quotes, True), not the line.
            response = self.client.read_namespaced_pod_log(
                name=remote_pod.metadata.name,
                namespace=remote_pod.metadata.namespace,
                container=self.base_container_name,
                _preload_content=False,
            )
            return response.data.decode("utf-8", errors="replace")
        except Exception as exc:  # the report is then missing, which fails the world with that reason
            self.log.warning("could not read the log of %s: %s", remote_pod.metadata.name, exc)
            return ""

    def execute(self, context: Any) -> dict[str, Any]:
        from airflow.providers.cncf.kubernetes.kubernetes_helper_functions import PodLaunchFailedException
        from airflow.providers.cncf.kubernetes.utils.pod_manager import PodLaunchTimeoutException

        try:
            super().execute(context)
        except (PodLaunchFailedException, PodLaunchTimeoutException) as exc:
            self.pod_failed = f"pod did not start on {self.node_name}: {exc}"
        return {"node": self.node_name, "log": self.check_log, "pod_failed": self.pod_failed}
