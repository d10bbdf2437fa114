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

from acme import config
from acme.schema import SOURCES
from acme_airflow.assets import JOB_TRACES
from acme_airflow.defaults import DEFAULT_ARGS, Tag
from acme_airflow.params import manual_run_params


@dag(
    dag_id="ingest_job_traces",
    schedule=CronDataIntervalTimetable("@daily", timezone="UTC"),
    start_date=config.start_date(),
    catchup=config.catchup(),
    max_active_runs=config.max_active_runs(),
    default_args=DEFAULT_ARGS,
    tags=[Tag.INGEST, Tag.JOBS, Tag.NIGHTLY],
    doc_md=__doc__,
    description="Nightly: each cluster's scheduler records of a UTC day → validated job partitions, exactly once",
    params=manual_run_params(list(SOURCES), "Path or URL of a file to ingest instead of the configured one."),
)
def ingest_job_traces():
    @task
    def plan_inputs() -> list[dict]:
        from acme.ingest_jobs import plan_job_inputs
        from acme_airflow.params import plan_run_inputs

        return plan_run_inputs(plan_job_inputs)

    @task(map_index_template="{{ planned['input']['cluster'] }}")
    def extract(planned: dict) -> dict:
        from acme.ingest_jobs import JobInput, extract_job_input
        from acme_airflow.lake import task_lake

        job_input = JobInput.from_dict(planned["input"])
        return {
            "input": planned["input"],
            "raw": extract_job_input(task_lake(), job_input, planned["command"]),
        }

    @task(map_index_template="{{ extracted['input']['cluster'] }}")
    def parse(extracted: dict) -> dict:
        from acme.ingest_jobs import JobInput, parse_staged, staging_prefix
        from acme_airflow.failures import no_retry_for_bad_input
        from acme_airflow.lake import task_lake

        job_input = JobInput.from_dict(extracted["input"])
        staging = staging_prefix(get_current_context()["run_id"], job_input)
        with no_retry_for_bad_input():
            parsed = parse_staged(task_lake(), job_input, extracted["raw"], staging)
        return {**extracted, "staging": staging, "parsed": parsed}

    @task(map_index_template="{{ parsed['input']['cluster'] }}")
    def validate(parsed: dict) -> dict:
        from acme.ingest_jobs import JobInput, validate_staged
        from acme_airflow.failures import no_retry_for_bad_input
        from acme_airflow.lake import task_lake

        job_input = JobInput.from_dict(parsed["input"])
        with no_retry_for_bad_input():
            validated = validate_staged(task_lake(), job_input, parsed["staging"], parsed["parsed"])
        return {**parsed, "validated": validated}

    @task(outlets=[JOB_TRACES], map_index_template="{{ validated['input']['cluster'] }}")
    def publish(validated: dict) -> dict:
        from acme.ingest_jobs import JobInput, publish_staged
        from acme_airflow.lake import task_lake

        job_input = JobInput.from_dict(validated["input"])
        partitions = publish_staged(task_lake(), job_input, validated["staging"])
        summary = {
            "cluster": job_input.cluster,
            "day": job_input.day.isoformat(),
            "rows": validated["validated"]["accepted"],
            "quarantined": validated["validated"]["quarantined"],
            "partitions": partitions,
            "quarantine": validated["validated"]["quarantine"],
        }
        get_current_context()["outlet_events"][JOB_TRACES].extra = summary
        return summary

    publish.expand(
        validated=validate.expand(parsed=parse.expand(extracted=extract.expand(planned=plan_inputs())))
    )


ingest_job_traces()
