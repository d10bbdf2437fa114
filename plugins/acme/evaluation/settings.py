"""Configuration of the evaluation run steps, from environment variables (``acme.config`` style).

Kept inside ``acme.evaluation`` so the evaluation area owns its settings; every function reads the
environment when called, so tests and tasks see the values of their own process.

| variable | default | meaning |
|---|---|---|
| ``ACME_EVAL_BACKEND`` | ``local`` | ``local``: steps run as Python tasks on the worker (CPU); ``kubernetes``: GPU pods |
| ``ACME_EVAL_SHM_DIR`` | ``/dev/shm/acme-models`` | where a node's precursor puts the model (node shared memory) |
| ``ACME_EVAL_DATA_DIR`` | ``include/eval`` | evaluation datasets: ``<dataset>.jsonl`` there or in one of its sub-folders (``real/``, ``tiny/``) |
| ``ACME_EVAL_GPUS_PER_NODE`` | ``8`` | GPUs of one evaluation node |
| ``ACME_EVAL_CODE_TIMEOUT_S`` | ``10`` | wall-clock limit of one generated program's unit test |
| ``ACME_EVAL_GPU_LEASE_TIMEOUT_S`` | ``21600`` | how long an inference step waits for a free GPU of its node |
| ``ACME_EVAL_GPU_POOL`` | ``acme_eval_gpu`` | Airflow pool of inference tasks (size: 2 × GPU slots, see warm start) |
| ``ACME_EVAL_CPU_POOL`` | ``acme_eval_cpu`` | Airflow pool of metric tasks (size: CPU cores given to metrics) |
| ``ACME_EVAL_NODE_NAMES`` | (none) | kubernetes: node names for plan nodes 0, 1, … (comma-separated) |
| ``ACME_EVAL_IMAGE`` | the GPU pod default | kubernetes: image with this project installed (``python -m acme.evaluation.pod_main``) |
| ``ACME_EVAL_POD_POLL_S`` | ``5`` | kubernetes: how often the operator polls a pod |
| ``ACME_EVAL_MODEL_BACKEND`` | ``llama_cpp`` | inference runtime of a trial: ``llama_cpp`` (GGUF in-process), ``transformers`` (HF checkpoint or GGUF), ``openai`` (an OpenAI-compatible completion server) |
| ``ACME_EVAL_MODEL_ENDPOINT`` | (none) | ``openai`` backend: base URL ending in ``/v1`` (vLLM, llama.cpp's server) |
| ``ACME_EVAL_MODEL_NAME`` | ``default`` | ``openai`` backend: the model name the server serves |
| ``ACME_EVAL_MODEL_API_KEY`` | (none) | ``openai`` backend: bearer token, if the server wants one |
| ``ACME_EVAL_MODEL_SCORE_PREFIX`` | (none) | ``openai`` backend: text sent before every scored prompt; for llama.cpp's server the model's BOS token (``<|im_start|>`` for SmolLM2), without which its echoed log-probabilities are one token off |
| ``ACME_EVAL_MODEL_CONTEXT`` | ``2048`` | ``llama_cpp``: context window in tokens (prompt + answer) |
| ``ACME_EVAL_MODEL_THREADS`` | ``1`` | ``llama_cpp``: CPU threads for prompts and generation (more only on dedicated cores: threads spin-wait on a shared CPU) |
| ``ACME_EVAL_MAX_NEW_TOKENS`` | ``256`` | longest generated answer of a ``match`` or ``code_exec`` sample |
| ``ACME_EVAL_BATCH_SIZE`` | ``1`` | samples per model call (``transformers`` and servers batch; 1 measures every sample alone) |

The organisation's GPU pod defaults (``acme_airflow.gpu_pod``, used by the evaluation's pods and the
recovery checks) are read here too:

| variable | default | meaning |
|---|---|---|
| ``ACME_GPU_POD_IMAGE`` | ``ghcr.io/acme/allgather-check:torch2.13-cu12`` | default image of a GPU pod |
| ``ACME_GPU_POD_NAMESPACE`` | ``training`` | namespace of GPU pods (GPU quotas are set per namespace) |
| ``ACME_GPU_POD_KUBERNETES_CONN_ID`` | ``kubernetes_default`` | Airflow connection (type ``kubernetes``) of the cluster |
"""

from __future__ import annotations

import os
from pathlib import Path

from acme.config import env as _env
from acme.config import env_number
from acme.errors import ConfigError

BACKENDS = ("local", "kubernetes")


def _positive(name: str, default: str) -> float:
    return env_number(name, default, above=0)


