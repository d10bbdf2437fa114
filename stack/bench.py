"""What the stack benchmarks share (``benchmarks/bench_crash_to_restart.py``,
``benchmarks/bench_nightly_diagnosis.py``): the ``machine``
block of their results (the load the other users of this machine put on it while the benchmark ran)."""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any


def _mem_total_mib() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    except OSError:
        return None
    return None


class Machine:
    """The machine block of a result: create it when the benchmark starts, call ``block()`` at its end."""

    def __init__(self) -> None:
        self.load_at_start = os.getloadavg()[0]

    def block(self) -> dict[str, Any]:
        """CPUs, memory, Python, and the 1-minute load average when the benchmark started and ended (on
        a shared machine, the part above the benchmark's own load is other people's work)."""
        return {
            "cpus": os.cpu_count(),
            "mem_total_mib": _mem_total_mib(),
            "python": platform.python_version(),
            "load_average_1m_at_start": round(self.load_at_start, 2),
            "load_average_1m_at_end": round(os.getloadavg()[0], 2),
        }


def env_overrides(pairs: list[str]) -> dict[str, str]:
    """``--env NAME=VALUE`` options of a benchmark: further stack settings (e.g. to measure the old
    value of one beside the new)."""
    overrides = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise SystemExit(f"--env {pair!r}: write NAME=VALUE")
        overrides[name] = value
    return overrides


# The stack settings that decide a benchmark's time and memory, recorded with its results.
RECORDED = (
    "AIRFLOW__CELERY__WORKER_CONCURRENCY",
    "AIRFLOW__CORE__PARALLELISM",
    "AIRFLOW__API__WORKERS",
    "AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME",
    "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC",
    "AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL",
    "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL",
    "AIRFLOW__DAG_PROCESSOR__PARSING_PROCESSES",
    "AIRFLOW__DAG_PROCESSOR__STALE_BUNDLE_CLEANUP_INTERVAL",
    "AIRFLOW__CELERY__CELERY_CONFIG_OPTIONS",
)


def stack_settings_block(settings: Any) -> dict[str, str | None]:
    """The values of ``RECORDED`` the stack ran with (None: Airflow's default), and every ``--env``."""
    from stack.stack import stack_env

    env = stack_env(settings)
    return {name: env.get(name) for name in RECORDED} | dict(settings.extra_env)
