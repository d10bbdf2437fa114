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
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from acme import lake_keys
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
        return cls(
            include_dir=include,
            lake_uri=read.text("ACME_LAKE_URI", str(PROJECT_ROOT / "lake")),
            aws_conn_id=read.text("ACME_AWS_CONN_ID", "aws_default"),
            clusters_file=read.path("ACME_CLUSTERS_FILE", include / "config" / "clusters.yaml"),
            reference_dir=read.path("ACME_REFERENCE_DIR", PROJECT_ROOT.parent / "shared" / "reference"),
            start_date=start,
            catchup=read.flag("ACME_CATCHUP"),
            max_active_runs=read.integer("ACME_MAX_ACTIVE_RUNS", 4, low=1),
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
    max_input_bytes: int = 1024**3
    """Largest input a parser that holds its input whole accepts (``ACME_MAX_INPUT_BYTES``, 1 GiB)."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> JobsSettings:
        read = Env(environ)
        return cls(
            job_type_rules=read.path("ACME_JOB_TYPE_RULES", _include_dir(read) / "config" / "job_types.yaml"),
            quarantine_max_share=read.share("ACME_QUARANTINE_MAX_SHARE", 0.01),
            max_input_bytes=read.integer("ACME_MAX_INPUT_BYTES", 1024**3, low=1),
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

DIAGNOSIS_EMBEDDINGS = ("minilm", "lexical")
DEFAULT_DIAGNOSIS_LOG_PATTERN = "{lake}/" + lake_keys.job_logs("{cluster}", "{job_id}") + "/*.log*"
_DIAGNOSIS_LOG_PATTERN_FIELDS = ("lake", "cluster", "job_id", "date")


def _diagnosis_log_pattern(read: Env) -> str:
    import string

    pattern = read.text("ACME_DIAGNOSIS_LOG_PATTERN", DEFAULT_DIAGNOSIS_LOG_PATTERN)
    for _, placeholder, _, _ in string.Formatter().parse(pattern):
        if placeholder is not None and placeholder not in _DIAGNOSIS_LOG_PATTERN_FIELDS:
            raise ConfigError(f"ACME_DIAGNOSIS_LOG_PATTERN has an unknown placeholder {{{placeholder}}}")
    return pattern


@dataclass(frozen=True)
class DiagnosisSettings:
    log_pattern: str
    """Where a job's log files are (``ACME_DIAGNOSIS_LOG_PATTERN``): a glob with ``{lake}``, ``{cluster}``,
    ``{job_id}`` and ``{date}`` (the job's submit day) placeholders."""
    log_root: str
    """The folder (or URL prefix) every log must be under (``ACME_DIAGNOSIS_LOG_ROOT``, default
    ``{lake}/logs``): a log location given in a manual run's Params may not leave it."""
    embedding: str
    """Which embedding the vector store uses (``ACME_DIAGNOSIS_EMBEDDING``): ``minilm`` (the packaged
    all-MiniLM-L6-v2, falling back to lexical when it cannot load) or ``lexical`` (hashed TF-IDF)."""
    min_confidence: float
    """A diagnosis at least this confident stops the pipeline (``ACME_DIAGNOSIS_MIN_CONFIDENCE``, 0.7):
    below it, retrieval and then the LLM agent are asked."""
    retrieval_min_similarity: float | None
    """Past cases less similar than this do not vote (``ACME_DIAGNOSIS_RETRIEVAL_MIN_SIMILARITY``); unset:
    the embedder's own threshold, measured on the labelled set (0.6 for the model, 0.3 for lexical)."""
    retrieval_k: int
    """How many nearest past cases are returned and vote (``ACME_DIAGNOSIS_RETRIEVAL_K``, 5)."""
    learn_min_confidence: float
    """An agent answer at least this confident may teach a rule (``ACME_DIAGNOSIS_LEARN_MIN_CONFIDENCE``)."""
    max_jobs_per_run: int
    """At most this many failed jobs *with a log* are diagnosed by one DAG run (``ACME_DIAGNOSIS_MAX_JOBS``,
    500); the others wait in the carry-over queue for the next run. Jobs without a log are not capped:
    their bulk diagnosis from metadata takes seconds for thousands."""
    chunks: int
    """At most this many mapped tasks diagnose one run's jobs with a log (``ACME_DIAGNOSIS_CHUNKS``, 4):
    each loads the embedding model at most once for its whole chunk."""
    claim_ttl_s: float
    """A queued job claimed by a run that did not diagnose it is taken by another run after this many
    seconds (``ACME_DIAGNOSIS_CLAIM_TTL_S``, 21600: a run that failed for good, not one still working)."""
    concurrency: int
    """Diagnose tasks running at once (``ACME_DIAGNOSIS_CONCURRENCY``, 2: model memory, LLM pressure)."""
    # Triage: an operator asked for the reason (acme.diagnosis.triage, docs/approvals.md).
    triage: bool = True
    """``ACME_TRIAGE`` (default true): ask an operator about the diagnoses below, through the
    ``diagnose_failures`` run's human-in-the-loop form; false: never ask."""
    triage_min_gpu_hours: float = 64.0
    """``ACME_TRIAGE_MIN_GPU_HOURS`` (default 64): only jobs that lost at least this many GPU-hours are
    asked about (a 256-GPU job after 15 minutes; not the thousand small evaluation jobs of a night)."""
    triage_min_confidence: float = 0.5
    """``ACME_TRIAGE_MIN_CONFIDENCE`` (default 0.5): a diagnosis below it (or Unknown) is asked about. A
    symptom rule alone (an NCCL watchdog timeout, a connection reset) gives 0.5 and is not asked about by
    default: on the labelled corpus those answers were right, and asking about each would cost 20
    questions per 100 failures (benchmarks/README.md); rival rules, weak votes and Unknown are asked."""
    triage_max_questions: int = 20
    """``ACME_TRIAGE_MAX_QUESTIONS`` (default 20): most questions one diagnosis run asks (the largest
    jobs first); the others are not asked, and may be at a later run."""
    triage_timeout_s: float = 43_200.0
    """``ACME_TRIAGE_TIMEOUT_S`` (default 43200, 12 h): an unanswered triage question expires: nothing is
    learned, and the same log template is not asked about again."""
    labelled_lines: Path | None = None
    """``ACME_DIAGNOSIS_LABELLED_LINES``: the labelled corpus of error lines a learned rule may not change
    to a wrong reason (YAML as ``tests/fixtures/diagnosis/corpus/lines.yaml``, the default when it exists;
    ``none``: only the lake's stored cases are checked)."""
    trusted_models: tuple[str, ...] = ()
    """``ACME_DIAGNOSIS_TRUSTED_MODELS`` (comma-separated model names, default none): the LLM agent's answers
    from these models are taken as they are; any other model's answer is triaged like an Unknown."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> DiagnosisSettings:
        read = Env(environ)
        min_similarity = None
        if read.text("ACME_DIAGNOSIS_RETRIEVAL_MIN_SIMILARITY", ""):
            min_similarity = read.number("ACME_DIAGNOSIS_RETRIEVAL_MIN_SIMILARITY", "0.5", low=0.0, high=1.0)
        return cls(
            log_pattern=_diagnosis_log_pattern(read),
            log_root=read.text("ACME_DIAGNOSIS_LOG_ROOT", "{lake}/logs"),
            embedding=read.choice("ACME_DIAGNOSIS_EMBEDDING", "lexical", DIAGNOSIS_EMBEDDINGS),
            min_confidence=read.number("ACME_DIAGNOSIS_MIN_CONFIDENCE", "0.7", low=0.0, high=1.0),
            retrieval_min_similarity=min_similarity,
            retrieval_k=int(read.number("ACME_DIAGNOSIS_RETRIEVAL_K", "5", low=1, high=100)),
            learn_min_confidence=read.number(
                "ACME_DIAGNOSIS_LEARN_MIN_CONFIDENCE", "0.85", low=0.0, high=1.0
            ),
            max_jobs_per_run=int(read.number("ACME_DIAGNOSIS_MAX_JOBS", "500", low=1, high=100_000)),
            chunks=int(read.number("ACME_DIAGNOSIS_CHUNKS", "4", low=1, high=64)),
            claim_ttl_s=read.number("ACME_DIAGNOSIS_CLAIM_TTL_S", "21600", low=60, high=30 * 86_400),
            concurrency=int(read.number("ACME_DIAGNOSIS_CONCURRENCY", "2", low=1, high=256)),
            triage=read.flag("ACME_TRIAGE", True),
            triage_min_gpu_hours=read.number("ACME_TRIAGE_MIN_GPU_HOURS", "64", low=0),
            triage_min_confidence=read.number("ACME_TRIAGE_MIN_CONFIDENCE", "0.5", low=0.0, high=1.0),
            triage_max_questions=read.integer("ACME_TRIAGE_MAX_QUESTIONS", 20, low=0, high=1_000),
            triage_timeout_s=read.number("ACME_TRIAGE_TIMEOUT_S", "43200", above=0),
            labelled_lines=_labelled_lines(read),
            trusted_models=tuple(
                m.strip() for m in read.text("ACME_DIAGNOSIS_TRUSTED_MODELS", "").split(",") if m.strip()
            ),
        )


def _labelled_lines(read: Env) -> Path | None:
    raw = read.text("ACME_DIAGNOSIS_LABELLED_LINES", "")
    if raw.lower() == "none":
        return None
    if raw:
        return Path(raw)
    bundled = PROJECT_ROOT / "tests" / "fixtures" / "diagnosis" / "corpus" / "lines.yaml"
    return bundled if bundled.exists() else None


def diagnosis() -> DiagnosisSettings:
    return DiagnosisSettings.from_env()


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
        bounds = {
            key: read.integer(name, 0, low=1) if read.text(name) else None
            for name, key in (
                ("ACME_LLM_MAX_LOG_LINES", "max_log_lines"),
                ("ACME_LLM_MAX_LOG_CHARS", "max_log_chars"),
            )
        }
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

DEFAULT_GPU_POD_IMAGE = "ghcr.io/acme/allgather-check:torch2.13-cu12"


@dataclass(frozen=True)
class ClusterAccessSettings:
    """How the pipeline reaches the clusters' own control planes, for every area that acts on them (the
    evaluation's GPU pods, recovery's check pods, cordons and restarts): one place to set them. An area's
    own variable (``ACME_GPU_POD_*``, ``ACME_RECOVERY_*``) overrides the shared one for that area only."""

    kubernetes_conn_id: str
    """Airflow connection of type ``kubernetes`` saying where the API is (``ACME_KUBERNETES_CONN_ID``, default
    ``kubernetes_default``; without one the client loads the default kubeconfig)."""
    kubernetes_namespace: str
    """Namespace of the pipeline's GPU pods (``ACME_KUBERNETES_NAMESPACE``, default ``training``): GPU quotas
    are per namespace."""
    gpu_image: str
    """Image of a GPU pod: torch, CUDA and this project (``ACME_GPU_POD_IMAGE``): one place to bump it."""
    slurm_command_prefix: tuple[str, ...]
    """What runs Slurm's commands (``srun``, ``sbatch``, ``scontrol``) on the cluster
    (``ACME_SLURM_COMMAND_PREFIX``, e.g. "ssh slurm-login"; split on spaces, no shell; default: here)."""
    slurm_partition: str | None
    """Partition of the pipeline's Slurm jobs (``ACME_SLURM_PARTITION``, default: the cluster's default)."""
    slurm_python: str
    """The Python with torch on the Slurm nodes (``ACME_SLURM_PYTHON``: a path the nodes share; ``python3``)."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ClusterAccessSettings:
        read = Env(environ)
        namespace = read.text("ACME_KUBERNETES_NAMESPACE", "training")
        if not _K8S_NAME.match(namespace):
            raise ConfigError(f"ACME_KUBERNETES_NAMESPACE={namespace!r} is not a Kubernetes namespace name")
        return cls(
            kubernetes_conn_id=read.text("ACME_KUBERNETES_CONN_ID", "kubernetes_default"),
            kubernetes_namespace=namespace,
            gpu_image=read.text("ACME_GPU_POD_IMAGE", DEFAULT_GPU_POD_IMAGE),
            slurm_command_prefix=tuple(read.text("ACME_SLURM_COMMAND_PREFIX").split()),
            slurm_partition=read.text("ACME_SLURM_PARTITION") or None,
            slurm_python=read.text("ACME_SLURM_PYTHON", "python3"),
        )