def backend() -> str:
    """Where trial steps run: ``local`` (worker processes, CPU) or ``kubernetes`` (GPU pods)."""
    value = _env("ACME_EVAL_BACKEND", "local").lower()
    if value not in BACKENDS:
        raise ConfigError(f"ACME_EVAL_BACKEND={value!r} must be one of {', '.join(BACKENDS)}")
    return value


def shm_dir() -> Path:
    """Node shared-memory folder the precursor fills and trials load from."""
    return Path(_env("ACME_EVAL_SHM_DIR", "/dev/shm/acme-models"))


def data_dir() -> Path:
    """Folder of the evaluation datasets (``<dataset>.jsonl``, directly or one sub-folder down)."""
    from acme.config import include_dir

    return Path(_env("ACME_EVAL_DATA_DIR", str(include_dir() / "eval")))


def gpus_per_node() -> int:
    value = _positive("ACME_EVAL_GPUS_PER_NODE", "8")
    if value != int(value):
        raise ConfigError(f"ACME_EVAL_GPUS_PER_NODE={value!r} must be a whole number")
    return int(value)


def code_timeout_s() -> float:
    return _positive("ACME_EVAL_CODE_TIMEOUT_S", "10")


def gpu_lease_timeout_s() -> float:
    return _positive("ACME_EVAL_GPU_LEASE_TIMEOUT_S", "21600")


def gpu_pool() -> str:
    return _env("ACME_EVAL_GPU_POOL", "acme_eval_gpu")


def cpu_pool() -> str:
    return _env("ACME_EVAL_CPU_POOL", "acme_eval_cpu")


def node_names(nodes: int) -> list[str]:
    """Kubernetes node names of plan nodes ``0..nodes-1`` (``ACME_EVAL_NODE_NAMES``)."""
    names = [n.strip() for n in _env("ACME_EVAL_NODE_NAMES", "").split(",") if n.strip()]
    if len(names) < nodes:
        raise ConfigError(
            f"ACME_EVAL_NODE_NAMES lists {len(names)} node(s) but the plan uses {nodes}: "
            "name one Kubernetes node per plan node"
        )
    return names[:nodes]


def image() -> str | None:
    return os.environ.get("ACME_EVAL_IMAGE", "").strip() or None


def pod_poll_s() -> float:
    return _positive("ACME_EVAL_POD_POLL_S", "5")


def model_backend() -> str:
    """The trial's inference runtime (``acme.evaluation.inference``)."""
    from acme.evaluation.inference import BACKENDS, DEFAULT_BACKEND

    value = _env("ACME_EVAL_MODEL_BACKEND", DEFAULT_BACKEND).lower().replace("-", "_")
    if value not in BACKENDS:
        raise ConfigError(f"ACME_EVAL_MODEL_BACKEND={value!r} must be one of {', '.join(BACKENDS)}")
    return value


def model_endpoint() -> str:
    return _env("ACME_EVAL_MODEL_ENDPOINT", "")


def model_name() -> str:
    return _env("ACME_EVAL_MODEL_NAME", "default")


def model_score_prefix() -> str:
    """``openai`` backend: text before every scored prompt (the BOS token for llama.cpp's server)."""
    return os.environ.get("ACME_EVAL_MODEL_SCORE_PREFIX", "")


def model_api_key() -> str:
    return os.environ.get("ACME_EVAL_MODEL_API_KEY", "")


def model_context_tokens() -> int:
    return int(_positive("ACME_EVAL_MODEL_CONTEXT", "2048"))


def max_new_tokens() -> int:
    return int(_positive("ACME_EVAL_MAX_NEW_TOKENS", "256"))


def batch_size() -> int:
    return int(_positive("ACME_EVAL_BATCH_SIZE", "1"))


def model_threads() -> int:
    value = _positive("ACME_EVAL_MODEL_THREADS", "1")
    if value != int(value):
        raise ConfigError(f"ACME_EVAL_MODEL_THREADS={value!r} must be a whole number")
    return int(value)


DEFAULT_GPU_POD_IMAGE = "ghcr.io/acme/allgather-check:torch2.13-cu12"


def gpu_pod_image() -> str:
    """Default image of a GPU pod (one place to bump the CUDA/torch image for every GPU task)."""
    return _env("ACME_GPU_POD_IMAGE", DEFAULT_GPU_POD_IMAGE)


def gpu_pod_namespace() -> str:
    """Namespace of GPU pods: GPU quotas and priority classes are set per namespace."""
    return _env("ACME_GPU_POD_NAMESPACE", "training")


def gpu_pod_kubernetes_conn_id() -> str:
    """Airflow connection (type ``kubernetes``) that says where the Kubernetes API is."""
    return _env("ACME_GPU_POD_KUBERNETES_CONN_ID", "kubernetes_default")
