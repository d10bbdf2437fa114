"""
### Nightly job-trace ingest

For each configured cluster (`include/config/clusters.yaml`) and the run's day (its data
interval, a UTC day): **plan** the inputs, then one **ingest** task per input: copy the day's
scheduler records (AcmeTrace CSV, Slurm `sacct`, Kubernetes JSON/YAML) into the lake's raw area →
parse them into the canonical job record (one staged Parquet copy) → validate with
great-expectations (bad rows to quarantine with their reasons; the run fails when more than
`ACME_QUARANTINE_MAX_SHARE` of an input is bad) → publish each job into the partition of its
time-key day, merged by job id, and update the `acme_job_traces` Asset.

Re-runs, retries and backfills rewrite instead of duplicating: every job is in the lake
exactly once, with its newest state.

**Why two tasks and not five.** Each task costs a process start, the imports and a trip
through the scheduler; one nightly partition is well under a second of compute. Measured on
`make stack` (`benchmarks/bench_stack_backfill.py`, figures in `benchmarks/README.md`), that
per-task cost is several seconds (a task's start and imports: `plan_inputs` ran 2.7 s for a
few milliseconds of work; scheduling and a free slot: about 3 s of wait per task, load 21), so
five tasks per run made a six-month backfill take 58 minutes, almost all of it start-up. The boundaries that bought nothing were dropped:
- *extract | parse*: a retry of the parse needs the raw copy, not a new task; the copy is a
  retry point inside the task (`raw.json`, written after it), so a retry does not copy again.
- *parse | validate | publish*: validation of the same staged rows gives the same answer (bad
  input fails at once); the staged rows are the second retry point
  (`parsed.json`), and validation and publishing are redone whole by a retry (they replace
  what they wrote, under the partition's lock). Keeping validate apart would also have cost a
  second copy of every row (`accepted.parquet`).
- *plan | ingest* stays: it maps one task per cluster, so one cluster's bad day neither
  blocks nor re-runs the others, and a manual run's parameters are checked once.
A missing input (data not arrived yet) is a retried error (`InputNotFoundError`); bad input
fails at once (`lake_task`). A SIGKILL at any point leaves the lake equal to a clean
run after the retry (`tests/integration/test_sigkill_writers.py`).

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
