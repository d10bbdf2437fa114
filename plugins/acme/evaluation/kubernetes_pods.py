"""The evaluation's pods (kubernetes backend): what to run, on which node, with how many GPUs.

Each function returns the keyword arguments of ``acme_airflow.gpu_pod.GpuPodOperator`` (the
org-default GPU pod: GPU requests = limits, required node affinity on the hostname, GPU
toleration, pod deleted when done). The DAG task builds the operator and runs it.

- **precursor**: no GPU, pinned to its node, writes the checkpoint into the node's shared-memory
  folder (a ``hostPath`` volume on ``ACME_EVAL_SHM_DIR``, mounted at the same path);
- **inference**: ``gpus_per_trial`` GPUs, pinned to the node whose precursor filled that folder,
  with the same volume (read-write: the GPU-lease files live there too).

The pods get the lake and folders through environment variables; the metric step is not a pod: it
runs on the Airflow worker (CPU pool) once the trial's outputs are in the lake.

Warm start is not available on this backend: the kubelet allocates a pod's GPUs when it starts the
pod, so a trial's set-up runs with the GPUs held (the benchmark's "no warm start" figures apply).
"""

from __future__ import annotations

import re
from typing import Any

from acme import settings

SHM_VOLUME = "acme-models"
_NAME = re.compile(r"[^a-z0-9-]+")


def _pod_name(*parts: str) -> str:
    return _NAME.sub("-", "-".join(parts).lower()).strip("-")[:53]


def _volumes() -> dict[str, Any]:
    from kubernetes.client import models as k8s

    path = str(settings.evaluation().shm_dir)
    return {
        "volumes": [
            k8s.V1Volume(
                name=SHM_VOLUME,
                host_path=k8s.V1HostPathVolumeSource(path=path, type="DirectoryOrCreate"),
            )
        ],
        "volume_mounts": [k8s.V1VolumeMount(name=SHM_VOLUME, mount_path=path)],
    }


# The trial's model settings travel to its pod; the API key does not (a pod gets it from its own secret).
FORWARDED_MODEL_SETTINGS = {
    "ACME_EVAL_MODEL_BACKEND": "model_backend",
    "ACME_EVAL_MODEL_ENDPOINT": "model_endpoint",
    "ACME_EVAL_MODEL_NAME": "model_name",
    "ACME_EVAL_MODEL_SCORE_PREFIX": "model_score_prefix",
    "ACME_EVAL_MODEL_CONTEXT": "model_context_tokens",
    "ACME_EVAL_MAX_NEW_TOKENS": "max_new_tokens",
    "ACME_EVAL_BATCH_SIZE": "batch_size",
}


def _env() -> dict[str, str]:
    evaluation = settings.evaluation()
    forwarded = {name: str(getattr(evaluation, field)) for name, field in FORWARDED_MODEL_SETTINGS.items()}
    return {
        "ACME_LAKE_URI": settings.project().lake_uri,
        "ACME_EVAL_SHM_DIR": str(evaluation.shm_dir),
        "ACME_EVAL_DATA_DIR": str(evaluation.data_dir),
        "ACME_EVAL_GPU_LEASE_TIMEOUT_S": str(evaluation.gpu_lease_timeout_s),
        **{name: value for name, value in forwarded.items() if value},
    }


def _common(node: int, nodes: int) -> dict[str, Any]:
    return {
        "node_name": settings.evaluation().node_names_for(nodes)[node],
        "image": settings.evaluation().image,
        "cmds": ["python", "-m", "acme.evaluation.pod_main"],
        "env_vars": _env(),
        "random_name_suffix": True,
        "poll_interval": settings.evaluation().pod_poll_s,
        "startup_check_interval_seconds": max(1, round(settings.evaluation().pod_poll_s)),
        **_volumes(),
    }


def precursor_pod(evaluation: dict[str, str], node: int, nodes: int) -> dict[str, Any]:
    """GpuPodOperator arguments of node ``node``'s precursor."""
    return {
        **_common(node, nodes),
        "task_id": f"preload-node-{node}",
        "name": _pod_name("acme-eval-preload", evaluation["model_id"][:20], str(node)),
        "gpus": 0,
        "arguments": [
            "preload",
            "--location",
            evaluation["model_location"],
            "--model-id",
            evaluation["model_id"],
        ],
        "job_labels": {"acme.io/step": "eval-preload", "acme.io/model": evaluation["model_id"]},
    }


def inference_pod(trial: dict[str, Any], nodes: int, gpus_per_trial: int) -> dict[str, Any]:
    """GpuPodOperator arguments of one trial's inference, pinned to its precursor's node."""
    return {
        **_common(int(trial["node"]), nodes),
        "task_id": f"infer-{trial['trial_id']}",
        "name": _pod_name("acme-eval", trial["trial_id"]),
        "gpus": gpus_per_trial,
        "arguments": [
            "infer",
            "--model-id",
            trial["model_id"],
            "--run",
            trial["run"],
            "--trial",
            trial["trial_id"],
        ],
        "job_labels": {
            "acme.io/step": "eval-infer",
            "acme.io/model": trial["model_id"],
            "acme.io/trial": trial["trial_id"],
        },
    }
