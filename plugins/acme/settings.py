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


# --------------------------------------------------------------------------------------------------
# Detection: hangs and fail-slow from telemetry (section of the detection area)
# --------------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------------
# Report: the characterization report (section of the report area)
# --------------------------------------------------------------------------------------------------
