"""
### Nightly job-trace ingest

For each configured cluster (`include/config/clusters.yaml`) and the run's day (its data
interval, a UTC day): **extract** the day's scheduler records (AcmeTrace CSV, Slurm `sacct`,
Kubernetes JSON) into the lake's raw area → **parse** them into the canonical job record →
**validate** with great-expectations (bad rows to quarantine with their reasons; the run
fails when more than `ACME_QUARANTINE_MAX_SHARE` of an input is bad) → **publish** each
job into the partition of its submit day, merged by job id, and update the
`acme_job_traces` Asset.

Re-runs, retries and backfills rewrite instead of duplicating: every job is in the lake
exactly once, with its newest state.

**Manual runs** (e.g. right after a crash, to see the day so far): set `day`, optionally
`cluster`, and `source` + `input` to ingest a file exported by hand.
**Backfill**: `airflow backfill create --dag-id ingest_job_traces --from-date 2023-07-01 --to-date 2023-07-31`.
"""

from __future__ import annotations

from airflow.sdk import CronDataIntervalTimetable, dag, get_current_context, task

from acme import settings
from acme.jobs.formats import FORMAT_NAMES
from acme_airflow.assets import JOB_TRACES
from acme_airflow.defaults import DEFAULT_ARGS, Tag
from acme_airflow.params import manual_run_params


@dag(
    dag_id="ingest_job_traces",
    schedule=CronDataIntervalTimetable("@daily", timezone="UTC"),
    start_date=settings.project().start_date,
    catchup=settings.project().catchup,
    max_active_runs=settings.project().max_active_runs,
    default_args=DEFAULT_ARGS,
    tags=[Tag.INGEST, Tag.JOBS, Tag.NIGHTLY],
    doc_md=__doc__,
    description="Nightly: each cluster's scheduler records of a UTC day → validated job partitions, exactly once",
    params=manual_run_params(
        list(FORMAT_NAMES), "Path or URL of a file to ingest instead of the configured one."
    ),
)
def ingest_job_traces():
    @task
    def plan_inputs() -> list[dict]:
        from acme.jobs.ingest import plan_job_inputs
        from acme_airflow.params import plan_run_inputs

        return plan_run_inputs(plan_job_inputs)

    @task(outlets=[JOB_TRACES], map_index_template="{{ planned['input']['cluster'] }}")
    def ingest(planned: dict) -> dict:
        from acme.jobs.ingest import ingest_planned
        from acme_airflow.tasks import lake_task

        context = get_current_context()
        with lake_task() as lake:
            summary = ingest_planned(lake, planned, context["run_id"])
        context["outlet_events"][JOB_TRACES].extra = summary
        return summary

    ingest.expand(planned=plan_inputs())


ingest_job_traces()