EVAL_BACKENDS = ("local", "kubernetes")
EVAL_MODEL_BACKENDS = ("llama_cpp", "transformers", "openai")


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
    """Default image of a GPU pod (:class:`ClusterAccessSettings`: ``ACME_GPU_POD_IMAGE``)."""
    gpu_pod_namespace: str
    """Namespace of GPU pods (``ACME_GPU_POD_NAMESPACE``, default: ``ACME_KUBERNETES_NAMESPACE``)."""
    gpu_pod_kubernetes_conn_id: str
    """Airflow connection of the Kubernetes API for GPU pods (``ACME_GPU_POD_KUBERNETES_CONN_ID``, default:
    ``ACME_KUBERNETES_CONN_ID``)."""
    model_api_key: str = field(default="", repr=False)
    """``openai`` backend: bearer token, if the server wants one (``ACME_EVAL_MODEL_API_KEY``); never shown."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> EvaluationSettings:
        read = Env(environ)
        access = ClusterAccessSettings.from_env(environ)
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
            gpu_pod_image=access.gpu_image,
            gpu_pod_namespace=read.text("ACME_GPU_POD_NAMESPACE", access.kubernetes_namespace),
            gpu_pod_kubernetes_conn_id=read.text(
                "ACME_GPU_POD_KUBERNETES_CONN_ID", access.kubernetes_conn_id
            ),
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

# The recovery default backend is ``simulated``: the demo and the tests run with no cluster.
RECOVERY_BACKENDS = ("simulated", "kubernetes", "slurm")
DEFAULT_CHECKPOINT_URI_PATTERN = "{lake}/" + lake_keys.job_checkpoints("{cluster}", "{job_id}")
# The placeholders a checkpoint location pattern may use (this setting's, and each cluster's
# ``checkpoint_uri_pattern`` in ``clusters.yaml``, checked by ``acme.clusters`` with the same function).
CHECKPOINT_PLACEHOLDERS = ("lake", "cluster", "job_id")


def checked_checkpoint_pattern(pattern: object, where: str) -> str:
    """``pattern`` when it is a non-empty string whose placeholders are ``{lake}``, ``{cluster}`` and
    ``{job_id}`` only; else a ConfigError that starts with ``where``."""
    import string

    if not isinstance(pattern, str) or not pattern.strip():
        raise ConfigError(f"{where}: must be a non-empty location pattern, got {pattern!r}")
    try:
        names = [name for _, name, _, _ in string.Formatter().parse(pattern) if name is not None]
    except ValueError as exc:
        raise ConfigError(f"{where}: {pattern!r} is not a pattern: {exc}") from None
    unknown = [name for name in names if name not in CHECKPOINT_PLACEHOLDERS]
    if unknown:
        raise ConfigError(
            f"{where}: unknown placeholder {{{unknown[0]}}} in {pattern!r} "
            f"(use {', '.join('{' + n + '}' for n in CHECKPOINT_PLACEHOLDERS)})"
        )
    return pattern.strip()


_K8S_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


@dataclass(frozen=True)
class RecoverySettings:
    """Everything recovery reads from the environment (``ACME_RECOVERY_*``, ``ACME_CHECKPOINT_URI_PATTERN``,
    ``ACME_FLIGHT_RECORDER_URI_PATTERN``),
    checked once; defaults that run offline."""

    backend: str
    """``ACME_RECOVERY_BACKEND``: ``simulated`` (default, offline), ``kubernetes`` or ``slurm``."""
    namespace: str
    """``ACME_RECOVERY_NAMESPACE`` (default: ``ACME_KUBERNETES_NAMESPACE``): the namespace of the check pods."""
    check_image: str
    """``ACME_RECOVERY_CHECK_IMAGE`` (default: ``ACME_GPU_POD_IMAGE``): the image must hold torch and
    acme/recovery/allgather_check.py (it runs alone too)."""
    gpus_per_node: int
    """``ACME_RECOVERY_GPUS_PER_NODE`` (default 8)."""
    max_nodes: int
    """``ACME_RECOVERY_MAX_NODES`` (default 2): most nodes one recovery may cordon (blast radius)."""
    max_share: float
    """``ACME_RECOVERY_MAX_SHARE`` (default 0.05): most share of a job's nodes one recovery may cordon."""
    kubernetes_conn_id: str
    """``ACME_RECOVERY_KUBERNETES_CONN_ID`` (default: ``ACME_KUBERNETES_CONN_ID``)."""
    taint_key: str
    """``ACME_RECOVERY_TAINT_KEY`` (default ``acme.io/faulty``)."""
    check_timeout_s: float
    """``ACME_RECOVERY_CHECK_TIMEOUT_S`` (default 60)."""
    check_args: tuple[str, ...]
    """``ACME_RECOVERY_CHECK_ARGS``: more arguments for the check program, e.g. "--allgather-mb 64
    --matmul-size 8192" (split on spaces)."""
    pod_startup_timeout_s: int
    """``ACME_RECOVERY_POD_STARTUP_TIMEOUT_S`` (default 300)."""
    simulated_jobs_file: Path
    """``ACME_RECOVERY_SIMULATED_JOBS`` (default include/recovery/simulated_jobs.yaml)."""
    slurm_command_prefix: tuple[str, ...]
    """``ACME_RECOVERY_SLURM_COMMAND_PREFIX`` (default: ``ACME_SLURM_COMMAND_PREFIX``), e.g. "ssh slurm-login"
    to run srun/sbatch/scontrol on a login node (split on spaces, no shell)."""
    slurm_check_script: str
    """``ACME_RECOVERY_SLURM_CHECK_SCRIPT`` (default acme/recovery/allgather_check.py)."""
    slurm_partition: str | None
    """``ACME_RECOVERY_SLURM_PARTITION`` (default: ``ACME_SLURM_PARTITION``, else none)."""
    slurm_python: str
    """``ACME_RECOVERY_SLURM_PYTHON`` (default: ``ACME_SLURM_PYTHON``, ``python3``): the Python with torch on the
    nodes (a path the nodes share, e.g. a venv on NFS)."""
    lock_ttl_s: float
    """``ACME_RECOVERY_LOCK_TTL_S`` (default 7200): a job's recovery marker older than this is stale."""
    dry_run: bool
    """Whether a recovery is a dry run unless its run says otherwise (``ACME_RECOVERY_DRY_RUN``, default
    true): the one setting for both the diagnosis' recovery requests and ``recover_training``'s Param
    default. ``false`` makes both live (cordons and restarts)."""
    checkpoint_uri_pattern: str | None
    """Where a job's checkpoints are when its run gives no ``checkpoint_uri``, its job record none and its
    cluster's entry in ``include/config/clusters.yaml`` no ``checkpoint_uri_pattern``
    (``ACME_CHECKPOINT_URI_PATTERN``, None when unset: ``DEFAULT_CHECKPOINT_URI_PATTERN``,
    ``{lake}/checkpoints/cluster={cluster}/job={job_id}``; e.g. ``s3://ckpt/{cluster}/{job_id}``).
    Placeholders: ``{lake}``, ``{cluster}``, ``{job_id}``."""
    flight_recorder_uri_pattern: str | None = None
    """Where a hung job's PyTorch Flight Recorder dumps are written when its run gives no
    ``flight_recorder_uri`` and its cluster's entry in ``clusters.yaml`` no ``flight_recorder_uri_pattern``
    (``ACME_FLIGHT_RECORDER_URI_PATTERN``, e.g. ``/shared/fr/{cluster}/{job_id}``, the folder the jobs'
    ``TORCH_FR_DUMP_TEMP_FILE`` points into; unset: no dumps are looked for). Same placeholders."""
    # Approval before live actions (acme.recovery.approval, docs/approvals.md).
    auto_approve: bool = True
    """``ACME_RECOVERY_AUTO_APPROVE`` (default true): a live recovery the policy covers acts without asking;
    false: every live recovery asks a person first."""
    auto_approve_sources: tuple[str, ...] = ("rule",)
    """``ACME_RECOVERY_AUTO_APPROVE_SOURCES`` (default ``rule``, comma-separated): who must have decided the
    failure for the policy to approve (rule, retrieval, operator; never llm or manual)."""
    auto_approve_max_nodes: int = 1
    """``ACME_RECOVERY_AUTO_APPROVE_MAX_NODES`` (default 1): most nodes an auto-approved recovery cordons."""
    approval_timeout_s: float = 3600.0
    """``ACME_RECOVERY_APPROVAL_TIMEOUT_S`` (default 3600): an approval question unanswered this long times
    out, and the recovery ends as a plan (never a live action)."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> RecoverySettings:
        """The current settings; a ConfigError names the bad variable."""
        read = Env(environ)
        access = ClusterAccessSettings.from_env(environ)
        namespace = read.text("ACME_RECOVERY_NAMESPACE", access.kubernetes_namespace)
        if not _K8S_NAME.match(namespace):
            raise ConfigError(f"ACME_RECOVERY_NAMESPACE={namespace!r} is not a Kubernetes namespace name")
        pattern = read.text("ACME_CHECKPOINT_URI_PATTERN") or None
        if pattern is not None:
            pattern = checked_checkpoint_pattern(pattern, "ACME_CHECKPOINT_URI_PATTERN")
        dumps = read.text("ACME_FLIGHT_RECORDER_URI_PATTERN") or None
        if dumps is not None:
            dumps = checked_checkpoint_pattern(dumps, "ACME_FLIGHT_RECORDER_URI_PATTERN")
        return cls(
            backend=read.choice("ACME_RECOVERY_BACKEND", "simulated", RECOVERY_BACKENDS),
            namespace=namespace,
            check_image=read.text("ACME_RECOVERY_CHECK_IMAGE", access.gpu_image),
            gpus_per_node=int(read.number("ACME_RECOVERY_GPUS_PER_NODE", "8", above=0, integer=True)),
            max_nodes=read.integer("ACME_RECOVERY_MAX_NODES", 2, low=0),
            max_share=read.number("ACME_RECOVERY_MAX_SHARE", "0.05"),
            kubernetes_conn_id=read.text("ACME_RECOVERY_KUBERNETES_CONN_ID", access.kubernetes_conn_id),
            taint_key=read.text("ACME_RECOVERY_TAINT_KEY", "acme.io/faulty"),
            check_timeout_s=read.number("ACME_RECOVERY_CHECK_TIMEOUT_S", "60", above=0),
            check_args=tuple(read.text("ACME_RECOVERY_CHECK_ARGS", "").split()),
            pod_startup_timeout_s=int(
                read.number("ACME_RECOVERY_POD_STARTUP_TIMEOUT_S", "300", above=0, integer=True)
            ),
            simulated_jobs_file=read.path(
                "ACME_RECOVERY_SIMULATED_JOBS", _include_dir(read) / "recovery" / "simulated_jobs.yaml"
            ),
            slurm_command_prefix=tuple(
                read.text("ACME_RECOVERY_SLURM_COMMAND_PREFIX").split() or access.slurm_command_prefix
            ),
            slurm_check_script=read.text(
                "ACME_RECOVERY_SLURM_CHECK_SCRIPT",
                str(Path(__file__).parent / "recovery" / "allgather_check.py"),
            ),
            slurm_partition=read.text("ACME_RECOVERY_SLURM_PARTITION") or access.slurm_partition,
            slurm_python=read.text("ACME_RECOVERY_SLURM_PYTHON", access.slurm_python),
            lock_ttl_s=read.number("ACME_RECOVERY_LOCK_TTL_S", "7200", above=0),
            dry_run=read.flag("ACME_RECOVERY_DRY_RUN", True),
            checkpoint_uri_pattern=pattern,
            flight_recorder_uri_pattern=dumps,
            auto_approve=read.flag("ACME_RECOVERY_AUTO_APPROVE", True),
            auto_approve_sources=_auto_approve_sources(read),
            auto_approve_max_nodes=read.integer("ACME_RECOVERY_AUTO_APPROVE_MAX_NODES", 1, low=0),
            approval_timeout_s=read.number("ACME_RECOVERY_APPROVAL_TIMEOUT_S", "3600", above=0),
        )


AUTO_APPROVE_SOURCES = ("rule", "retrieval", "operator")


def _auto_approve_sources(read: Env) -> tuple[str, ...]:
    """The diagnosis sources the auto-approve policy trusts; the LLM agent and a manual start never."""
    raw = read.text("ACME_RECOVERY_AUTO_APPROVE_SOURCES", "rule")
    sources = tuple(part.strip().lower() for part in raw.split(",") if part.strip())
    for source in sources:
        if source not in AUTO_APPROVE_SOURCES:
            raise ConfigError(
                f"ACME_RECOVERY_AUTO_APPROVE_SOURCES has {source!r}: only {', '.join(AUTO_APPROVE_SOURCES)} "
                "may be trusted (the LLM agent's diagnoses are dry runs; a manual start always asks)"
            )
    return sources


def recovery() -> RecoverySettings:
    return RecoverySettings.from_env()


# --------------------------------------------------------------------------------------------------
# Detection: hangs and fail-slow from telemetry (section of the detection area)
# --------------------------------------------------------------------------------------------------


DETECTION_SOURCES = ("auto", "lake", "prometheus")
STORAGE_WRITE_PROMQL = "sum by (instance) (rate(node_mountstats_nfs_total_write_bytes_total{$shard}[1m]))"


@dataclass(frozen=True)
class DetectionSettings:
    """Thresholds of hang and fail-slow detection (``acme.detection``, the ``detect_hangs`` DAG).

    Why these defaults (docs/dags.md, "Hang and fail-slow detection", has the measurements):

    * A hung collective keeps the NCCL kernel resident and spinning: nvidia-smi reads 100 % while the power
      stays near idle and nothing moves (NVIDIA/nccl#968, #257, #238, #537, cupy/cupy#3557). Tensor cores do
      nothing and RDMA traffic stops -- the two signals ByteRobust (Wan et al., SOSP'25) checks ("zero RDMA
      traffic for minutes, low tensor-core activity"). Healthy pauses of a training job (checkpoint writes,
      data-loading stalls) run no kernel at all, and evaluation passes use tensor cores, so the signature
      "tensor < 0.5 % and RDMA < 1 MB/s while GPU utilization >= 90 %" does not occur in a healthy job and
      ``ACME_DETECT_HANG_MINUTES`` can be short: 2.5 min, which with a DAG every 2 min keeps the detection
      under the 5-minute goal. SM activity is not required to be near 0: one thread block per NCCL channel
      (up to 32 on A100) keeps up to ~30 % of the 108 SMs active (``ACME_DETECT_HANG_SM_MAX``, 40 %).
    * A hang with no kernel resident (a deadlock in Python or the data loader) looks like a healthy pause;
      it is called a stall only after ``ACME_DETECT_STALL_MINUTES`` (10 min, ByteRobust's "0 RDMA traffic
      within 10 mins"), longer than the checkpoint writes and data stalls of a healthy job.
    * A checkpoint write idles the GPUs and the RDMA network too, and its end -- every rank waiting in a
      barrier for the slowest writer -- is a hang's exact signature. What tells them apart is the shared file
      system: a node writing at least ``ACME_DETECT_STORAGE_WRITE_BPS`` (10 MB/s) is writing a checkpoint.
      A per-node checkpoint shard is GBs (a 123B model's weights and Adam states, ~14 B a parameter, are
      ~1.7 TB, ~7 GB per node of 256) written in minutes, i.e. 10s to 100s of MB/s, while a training node's
      background writes (logs, metrics) are kB/s to ~1 MB/s. So a pause or spin while some node writes is a
      checkpoint (never a hang nor a stall), and a spin while no node writes is a hang after
      ``ACME_DETECT_HANG_MINUTES`` even right after a pause. The writes come from the ``storage_write``
      metric (metrics lake; from Prometheus through ``ACME_DETECT_STORAGE_WRITE_PROMQL``, default the NFS
      client bytes of node_exporter's mountstats collector); where it is not published, spinning right after
      a pause waits for the stall rule, as a checkpoint barrier may be what it is.
    * Fail-slow: a node whose median GPU SM activity, or whose InfiniBand traffic, is below
      ``ACME_DETECT_SLOW_RATIO`` (0.7, the relative performance threshold of NVIDIA's straggler detection in
      nvidia-resiliency-ext) times its peers' median in ``ACME_DETECT_SLOW_WINDOWS`` (3) consecutive windows
      of ``ACME_DETECT_SLOW_WINDOW_MINUTES`` (5) while the job computes (peers' SM >= 10 %). ByteRobust
      flags the degrader after 5 rounds; three 5-minute windows keep a one-off slow window (a long data
      shard, a GC pause) from raising an alarm.
    """

    hang_minutes: float = 2.5
    """Minutes a collective must spin without progress to be a hang (``ACME_DETECT_HANG_MINUTES``, 0.25-120)."""
    stall_minutes: float = 10.0
    """Minutes without progress and without a resident kernel to be a stall (``ACME_DETECT_STALL_MINUTES``,
    0.25-240)."""
    hang_tensor_max: float = 0.5
    """% tensor-core activity that counts as none (``ACME_DETECT_HANG_TENSOR_MAX``, 0-100)."""
    hang_sm_max: float = 40.0
    """% SM activity a spinning NCCL kernel can still show (``ACME_DETECT_HANG_SM_MAX``, 0-100)."""
    busy_util_min: float = 90.0
    """% GPU utilization at which a kernel is resident (``ACME_DETECT_BUSY_UTIL_MIN``, 0-100)."""
    ib_idle_bps: float = 1e6
    """InfiniBand traffic per node, transmitted + received, that counts as none (``ACME_DETECT_IB_IDLE_BPS``,
    B/s, >= 0)."""
    storage_write_bps: float = 10e6
    """Per node: at least this (B/s) written to the shared file system is a checkpoint being written
    (``ACME_DETECT_STORAGE_WRITE_BPS``, >= 1)."""
    storage_write_promql: str = STORAGE_WRITE_PROMQL
    """PromQL of the nodes' storage writes when the metrics come from Prometheus
    (``ACME_DETECT_STORAGE_WRITE_PROMQL``; ``none`` = not read, empty here)."""
    min_coverage: float = 0.8
    """Share of a job's GPUs with a sample in a step for the step to count (``ACME_DETECT_MIN_COVERAGE``,
    0.01-1)."""
    slow_ratio: float = 0.7
    """A node below this times its peers' median is slow (``ACME_DETECT_SLOW_RATIO``, 0.01-0.99)."""
    slow_windows: int = 3
    """Consecutive slow windows before a fail-slow alarm (``ACME_DETECT_SLOW_WINDOWS``, 1-100)."""
    slow_window_minutes: float = 5.0
    """Length of one fail-slow window (``ACME_DETECT_SLOW_WINDOW_MINUTES``, 0.5-120)."""
    slow_active_sm_min: float = 10.0
    """Peers' SM % above which the job counts as computing (``ACME_DETECT_SLOW_ACTIVE_SM_MIN``, 0-100)."""
    slow_min_nodes: int = 3
    """Smallest job (nodes) with a majority to compare a node with (``ACME_DETECT_SLOW_MIN_NODES``, >= 3)."""
    job_lookback_days: int = 14
    """Submit days read for running jobs: an older job still running is not seen
    (``ACME_DETECT_JOB_LOOKBACK_DAYS``, 1-366)."""
    source: str = "auto"
    """Where telemetry is read: ``auto`` (the cluster's metrics source), ``lake`` or ``prometheus``
    (``ACME_DETECT_SOURCE``)."""

    @property
    def lookback_minutes(self) -> float:
        """How much telemetry one pass reads: enough for the longest rule."""
        return max(self.stall_minutes, self.hang_minutes, self.slow_windows * self.slow_window_minutes) + 1

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> DetectionSettings:
        read = Env(environ)
        promql = read.text("ACME_DETECT_STORAGE_WRITE_PROMQL", STORAGE_WRITE_PROMQL)
        return cls(
            hang_minutes=read.number("ACME_DETECT_HANG_MINUTES", 2.5, low=0.25, high=120),
            stall_minutes=read.number("ACME_DETECT_STALL_MINUTES", 10, low=0.25, high=240),
            hang_tensor_max=read.number("ACME_DETECT_HANG_TENSOR_MAX", 0.5, low=0, high=100),
            hang_sm_max=read.number("ACME_DETECT_HANG_SM_MAX", 40, low=0, high=100),
            busy_util_min=read.number("ACME_DETECT_BUSY_UTIL_MIN", 90, low=0, high=100),
            ib_idle_bps=read.number("ACME_DETECT_IB_IDLE_BPS", 1e6, low=0),
            storage_write_bps=read.number("ACME_DETECT_STORAGE_WRITE_BPS", 10e6, low=1),
            storage_write_promql="" if promql.lower() == "none" else promql,
            min_coverage=read.number("ACME_DETECT_MIN_COVERAGE", 0.8, low=0.01, high=1),
            slow_ratio=read.number("ACME_DETECT_SLOW_RATIO", 0.7, low=0.01, high=0.99),
            slow_windows=read.integer("ACME_DETECT_SLOW_WINDOWS", 3, low=1, high=100),
            slow_window_minutes=read.number("ACME_DETECT_SLOW_WINDOW_MINUTES", 5, low=0.5, high=120),
            slow_active_sm_min=read.number("ACME_DETECT_SLOW_ACTIVE_SM_MIN", 10, low=0, high=100),
            slow_min_nodes=read.integer("ACME_DETECT_SLOW_MIN_NODES", 3, low=3, high=100_000),
            job_lookback_days=read.integer("ACME_DETECT_JOB_LOOKBACK_DAYS", 14, low=1, high=366),
            source=read.choice("ACME_DETECT_SOURCE", "auto", DETECTION_SOURCES),
        )


def detection() -> DetectionSettings:
    return DetectionSettings.from_env()


@dataclass(frozen=True)
class EttrSettings:
    """How the report's ETTR section (``acme.report.ettr``, issue 19) links jobs into campaigns."""

    job_types: tuple[str, ...] = ("Pretrain",)
    """Job types whose campaigns are reported (``ACME_ETTR_JOB_TYPES``, comma-separated; ``Pretrain``)."""
    max_gap_hours: float = 24.0
    """Longest submit gap after a job's end for a same-named job to count as its restart
    (``ACME_ETTR_MAX_GAP_HOURS``, 0-1440; 24 h)."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> EttrSettings:
        read = Env(environ)
        types = read.text("ACME_ETTR_JOB_TYPES", "Pretrain")
        return cls(
            job_types=tuple(t.strip() for t in types.split(",") if t.strip()),
            max_gap_hours=read.number("ACME_ETTR_MAX_GAP_HOURS", 24, low=0, high=24 * 60),
        )


def ettr() -> EttrSettings:
    return EttrSettings.from_env()


# --------------------------------------------------------------------------------------------------
# Report: the characterization report (section of the report area)
# --------------------------------------------------------------------------------------------------

REPORT_DEFINITIONS = ("run", "paper")


@dataclass(frozen=True)
class ReportSettings:
    definition: str
    """Run-time definition (``ACME_REPORT_DEFINITION``): ``run`` = end − start (default), ``paper`` =
    the source's own duration where it has one (AcmeTrace Kalos: end − submit, as the paper counts)."""
    duckdb_threads: int
    """Threads DuckDB may use (``ACME_REPORT_THREADS``, default 2: the workers have two cores)."""
    duckdb_memory_limit: str
    """DuckDB's memory ceiling (``ACME_REPORT_MEMORY_LIMIT``, default 1GB): it spills beyond it."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ReportSettings:
        read = Env(environ)
        return cls(
            definition=read.choice("ACME_REPORT_DEFINITION", "run", REPORT_DEFINITIONS),
            duckdb_threads=read.integer("ACME_REPORT_THREADS", 2, low=1),
            duckdb_memory_limit=read.text("ACME_REPORT_MEMORY_LIMIT", "1GB"),
        )


def report() -> ReportSettings:
    return ReportSettings.from_env()


# --------------------------------------------------------------------------------------------------
# Notify: owner digests, on-call pages and late notices (acme.notify, docs/notifications.md)
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NotifySettings:
    routing_file: Path
    """Channels, owner addresses and on-call routes (``ACME_NOTIFY_FILE``, default
    ``include/config/notify.yaml``; as shipped nothing is configured and messages stay queued in the lake)."""
    report_url: str
    """Base URL of the published reports for the digests' links (``ACME_NOTIFY_REPORT_URL``; empty: the
    report's location in the lake)."""
    deadline_hour: int | None
    """Hour of the day (0-23, in ``deadline_timezone``) by which the nightly chain (``ingest_job_traces`` →
    ``diagnose_failures`` → ``characterize``) must be done, else a late notice goes to on-call
    (``ACME_NOTIFY_DEADLINE_HOUR``, default 6; ``off``: no deadline alerts)."""
    deadline_timezone: str
    """The clusters' time zone the deadline hour is in (``ACME_NOTIFY_DEADLINE_TIMEZONE``, default UTC; an IANA
    name such as Asia/Shanghai)."""
    step_budget_minutes: int
    """How long each later step of the chain (``diagnose_failures``, ``characterize``: started by Asset events,
    so their runs have no logical date to hang an hour on) may take from being queued before its late notice
    (``ACME_NOTIFY_STEP_BUDGET_MINUTES``, default 120)."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> NotifySettings:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        read = Env(environ)
        hour: int | None = None
        if read.text("ACME_NOTIFY_DEADLINE_HOUR", "6").lower() not in ("off", "none"):
            hour = read.integer("ACME_NOTIFY_DEADLINE_HOUR", 6, low=0, high=23)
        zone = read.text("ACME_NOTIFY_DEADLINE_TIMEZONE", "UTC")
        try:
            ZoneInfo(zone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ConfigError(f"ACME_NOTIFY_DEADLINE_TIMEZONE={zone!r} is not a known time zone") from None
        return cls(
            routing_file=read.path("ACME_NOTIFY_FILE", _include_dir(read) / "config" / "notify.yaml"),
            report_url=read.text("ACME_NOTIFY_REPORT_URL", ""),
            deadline_hour=hour,
            deadline_timezone=zone,
            step_budget_minutes=read.integer("ACME_NOTIFY_STEP_BUDGET_MINUTES", 120, low=1, high=7 * 24 * 60),
        )


def notify() -> NotifySettings:
    return NotifySettings.from_env()


# --------------------------------------------------------------------------------------------------
# Validation of a cordoned node before it rejoins (acme.recovery.validation, the validate_nodes DAG)
# --------------------------------------------------------------------------------------------------

VALIDATION_CHECKS = ("allgather", "dcgm_diag", "gpu_memory", "nccl_bandwidth")
HOLD_LEMON, UNCORDON_LEMON = "hold", "uncordon"
LEMON_NODE_POLICIES = (HOLD_LEMON, UNCORDON_LEMON)


@dataclass(frozen=True)
class ValidationSettings:
    """What a cordoned node must pass before it is uncordoned (``ACME_VALIDATION_*``), checked once."""

    dcgm_level: int
    """``ACME_VALIDATION_DCGM_LEVEL`` (default 2, 0 = none): the ``dcgmi diag -r N`` level (1 quick, 2 medium
    about 2 min, 3 long, 4 extended)."""
    ranks_per_node: int
    """``ACME_VALIDATION_RANKS_PER_NODE`` (default ``ACME_RECOVERY_GPUS_PER_NODE``, 8): processes of the node's
    self-test (one per GPU), so the all-gather crosses the node's NVLink/PCIe."""
    min_busbw_gbps: float
    """``ACME_VALIDATION_MIN_BUSBW_GBPS`` (default 100): least all-gather bus bandwidth (nccl-tests' busbw,
    GB/s) of the slowest rank; an A100 node's NVLink all-gather reaches about 200-230."""
    min_free_memory_share: float
    """``ACME_VALIDATION_MIN_FREE_MEMORY_SHARE`` (default 0.95): least free share of every GPU's memory; a
    cordoned node runs no job, so held memory is a stuck process or a leaked context."""
    gpu_required: bool
    """``ACME_VALIDATION_GPU_REQUIRED`` (default true): a node without GPUs or without ``dcgmi`` fails; false
    (CPU test clusters) records those checks as skipped."""
    node_command: tuple[str, ...]
    """``ACME_VALIDATION_NODE_COMMAND`` (Slurm; default ``ssh -o BatchMode=yes {node}``): runs one command
    line on a node. A drained node takes no Slurm job, so its checks run on it this way, as ``dcgmi`` does."""
    simulated_faults: dict[str, str]
    """``ACME_VALIDATION_SIMULATED_FAULTS`` (simulated backend): ``node:check,…`` (check one of
    ``VALIDATION_CHECKS``; a bare node fails ``dcgm_diag``) makes those nodes fail validation."""
    lemon_nodes: str
    """``ACME_VALIDATION_LEMON_NODES`` (``hold``, default, or ``uncordon``): what happens to a node that passes
    validation while the cluster's latest lemon-node list names it (``acme.recovery.lemon_nightly``). ``hold``
    keeps it cordoned (recorded, on-call told) until a run names it with ``allow_lemon``; ``uncordon`` returns
    it like any other node."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ValidationSettings:
        read = Env(environ)
        gpus = read.integer("ACME_RECOVERY_GPUS_PER_NODE", 8, low=1)
        return cls(
            dcgm_level=read.integer("ACME_VALIDATION_DCGM_LEVEL", 2, low=0, high=4),
            ranks_per_node=read.integer("ACME_VALIDATION_RANKS_PER_NODE", gpus, low=1, high=64),
            min_busbw_gbps=read.number("ACME_VALIDATION_MIN_BUSBW_GBPS", "100", low=0),
            min_free_memory_share=read.share("ACME_VALIDATION_MIN_FREE_MEMORY_SHARE", 0.95),
            gpu_required=read.flag("ACME_VALIDATION_GPU_REQUIRED", True),
            node_command=tuple(
                read.text("ACME_VALIDATION_NODE_COMMAND", "ssh -o BatchMode=yes {node}").split()
            ),
            simulated_faults=_simulated_faults(read.text("ACME_VALIDATION_SIMULATED_FAULTS", "")),
            lemon_nodes=read.choice("ACME_VALIDATION_LEMON_NODES", HOLD_LEMON, LEMON_NODE_POLICIES),
        )


def _simulated_faults(raw: str) -> dict[str, str]:
    faults: dict[str, str] = {}
    for item in (part.strip() for part in raw.split(",")):
        if not item:
            continue
        node, _, check = item.partition(":")
        check = check.strip() or "dcgm_diag"
        if not node.strip() or check not in VALIDATION_CHECKS:
            raise ConfigError(
                f"ACME_VALIDATION_SIMULATED_FAULTS has {item!r}: expected node or node:check, check one of "
                f"{', '.join(VALIDATION_CHECKS)}"
            )
        faults[node.strip()] = check
    return faults


def validation() -> ValidationSettings:
    return ValidationSettings.from_env()


# --------------------------------------------------------------------------------------------------
# Lemon nodes: repeat offenders from the lake's history (acme.recovery.lemon, docs/lemon-nodes.md)
# --------------------------------------------------------------------------------------------------

HARDWARE_XIDS = (48, 61, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120)
"""Xid codes that name the GPU or its node rather than the program (ECC, NVLink, fallen off the bus, GSP)."""


@dataclass(frozen=True)
class LemonSettings:
    """How the lemon-node score weighs a node's history, and what the nightly run does with the worst."""

    half_life_days: float = 28.0
    """A failure's weight halves every this many days (``ACME_LEMON_HALF_LIFE_DAYS``, 0.5-365; 28)."""
    lookback_days: int = 90
    """Days of history read (``ACME_LEMON_LOOKBACK_DAYS``, 1-3650; 90)."""
    telemetry_weight: float = 0.5
    """Weight of one hardware Xid or ECC event beside a failed job's 1 (``ACME_LEMON_TELEMETRY_WEIGHT``, 0-10;
    0.5: not every Xid takes a job down)."""
    telemetry_metrics: tuple[str, ...] = ("xid_errors",)
    """Catalog metrics read as fault events (``ACME_LEMON_TELEMETRY_METRICS``, comma-separated; ``xid_errors``;
    an ECC counter such as DCGM_FI_DEV_ECC_DBE_VOL_TOTAL once the catalog has one)."""
    xid_codes: tuple[int, ...] = HARDWARE_XIDS
    """Xid codes that count (``ACME_LEMON_XID_CODES``, comma-separated; the hardware ones)."""
    suggest_top: int = 5
    """Most nodes the nightly run suggests keeping cordoned (``ACME_LEMON_SUGGEST_TOP``, 0-1000; 5)."""
    min_score: float = 2.0
    """Least score for a suggestion (``ACME_LEMON_MIN_SCORE``; 2: about two recent failures of its own)."""
    auto_cordon: bool = False
    """Whether the nightly run cordons the suggested nodes itself through the recovery backend
    (``ACME_LEMON_AUTO_CORDON``, default off: it only suggests)."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> LemonSettings:
        read = Env(environ)
        metrics = read.text("ACME_LEMON_TELEMETRY_METRICS", "xid_errors")
        codes = read.text("ACME_LEMON_XID_CODES", ",".join(str(c) for c in HARDWARE_XIDS))
        try:
            xid_codes = tuple(int(part) for part in codes.split(",") if part.strip())
        except ValueError:
            raise ConfigError(f"ACME_LEMON_XID_CODES={codes!r} must be comma-separated integers") from None
        return cls(
            half_life_days=read.number("ACME_LEMON_HALF_LIFE_DAYS", 28, low=0.5, high=365),
            lookback_days=read.integer("ACME_LEMON_LOOKBACK_DAYS", 90, low=1, high=3650),
            telemetry_weight=read.number("ACME_LEMON_TELEMETRY_WEIGHT", 0.5, low=0, high=10),
            telemetry_metrics=tuple(m.strip() for m in metrics.split(",") if m.strip()),
            xid_codes=xid_codes,
            suggest_top=read.integer("ACME_LEMON_SUGGEST_TOP", 5, low=0, high=1000),
            min_score=read.number("ACME_LEMON_MIN_SCORE", 2.0, low=0),
            auto_cordon=read.flag("ACME_LEMON_AUTO_CORDON", False),
        )


def lemon() -> LemonSettings:
    return LemonSettings.from_env()
