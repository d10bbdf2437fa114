"""Transitional: the project-wide settings now live in :mod:`acme.settings` (issue 18).

Every function here reads through :mod:`acme.settings`; callers move to ``settings.project()`` and the
other per-area sections, and this module goes once none is left.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from acme import settings
from acme.settings import PROJECT_ROOT, env, env_number

__all__ = ["PROJECT_ROOT", "env", "env_number"]


def include_dir() -> Path:
    return settings.project().include_dir


def lake_uri() -> str:
    return settings.project().lake_uri


def aws_conn_id() -> str:
    return settings.project().aws_conn_id


def clusters_file() -> Path:
    return settings.project().clusters_file


def reference_dir() -> Path:
    return settings.project().reference_dir


def sql_dir() -> Path:
    return settings.project().sql_dir


def start_date() -> datetime:
    return settings.project().start_date


def catchup() -> bool:
    return settings.project().catchup


def max_active_runs() -> int:
    return settings.project().max_active_runs


def job_type_rules_path() -> Path:
    return settings.jobs().job_type_rules


def quarantine_max_share() -> float:
    return settings.jobs().quarantine_max_share


def metrics_catalog_path() -> Path:
    return settings.metrics().catalog


def metrics_max_quarantine_share() -> float:
    return settings.metrics().max_quarantine_share


def metrics_min_coverage() -> float:
    return settings.metrics().min_coverage
