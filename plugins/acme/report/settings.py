"""Configuration of the report, read from the environment (what ``acme.config`` would hold)."""

from __future__ import annotations

import os

from acme.errors import ConfigError

DEFINITIONS = ("run", "paper")


def definition() -> str:
    """Run-time definition (``ACME_REPORT_DEFINITION``): ``run`` = end − start (default), ``paper`` =
    the source's own duration where it has one (AcmeTrace Kalos: end − submit, as the paper counts)."""
    value = os.environ.get("ACME_REPORT_DEFINITION", "").strip() or "run"
    if value not in DEFINITIONS:
        raise ConfigError(f"ACME_REPORT_DEFINITION={value!r} must be one of {', '.join(DEFINITIONS)}")
    return value


def duckdb_threads() -> int:
    """Threads DuckDB may use (``ACME_REPORT_THREADS``, default 2: the workers have two cores)."""
    raw = os.environ.get("ACME_REPORT_THREADS", "").strip() or "2"
    if not raw.isdigit() or int(raw) < 1:
        raise ConfigError(f"ACME_REPORT_THREADS={raw!r} must be a positive integer")
    return int(raw)


def duckdb_memory_limit() -> str:
    """DuckDB's memory ceiling (``ACME_REPORT_MEMORY_LIMIT``, default 1GB): it spills beyond it."""
    return os.environ.get("ACME_REPORT_MEMORY_LIMIT", "").strip() or "1GB"
