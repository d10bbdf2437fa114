"""Where a trial's steps run: behind one interface, chosen by settings, never by the DAG.

The ``evaluate_checkpoint`` DAG asks a :class:`TrialRunner` for two things per evaluation:

- ``preload(lake, evaluation, precursor)``: put the checkpoint into a node's shared memory (once per node);
- ``infer(lake, trial)``: run one trial's inference and leave its outputs in the lake.

| runner | chosen when | preload | infer |
|---|---|---|---|
| :class:`LocalTrialRunner` | ``ACME_EVAL_BACKEND=local`` (default) | copies the checkpoint into ``ACME_EVAL_SHM_DIR`` on this worker | ``trial_steps.run_inference`` in the task's process (warm start) |
| :class:`KubernetesTrialRunner` | ``ACME_EVAL_BACKEND=kubernetes`` | a precursor pod pinned to the node | a GPU pod pinned to the precursor's node (``pod_main infer``) |

With ``ACME_EVAL_MODEL_BACKEND=openai`` a server holds the model, so either runner's ``preload`` copies
nothing. The model runtime itself (llama.cpp, transformers, OpenAI-compatible) is chosen inside the trial by
``acme.models.backends.load_model``.

A Kubernetes pod is started by the Airflow glue (``acme_airflow.gpu_pod.run_gpu_pod``), handed in as
``run_pod``: this module stays free of Airflow.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from acme.lake import Lake

PodRunner = Callable[[dict[str, Any]], Any]
"""Runs one pod from ``GpuPodOperator`` keyword arguments and returns when it has finished (raises if it failed)."""


class TrialRunner(Protocol):
    """Runs the precursor and the inference of trials (see module doc)."""

    @property
    def name(self) -> str: ...

    def preload(
        self, lake: Lake, evaluation: dict[str, Any], precursor: dict[str, Any]
    ) -> dict[str, Any]: ...

    def infer(self, lake: Lake, trial: dict[str, Any]) -> dict[str, Any]: ...


def _remote_model(model_backend: str | None, precursor: dict[str, Any]) -> dict[str, Any] | None:
    if model_backend == "openai":  # the trials call a server that holds the model
        return {"node": precursor["node"], "copied": False, "reason": "openai backend: nothing to preload"}
    return None


def _outputs_done(lake: Lake, trial: dict[str, Any]) -> dict[str, Any] | None:
    from acme.evaluation.layout import EvalRun

    outputs = EvalRun(trial["model_id"], trial["run"]).outputs_key(trial["trial_id"])
    if lake.exists(outputs):  # done by an earlier run: nothing to start, no GPU
        return {"trial_id": trial["trial_id"], "skipped": True, "outputs": lake.url(outputs)}
    return None


@dataclass(frozen=True)
class LocalTrialRunner:
    """Steps in the task's own process on this worker (the demo, CI, single-node CPU or GPU hosts)."""

    shm_dir: Path
    data_dir: Path
    lease_timeout_s: float = 21600.0
    model_backend: str | None = None
    name: str = "local"

    def preload(self, lake: Lake, evaluation: dict[str, Any], precursor: dict[str, Any]) -> dict[str, Any]:
        from acme.evaluation.precursor import preload_model

        remote = _remote_model(self.model_backend, precursor)
        if remote is not None:
            return remote
        location = evaluation["model_location"]
        options = lake.storage_options if location.startswith("s3://") else None
        result = preload_model(location, self.shm_dir, evaluation["model_id"], options)
        return {"node": precursor["node"], **result.to_dict()}

    def infer(self, lake: Lake, trial: dict[str, Any]) -> dict[str, Any]:
        from acme.evaluation.layout import EvalRun
        from acme.evaluation.trial_steps import run_inference

        return run_inference(
            lake,
            EvalRun(trial["model_id"], trial["run"]),
            trial["trial_id"],
            self.shm_dir,
            self.data_dir,
            self.lease_timeout_s,
        )


@dataclass(frozen=True)
class KubernetesTrialRunner:
    """Steps as pods on the GPU nodes (``acme.evaluation.kubernetes_pods``), started through ``run_pod``."""

    run_pod: PodRunner
    model_backend: str | None = None
    name: str = "kubernetes"

    def preload(self, lake: Lake, evaluation: dict[str, Any], precursor: dict[str, Any]) -> dict[str, Any]:
        from acme.evaluation.kubernetes_pods import precursor_pod

        remote = _remote_model(self.model_backend, precursor)
        if remote is not None:
            return remote
        pod = precursor_pod(evaluation, precursor["node"], precursor["nodes"])
        self.run_pod(pod)
        return {"node": precursor["node"], "pod": pod["name"], "node_name": pod["node_name"]}

    def infer(self, lake: Lake, trial: dict[str, Any]) -> dict[str, Any]:
        from acme.evaluation.kubernetes_pods import inference_pod

        done = _outputs_done(lake, trial)
        if done is not None:
            return done
        pod = inference_pod(trial, trial["nodes"], trial["gpus_per_trial"])
        self.run_pod(pod)
        from acme.evaluation.layout import EvalRun

        outputs = EvalRun(trial["model_id"], trial["run"]).outputs_key(trial["trial_id"])
        if not lake.exists(outputs):
            raise RuntimeError(f"pod {pod['name']} finished without writing {lake.url(outputs)}")
        return {
            "trial_id": trial["trial_id"],
            "skipped": False,
            "outputs": lake.url(outputs),
            "pod": pod["name"],
        }


def trial_runner(run_pod: PodRunner | None = None) -> TrialRunner:
    """The configured runner (``ACME_EVAL_BACKEND``); ``run_pod`` is needed only by the Kubernetes one."""
    from acme import settings
    from acme.errors import ConfigError

    model_backend = settings.evaluation().model_backend
    if settings.evaluation().backend == "kubernetes":
        if run_pod is None:
            raise ConfigError(
                "ACME_EVAL_BACKEND=kubernetes needs a pod runner (acme_airflow.gpu_pod.run_gpu_pod)"
            )
        return KubernetesTrialRunner(run_pod, model_backend)
    return LocalTrialRunner(
        settings.evaluation().shm_dir,
        settings.evaluation().data_dir,
        settings.evaluation().gpu_lease_timeout_s,
        model_backend,
    )
