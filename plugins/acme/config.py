"""The one place that reads configuration: environment variables with defaults.

Secrets never live here: credentials come from Airflow connections (or the standard AWS
environment when the command line runs outside Airflow).
"""

from __future__ import annotations

import os
from pathlib import Path

from acme.errors import ConfigError

# plugins/acme/config.py -> the project root (also /opt/airflow in the container image).
PROJECT_ROOT = Path(__file__).resolve().parents[2]


def env(name: str, default: str = "") -> str:
    """A setting from the environment, stripped; ``default`` when unset or blank."""
    return os.environ.get(name, "").strip() or default


def env_number(
    name: str,
    default: float | str,
    *,
    low: float | None = None,
    high: float | None = None,
    above: float | None = None,
    integer: bool = False,
) -> float:
    """A numeric setting, checked: a :class:`ConfigError` naming the variable and its value otherwise."""
    raw = env(name, str(default))
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


_env = env  # the settings below


def include_dir() -> Path:
    """Bundled configuration, SQL and sample data (``ACME_INCLUDE_DIR``)."""
    return Path(_env("ACME_INCLUDE_DIR", str(PROJECT_ROOT / "include")))


def lake_uri() -> str:
    """Root of the lake: a local folder (default ``./lake``) or ``s3://bucket/prefix``."""
    return _env("ACME_LAKE_URI", str(PROJECT_ROOT / "lake"))


def aws_conn_id() -> str:
    """Airflow connection holding the S3 credentials/endpoint when the lake is on S3."""
    return _env("ACME_AWS_CONN_ID", "aws_default")


def clusters_file() -> Path:
    """Which clusters exist and where their job sources are (``ACME_CLUSTERS_FILE``)."""
    return Path(_env("ACME_CLUSTERS_FILE", str(include_dir() / "config" / "clusters.yaml")))


def job_type_rules_path() -> Path:
    """Job-type rules for sources without a type (``ACME_JOB_TYPE_RULES``)."""
    return Path(_env("ACME_JOB_TYPE_RULES", str(include_dir() / "config" / "job_types.yaml")))


def _share(name: str, default: str) -> float:
    return env_number(name, default, low=0.0, high=1.0)


def quarantine_max_share() -> float:
    """Share of an input's rows that may be quarantined before its run fails (default 1%)."""
    return _share("ACME_QUARANTINE_MAX_SHARE", "0.01")


def metrics_catalog_path() -> Path:
    """Metric list, PromQL, units and ranges (``ACME_METRICS_CATALOG``)."""
    return Path(_env("ACME_METRICS_CATALOG", str(include_dir() / "metrics" / "metrics.yaml")))


def metrics_max_quarantine_share() -> float:
    """Share of a metric's samples that may be quarantined before it fails (default 1%)."""
    return _share("ACME_METRICS_MAX_QUARANTINE_SHARE", "0.01")


def metrics_min_coverage() -> float:
    """Least share of the expected samples a metric must have for the day (default 80%)."""
    return _share("ACME_METRICS_MIN_COVERAGE", "0.8")


def reference_dir() -> Path:
    """Public reference data, used by synthetic data only (``ACME_REFERENCE_DIR``, ../shared/reference)."""
    return Path(_env("ACME_REFERENCE_DIR", str(PROJECT_ROOT.parent / "shared" / "reference")))


def sql_dir() -> Path:
    return include_dir() / "sql"


def start_date():
    """First day the nightly DAGs cover (``ACME_START_DATE``; AcmeTrace's Seren starts 2023-03-01)."""
    from datetime import UTC, datetime

    raw = _env("ACME_START_DATE", "2023-03-01")
    try:
        return datetime.fromisoformat(raw).replace(tzinfo=UTC)
    except ValueError as exc:
        raise ConfigError(f"ACME_START_DATE={raw!r} is not a date") from exc


def catchup() -> bool:
    """Whether the scheduler creates the missed runs since the start date (``ACME_CATCHUP``)."""
    return _env("ACME_CATCHUP", "false").lower() in ("1", "true", "yes")


def max_active_runs() -> int:
    """Runs of one DAG at once (``ACME_MAX_ACTIVE_RUNS``, default 4; lower it on small workers)."""
    raw = _env("ACME_MAX_ACTIVE_RUNS", "4")
    if not raw.isdigit() or int(raw) < 1:
        raise ConfigError(f"ACME_MAX_ACTIVE_RUNS={raw!r} must be a positive integer")
    return int(raw)
