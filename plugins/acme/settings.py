"""Every setting of the pipeline in one place: per-area frozen dataclasses read from the environment.

Each area (project, jobs, metrics, diagnosis, agents, evaluation, recovery, detection, report) has a
frozen dataclass whose ``from_env()`` reads that area's ``ACME_*`` variables, checks them (a
:class:`~acme.errors.ConfigError` names the variable and its value) and returns the values; the module
function of the same name (``settings.project()``, ``settings.diagnosis()``, ...) is what callers use.
It reads the environment at call time, so a test's ``monkeypatch.setenv`` or a worker's environment
takes effect without a restart. No other module reads ``ACME_*`` variables (a test checks it), and every
variable is documented in ``.env.example``. Secrets never live here: credentials come from Airflow
connections (or the standard AWS environment when the command line runs outside Airflow).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from acme.errors import ConfigError

# plugins/acme/settings.py -> the project root (also /opt/airflow in the container image).
PROJECT_ROOT = Path(__file__).resolve().parents[2]


# --------------------------------------------------------------------------------------------------
# Reading and checking one variable
# --------------------------------------------------------------------------------------------------


class Env:
    """Reads ``ACME_*`` variables from an environment (``os.environ`` by default), checked."""

    def __init__(self, environ: Mapping[str, str] | None = None):
        self.environ = os.environ if environ is None else environ

    def text(self, name: str, default: str = "") -> str:
        """A setting, stripped; ``default`` when unset or blank."""
        return self.environ.get(name, "").strip() or default

    def number(
        self,
        name: str,
        default: float | str,
        *,
        low: float | None = None,
        high: float | None = None,
        above: float | None = None,
        integer: bool = False,
    ) -> float:
        """A numeric setting within its range, else a :class:`ConfigError` naming the variable and value."""
        raw = self.text(name, str(default))
        try:
            value = int(raw) if integer else float(raw)
        except ValueError:
            raise ConfigError(f"{name}={raw!r} is not {'an integer' if integer else 'a number'}") from None
        if low is not None and high is not None and not low <= value <= high:
            raise ConfigError(f"{name}={raw!r} must be between {low:g} and {high:g}")
        if low is not None and value < low:
            raise ConfigError(f"{name}={raw!r} must be at least {low:g}")
        if high is not None and value > high:
            raise ConfigError(f"{name}={raw!r} must be at most {high:g}")
        if above is not None and not value > above:
            raise ConfigError(f"{name}={raw!r} must be above {above:g}")
        return value

    def integer(self, name: str, default: int, *, low: int | None = None, high: int | None = None) -> int:
        """An integer setting within its range."""
        return int(self.number(name, default, low=low, high=high, integer=True))

    def share(self, name: str, default: float) -> float:
        """A share between 0 and 1."""
        return self.number(name, default, low=0.0, high=1.0)

    def flag(self, name: str, default: bool = False) -> bool:
        """A yes/no setting: 1/true/yes/on or 0/false/no/off (any case)."""
        raw = self.text(name, "").lower()
        if not raw:
            return default
        if raw in ("1", "true", "yes", "on"):
            return True
        if raw in ("0", "false", "no", "off"):
            return False
        raise ConfigError(f"{name}={raw!r} must be true or false")

    def choice(self, name: str, default: str, choices: tuple[str, ...]) -> str:
        """One of ``choices`` (compared in lower case)."""
        value = self.text(name, default).lower()
        if value not in choices:
            raise ConfigError(f"{name}={value!r} must be one of {', '.join(choices)}")
        return value

    def path(self, name: str, default: Path | str) -> Path:
        """A file or folder path."""
        return Path(self.text(name, str(default)))


def env(name: str, default: str = "") -> str:
    """A setting from the process environment, stripped; ``default`` when unset or blank."""
    return Env().text(name, default)


def env_number(
    name: str,
    default: float | str,
    *,
    low: float | None = None,
    high: float | None = None,
    above: float | None = None,
    integer: bool = False,
) -> float:
    """A numeric setting from the process environment, checked (see :meth:`Env.number`)."""
    return Env().number(name, default, low=low, high=high, above=above, integer=integer)


def _include_dir(read: Env) -> Path:
    """Bundled configuration, SQL and sample data (``ACME_INCLUDE_DIR``): the default of several paths."""
    return read.path("ACME_INCLUDE_DIR", PROJECT_ROOT / "include")


# --------------------------------------------------------------------------------------------------
# Project: where things are and how the nightly DAGs are scheduled
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProjectSettings:
    include_dir: Path
    """Bundled configuration, SQL and sample data (``ACME_INCLUDE_DIR``, default ``include/``)."""
    lake_uri: str
    """Root of the lake (``ACME_LAKE_URI``): a local folder (default ``./lake``) or ``s3://bucket/prefix``."""
    aws_conn_id: str
    """Airflow connection with the S3 credentials/endpoint when the lake is on S3 (``ACME_AWS_CONN_ID``)."""
    clusters_file: Path
    """Which clusters exist and where their sources are (``ACME_CLUSTERS_FILE``)."""
    reference_dir: Path
    """Public reference data, used by synthetic data only (``ACME_REFERENCE_DIR``, ../shared/reference)."""
    start_date: datetime
    """First day the nightly DAGs cover (``ACME_START_DATE``; AcmeTrace's Seren starts 2023-03-01)."""
    catchup: bool
    """Whether the scheduler creates the missed runs since the start date (``ACME_CATCHUP``)."""
    max_active_runs: int
    """Runs of one DAG at once (``ACME_MAX_ACTIVE_RUNS``, default 4; lower it on small workers)."""

    @property
    def sql_dir(self) -> Path:
        return self.include_dir / "sql"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ProjectSettings:
        read = Env(environ)
        include = _include_dir(read)
        raw_start = read.text("ACME_START_DATE", "2023-03-01")
        try:
            start = datetime.fromisoformat(raw_start).replace(tzinfo=UTC)
        except ValueError:
            raise ConfigError(f"ACME_START_DATE={raw_start!r} is not a date") from None
        raw_runs = read.text("ACME_MAX_ACTIVE_RUNS", "4")
        if not raw_runs.isdigit() or int(raw_runs) < 1:
            raise ConfigError(f"ACME_MAX_ACTIVE_RUNS={raw_runs!r} must be a positive integer")
        return cls(
            include_dir=include,
            lake_uri=read.text("ACME_LAKE_URI", str(PROJECT_ROOT / "lake")),
            aws_conn_id=read.text("ACME_AWS_CONN_ID", "aws_default"),
            clusters_file=read.path("ACME_CLUSTERS_FILE", include / "config" / "clusters.yaml"),
            reference_dir=read.path("ACME_REFERENCE_DIR", PROJECT_ROOT.parent / "shared" / "reference"),
            start_date=start,
            catchup=read.text("ACME_CATCHUP", "false").lower() in ("1", "true", "yes"),
            max_active_runs=int(raw_runs),
        )


