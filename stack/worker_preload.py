"""Imported once by the stack's Celery worker when it starts, before it forks its pool (Celery's
``imports`` setting, ``AIRFLOW__CELERY__EXTRA_CELERY_CONFIG`` in ``stack.stack.stack_env``).

Every Airflow task runs in a process forked from a pool process, so what the worker imported here
every task starts with, instead of importing it again: great-expectations alone is about 2 s of CPU
(3.5 s on a loaded machine) per job-ingest task, more than the task's own work on a Seren-scale day
(``benchmarks/README.md``, the backfill). Airflow's Celery executor does the same for its own
operators (``celery_import_modules``). Importing is all this does: no connection, thread or file
is opened, so the forked processes share nothing that is not safe to share.
"""

from __future__ import annotations

import importlib
import os

# What a job-ingest task imports (the other DAGs' tasks import them too). Module-level imports of
# these are banned elsewhere (ruff TID253: parsing a DAG must stay cheap); here they are the point.
PRELOADED = (
    "duckdb",
    "great_expectations",
    "pandas",
    "pyarrow.parquet",
    "s3fs",
    "acme.jobs.ingest",
    "acme.jobs.validate",
    "acme_airflow.tasks",
)

os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
for name in PRELOADED:
    importlib.import_module(name)
