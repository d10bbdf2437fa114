"""The Celery settings of the Celery workers (``[celery] celery_config_options``): Airflow's own, plus the
modules the project's tasks import, loaded once by the worker before it forks its pool (Celery's
``imports`` setting).

A task runs in a process forked from a pool process, itself forked from the worker, so a module the
worker has imported is already there in every task: no task pays its import again. Measured on
``make stack`` (``benchmarks/README.md``): the lake's client modules are about 0.45 s of CPU per task
(26 MiB); great-expectations, pandas, pyarrow and DuckDB about 2 s of CPU per job-ingest task (3.5 s on
a loaded machine), more than the task's own work on a Seren-scale day. Importing is all this does: no
connection, thread or file is opened, so the forked processes share nothing that is not safe to share.

Memory: the forked processes share these pages (copy-on-write), so the stack's proportional set size
(PSS) grows by them once, while a sum of every process's RSS counts them once per process.
"""

from __future__ import annotations

import os

from airflow.providers.celery.executors.default_celery import DEFAULT_CELERY_CONFIG

os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")  # before great-expectations is imported

TASK_IMPORTS = (
    "boto3",  # the lake's S3 client (locks, whole-object reads)
    "s3fs",  # the lake's file system on S3
    "airflow.providers.amazon.aws.hooks.s3",  # the lake's credentials from the Airflow connection
    "airflow.providers.standard.operators.trigger_dagrun",  # parsing diagnose_failures.py in its tasks
    "duckdb",  # the job ingest's parsers, the report's SQL
    "great_expectations",  # the job ingest's validation
    "pandas",
    "pyarrow.parquet",
    "acme.lake",
    "acme.jobs.ingest",
    "acme.jobs.validate",
    "acme_airflow.tasks",
)

CELERY_CONFIG = {**DEFAULT_CELERY_CONFIG, "imports": TASK_IMPORTS}