def project() -> ProjectSettings:
    return ProjectSettings.from_env()


# --------------------------------------------------------------------------------------------------
# Jobs: scheduler records → job partitions (section of the jobs area)
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class JobsSettings:
    job_type_rules: Path
    """Job-type rules for sources without a type (``ACME_JOB_TYPE_RULES``)."""
    quarantine_max_share: float
    """Share of an input's rows that may be quarantined before its run fails (``ACME_QUARANTINE_MAX_SHARE``,
    default 1%)."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> JobsSettings:
        read = Env(environ)
        return cls(
            job_type_rules=read.path("ACME_JOB_TYPE_RULES", _include_dir(read) / "config" / "job_types.yaml"),
            quarantine_max_share=read.share("ACME_QUARANTINE_MAX_SHARE", 0.01),
        )


def jobs() -> JobsSettings:
    return JobsSettings.from_env()


# --------------------------------------------------------------------------------------------------
# Metrics: exporter scrapes and Prometheus → metric partitions (section of the metrics area)
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MetricsSettings:
    catalog: Path
    """Metric list, PromQL, units and ranges (``ACME_METRICS_CATALOG``)."""
    max_quarantine_share: float
    """Share of a metric's samples that may be quarantined before it fails
    (``ACME_METRICS_MAX_QUARANTINE_SHARE``, default 1%)."""
    min_coverage: float
    """Least share of the expected samples a metric must have for the day (``ACME_METRICS_MIN_COVERAGE``,
    default 80%)."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> MetricsSettings:
        read = Env(environ)
        return cls(
            catalog=read.path("ACME_METRICS_CATALOG", _include_dir(read) / "metrics" / "metrics.yaml"),
            max_quarantine_share=read.share("ACME_METRICS_MAX_QUARANTINE_SHARE", 0.01),
            min_coverage=read.share("ACME_METRICS_MIN_COVERAGE", 0.8),
        )


