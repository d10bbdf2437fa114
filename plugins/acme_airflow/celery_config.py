"""The Celery settings of the stack's worker (``[celery] celery_config_options``): Airflow's own, plus the
modules every task of this project imports, loaded once by the worker before it forks its pool.

A task runs in a process forked from a pool process, itself forked from the worker, so a module the
worker has imported is already there in every task: no task pays its import again. These are the ones
each task would otherwise import on its own (measured with ``airflow.sdk`` already loaded: about 0.45 s
of CPU per task for 26 MiB, which the forked processes share). pyarrow is left out: 66 MiB for the
tasks that read Parquet only.
"""

from __future__ import annotations

from airflow.providers.celery.executors.default_celery import DEFAULT_CELERY_CONFIG

TASK_IMPORTS = (
    "boto3",  # the lake's S3 client (locks, whole-object reads)
    "s3fs",  # the lake's file system on S3
    "airflow.providers.amazon.aws.hooks.s3",  # the lake's credentials from the Airflow connection
    "airflow.providers.standard.operators.trigger_dagrun",  # parsing diagnose_failures.py in its tasks
    "acme.lake",
)

CELERY_CONFIG = {**DEFAULT_CELERY_CONFIG, "imports": TASK_IMPORTS}
