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
from dataclasses import dataclass
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


# --------------------------------------------------------------------------------------------------
# Evaluation: checkpoints → trials → scores (section of the evaluation area)
# --------------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------------
# Recovery: faulty nodes, checkpoints and restarts (section of the recovery area)
# --------------------------------------------------------------------------------------------------

# The recovery default backend is ``simulated``: the demo and the tests run with no cluster.
RECOVERY_BACKENDS = ("simulated", "kubernetes", "slurm")
DEFAULT_CHECKPOINT_URI_PATTERN = "{lake}/checkpoints/cluster={cluster}/job={job_id}"
_K8S_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


@dataclass(frozen=True)
class RecoverySettings:
    """Everything recovery reads from the environment (``ACME_RECOVERY_*``, ``ACME_CHECKPOINT_URI_PATTERN``),
    checked once; defaults that run offline."""

    backend: str
    """``ACME_RECOVERY_BACKEND``: ``simulated`` (default, offline), ``kubernetes`` or ``slurm``."""
    namespace: str
    """``ACME_RECOVERY_NAMESPACE`` (default ``training``): the Kubernetes namespace of the check pods."""
    check_image: str
    """``ACME_RECOVERY_CHECK_IMAGE``: the image must hold torch and acme/recovery/allgather_check.py (it runs
    alone too)."""
    gpus_per_node: int
    """``ACME_RECOVERY_GPUS_PER_NODE`` (default 8)."""
    max_nodes: int
    """``ACME_RECOVERY_MAX_NODES`` (default 2): most nodes one recovery may cordon (blast radius)."""
    max_share: float
    """``ACME_RECOVERY_MAX_SHARE`` (default 0.05): most share of a job's nodes one recovery may cordon."""
    kubernetes_conn_id: str
    """``ACME_RECOVERY_KUBERNETES_CONN_ID`` (default ``kubernetes_default``)."""
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
    """``ACME_RECOVERY_SLURM_COMMAND_PREFIX``, e.g. "ssh slurm-login" to run srun/sbatch/scontrol on a login
    node (split on spaces, no shell)."""
    slurm_check_script: str
    """``ACME_RECOVERY_SLURM_CHECK_SCRIPT`` (default acme/recovery/allgather_check.py)."""
    slurm_partition: str | None
    """``ACME_RECOVERY_SLURM_PARTITION`` (default none)."""
    slurm_python: str
    """``ACME_RECOVERY_SLURM_PYTHON``: the Python with torch on the nodes (a path the nodes share, e.g. a venv
    on NFS; default ``python3``)."""
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

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> RecoverySettings:
        """The current settings; a ConfigError names the bad variable."""
        from acme.clusters import checked_checkpoint_pattern

        read = Env(environ)
        namespace = read.text("ACME_RECOVERY_NAMESPACE", "training")
        if not _K8S_NAME.match(namespace):
            raise ConfigError(f"ACME_RECOVERY_NAMESPACE={namespace!r} is not a Kubernetes namespace name")
        max_nodes_raw = read.text("ACME_RECOVERY_MAX_NODES", "2")
        if not max_nodes_raw.isdigit():
            raise ConfigError(f"ACME_RECOVERY_MAX_NODES={max_nodes_raw!r} must be a whole number >= 0")
        pattern = read.text("ACME_CHECKPOINT_URI_PATTERN") or None
        if pattern is not None:
            pattern = checked_checkpoint_pattern(pattern, "ACME_CHECKPOINT_URI_PATTERN")
        return cls(
            backend=read.choice("ACME_RECOVERY_BACKEND", "simulated", RECOVERY_BACKENDS),
            namespace=namespace,
            check_image=read.text("ACME_RECOVERY_CHECK_IMAGE", "ghcr.io/acme/allgather-check:torch2.13-cu12"),
            gpus_per_node=int(read.number("ACME_RECOVERY_GPUS_PER_NODE", "8", above=0, integer=True)),
            max_nodes=int(max_nodes_raw),
            max_share=read.number("ACME_RECOVERY_MAX_SHARE", "0.05"),
            kubernetes_conn_id=read.text("ACME_RECOVERY_KUBERNETES_CONN_ID", "kubernetes_default"),
            taint_key=read.text("ACME_RECOVERY_TAINT_KEY", "acme.io/faulty"),
            check_timeout_s=read.number("ACME_RECOVERY_CHECK_TIMEOUT_S", "60", above=0),
            check_args=tuple(read.text("ACME_RECOVERY_CHECK_ARGS", "").split()),
            pod_startup_timeout_s=int(
                read.number("ACME_RECOVERY_POD_STARTUP_TIMEOUT_S", "300", above=0, integer=True)
            ),
            simulated_jobs_file=read.path(
                "ACME_RECOVERY_SIMULATED_JOBS", _include_dir(read) / "recovery" / "simulated_jobs.yaml"
            ),
            slurm_command_prefix=tuple(read.text("ACME_RECOVERY_SLURM_COMMAND_PREFIX", "").split()),
            slurm_check_script=read.text(
                "ACME_RECOVERY_SLURM_CHECK_SCRIPT",
                str(Path(__file__).parent / "recovery" / "allgather_check.py"),
            ),
            slurm_partition=read.text("ACME_RECOVERY_SLURM_PARTITION") or None,
            slurm_python=read.text("ACME_RECOVERY_SLURM_PYTHON", "python3"),
            lock_ttl_s=read.number("ACME_RECOVERY_LOCK_TTL_S", "7200", above=0),
            dry_run=read.flag("ACME_RECOVERY_DRY_RUN", True),
            checkpoint_uri_pattern=pattern,
        )


def recovery() -> RecoverySettings:
    return RecoverySettings.from_env()


# --------------------------------------------------------------------------------------------------
# Detection: hangs and fail-slow from telemetry (section of the detection area)
# --------------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------------
# Report: the characterization report (section of the report area)
# --------------------------------------------------------------------------------------------------