def metrics() -> MetricsSettings:
    return MetricsSettings.from_env()


# --------------------------------------------------------------------------------------------------
# Diagnosis: logs → diagnoses (section of the diagnosis area; moved from acme/diagnosis/settings.py)
# --------------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------------
# Agents: the LLM endpoint and the failure/log agents (section of the agents area)
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AgentsSettings:
    """The LLM endpoint (when no Airflow connection gives it) and the failure agent's prompt bounds."""

    conn_id: str
    """Airflow connection that holds the endpoint (``ACME_LLM_CONN_ID``, default ``acme_llm``)."""
    base_url: str
    """OpenAI-compatible base URL (``ACME_LLM_BASE_URL``); empty: no LLM, diagnosis runs offline."""
    model: str
    """Model name (``ACME_LLM_MODEL``), when neither the connection nor the caller gives one."""
    timeout_s: float
    """Seconds per request (``ACME_LLM_TIMEOUT_S``, default 60)."""
    max_retries: int
    """Retries of a timeout, connection error, 408, 429 or 5xx (``ACME_LLM_MAX_RETRIES``, default 3)."""
    backoff_s: float
    """Base of the exponential backoff between retries (``ACME_LLM_BACKOFF_S``, default 1)."""
    max_retry_after_s: float
    """Longest Retry-After honoured before giving up at once (``ACME_LLM_MAX_RETRY_AFTER_S``, default 120)."""
    structured_output: str
    """``auto`` (probe), ``json_schema``, ``json_object_schema``, ``json_object`` or ``plain``
    (``ACME_LLM_STRUCTURED_OUTPUT``)."""
    max_log_lines: int | None
    """Failure agent: log lines shown at most (``ACME_LLM_MAX_LOG_LINES``; unset: the agent's 200)."""
    max_log_chars: int | None
    """Failure agent: log characters shown at most (``ACME_LLM_MAX_LOG_CHARS``; unset: the agent's 20000)."""
    api_key: str = field(default="", repr=False)
    """Bearer token (``ACME_LLM_API_KEY``); prefer the Airflow connection's password. Never shown."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> AgentsSettings:
        read = Env(environ)
        bounds = {}
        for name, key in (
            ("ACME_LLM_MAX_LOG_LINES", "max_log_lines"),
            ("ACME_LLM_MAX_LOG_CHARS", "max_log_chars"),
        ):
            raw = read.text(name)
            if raw and not raw.isdigit():
                raise ConfigError(f"{name}={raw!r} must be a positive integer")
            bounds[key] = int(raw) if raw else None
        return cls(
            conn_id=read.text("ACME_LLM_CONN_ID", "acme_llm"),
            base_url=read.text("ACME_LLM_BASE_URL"),
            model=read.text("ACME_LLM_MODEL"),
            timeout_s=read.number("ACME_LLM_TIMEOUT_S", 60.0, low=0.001),
            max_retries=read.integer("ACME_LLM_MAX_RETRIES", 3, low=0),
            backoff_s=read.number("ACME_LLM_BACKOFF_S", 1.0, low=0.0),
            max_retry_after_s=read.number("ACME_LLM_MAX_RETRY_AFTER_S", 120.0, low=0.0),
            structured_output=read.text("ACME_LLM_STRUCTURED_OUTPUT", "auto").lower(),
            api_key=read.text("ACME_LLM_API_KEY"),
            **bounds,
        )


def agents() -> AgentsSettings:
    return AgentsSettings.from_env()


# --------------------------------------------------------------------------------------------------
# Evaluation: checkpoints → trials → scores (section of the evaluation area)
# --------------------------------------------------------------------------------------------------

EVAL_BACKENDS = ("local", "kubernetes")
EVAL_MODEL_BACKENDS = ("llama_cpp", "transformers", "openai")
DEFAULT_GPU_POD_IMAGE = "ghcr.io/acme/allgather-check:torch2.13-cu12"


@dataclass(frozen=True)
class EvaluationSettings:
    """The evaluation's steps (moved from acme/evaluation/settings.py) and the organisation's GPU pod defaults."""

    backend: str
    """Where trial steps run (``ACME_EVAL_BACKEND``): ``local`` (worker processes, CPU) or ``kubernetes`` (GPU pods)."""
    shm_dir: Path
    """Node shared-memory folder the precursor fills and trials load from (``ACME_EVAL_SHM_DIR``, default
    ``/dev/shm/acme-models``)."""
    data_dir: Path
    """Folder of the evaluation datasets (``ACME_EVAL_DATA_DIR``, default ``include/eval``): ``<dataset>.jsonl``
    there or in one of its sub-folders (``real/``, ``tiny/``)."""
    gpus_per_node: int
    """GPUs of one evaluation node (``ACME_EVAL_GPUS_PER_NODE``, default 8)."""
    code_timeout_s: float
    """Wall-clock limit of one generated program's unit test (``ACME_EVAL_CODE_TIMEOUT_S``, default 10)."""
    gpu_lease_timeout_s: float
    """How long an inference step waits for a free GPU of its node (``ACME_EVAL_GPU_LEASE_TIMEOUT_S``, 21600)."""
    gpu_pool: str
    """Airflow pool of inference tasks (``ACME_EVAL_GPU_POOL``; size: 2 × GPU slots, see warm start)."""
    cpu_pool: str
    """Airflow pool of metric tasks (``ACME_EVAL_CPU_POOL``; size: CPU cores given to metrics)."""
    node_names: tuple[str, ...]
    """kubernetes: node names for plan nodes 0, 1, … (``ACME_EVAL_NODE_NAMES``, comma-separated)."""
    image: str | None
    """kubernetes: image with this project installed (``ACME_EVAL_IMAGE``; default: the GPU pod default)."""
    pod_poll_s: float
    """kubernetes: how often the operator polls a pod (``ACME_EVAL_POD_POLL_S``, default 5)."""
    model_backend: str
    """Inference runtime of a trial (``ACME_EVAL_MODEL_BACKEND``): ``llama_cpp`` (GGUF in-process, default),
    ``transformers`` (HF checkpoint or GGUF), ``openai`` (an OpenAI-compatible completion server)."""
    model_endpoint: str
    """``openai`` backend: base URL ending in ``/v1`` (``ACME_EVAL_MODEL_ENDPOINT``; vLLM, llama.cpp's server)."""
    model_name: str
    """``openai`` backend: the model name the server serves (``ACME_EVAL_MODEL_NAME``, default ``default``)."""
    model_score_prefix: str
    """``openai`` backend: text sent before every scored prompt (``ACME_EVAL_MODEL_SCORE_PREFIX``); for
    llama.cpp's server the model's BOS token (``<|im_start|>`` for SmolLM2), without which its echoed
    log-probabilities are one token off."""
    model_context_tokens: int
    """``llama_cpp``: context window in tokens, prompt + answer (``ACME_EVAL_MODEL_CONTEXT``, default 2048)."""
    model_threads: int
    """``llama_cpp``: CPU threads for prompts and generation (``ACME_EVAL_MODEL_THREADS``, default 1; more
    only on dedicated cores: threads spin-wait on a shared CPU)."""
    max_new_tokens: int
    """Longest generated answer of a ``match`` or ``code_exec`` sample (``ACME_EVAL_MAX_NEW_TOKENS``, 256)."""
    batch_size: int
    """Samples per model call (``ACME_EVAL_BATCH_SIZE``, default 1: ``transformers`` and servers batch; 1
    measures every sample alone)."""
    gpu_pod_image: str
    """Default image of a GPU pod (``ACME_GPU_POD_IMAGE``): one place to bump the CUDA/torch image."""
    gpu_pod_namespace: str
    """Namespace of GPU pods (``ACME_GPU_POD_NAMESPACE``, default ``training``): GPU quotas are per namespace."""
    gpu_pod_kubernetes_conn_id: str
    """Airflow connection of type ``kubernetes`` that says where the API is (``ACME_GPU_POD_KUBERNETES_CONN_ID``,
    default ``kubernetes_default``)."""
    model_api_key: str = field(default="", repr=False)
    """``openai`` backend: bearer token, if the server wants one (``ACME_EVAL_MODEL_API_KEY``); never shown."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> EvaluationSettings:
        read = Env(environ)
        return cls(
            backend=read.choice("ACME_EVAL_BACKEND", "local", EVAL_BACKENDS),
            shm_dir=read.path("ACME_EVAL_SHM_DIR", "/dev/shm/acme-models"),
            data_dir=read.path("ACME_EVAL_DATA_DIR", _include_dir(read) / "eval"),
            gpus_per_node=int(read.number("ACME_EVAL_GPUS_PER_NODE", 8, above=0, integer=True)),
            code_timeout_s=read.number("ACME_EVAL_CODE_TIMEOUT_S", 10, above=0),
            gpu_lease_timeout_s=read.number("ACME_EVAL_GPU_LEASE_TIMEOUT_S", 21600, above=0),
            gpu_pool=read.text("ACME_EVAL_GPU_POOL", "acme_eval_gpu"),
            cpu_pool=read.text("ACME_EVAL_CPU_POOL", "acme_eval_cpu"),
            node_names=tuple(n.strip() for n in read.text("ACME_EVAL_NODE_NAMES").split(",") if n.strip()),
            image=read.text("ACME_EVAL_IMAGE") or None,
            pod_poll_s=read.number("ACME_EVAL_POD_POLL_S", 5, above=0),
            model_backend=read.choice(
                "ACME_EVAL_MODEL_BACKEND", "llama_cpp", (*EVAL_MODEL_BACKENDS, "llama-cpp")
            ).replace("-", "_"),
            model_endpoint=read.text("ACME_EVAL_MODEL_ENDPOINT"),
            model_name=read.text("ACME_EVAL_MODEL_NAME", "default"),
            model_score_prefix=read.environ.get("ACME_EVAL_MODEL_SCORE_PREFIX", ""),  # spaces may matter
            model_context_tokens=int(read.number("ACME_EVAL_MODEL_CONTEXT", 2048, above=0)),
            model_threads=int(read.number("ACME_EVAL_MODEL_THREADS", 1, above=0, integer=True)),
            max_new_tokens=int(read.number("ACME_EVAL_MAX_NEW_TOKENS", 256, above=0)),
            batch_size=int(read.number("ACME_EVAL_BATCH_SIZE", 1, above=0)),
            gpu_pod_image=read.text("ACME_GPU_POD_IMAGE", DEFAULT_GPU_POD_IMAGE),
            gpu_pod_namespace=read.text("ACME_GPU_POD_NAMESPACE", "training"),
            gpu_pod_kubernetes_conn_id=read.text("ACME_GPU_POD_KUBERNETES_CONN_ID", "kubernetes_default"),
            model_api_key=read.environ.get("ACME_EVAL_MODEL_API_KEY", ""),
        )

    def node_names_for(self, nodes: int) -> list[str]:
        """Kubernetes node names of plan nodes ``0..nodes-1``; a ConfigError when fewer are configured."""
        if len(self.node_names) < nodes:
            raise ConfigError(
                f"ACME_EVAL_NODE_NAMES lists {len(self.node_names)} node(s) but the plan uses {nodes}: "
                "name one Kubernetes node per plan node"
            )
        return list(self.node_names[:nodes])


def evaluation() -> EvaluationSettings:
    return EvaluationSettings.from_env()


# --------------------------------------------------------------------------------------------------
# Recovery: faulty nodes, checkpoints and restarts (section of the recovery area)
# --------------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------------
# Detection: hangs and fail-slow from telemetry (section of the detection area)
# --------------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------------
# Report: the characterization report (section of the report area)
# --------------------------------------------------------------------------------------------------
