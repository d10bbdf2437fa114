"""
### Nightly job-trace ingest

For each configured cluster (`include/config/clusters.yaml`) and the run's day (its data
interval, a UTC day), one **ingest** task: copy the day's scheduler records (AcmeTrace CSV, Slurm
`sacct`, Kubernetes JSON/YAML) into the lake's raw area → parse them into the canonical job record
(one staged Parquet copy) → validate with great-expectations (bad rows to quarantine with their
reasons; the run fails when more than `ACME_QUARANTINE_MAX_SHARE` of an input is bad) → publish
each job into the partition of its time-key day, merged by job id, and update the
`acme_job_traces` Asset.

Re-runs, retries and backfills rewrite instead of duplicating: every job is in the lake
exactly once, with its newest state.

**Why one task per cluster and day.** Each task costs a process start, a trip through the
scheduler, the broker and a worker slot, and its calls to the API server; one nightly partition is
about a second of compute. Measured on `make stack` (`benchmarks/bench_stack_backfill.py`, figures
in `benchmarks/README.md`): five tasks per run made a six-month backfill take 58 minutes, almost
all of it start-up, and with two (a `plan_inputs` task, then the ingest mapped over its plan) the
plan task waited in the queue for a worker slot longer than the ingest's work took. The
boundaries that bought nothing were dropped:
- *plan | ingest*: the plan is milliseconds of reading the clusters file and the Params. The
  ingest is mapped over the configured clusters' names instead (read when the DAG is parsed, the
  same list as the `cluster` Param's dropdown), and each task plans its own cluster: one
  cluster's bad day still neither blocks nor re-runs the others, a task whose cluster the run's
  `cluster` Param leaves out is skipped, and bad Params fail every task at once.
- *extract | parse*: a retry of the parse needs the raw copy, not a new task; the copy is a
  retry point inside the task (`raw.json`, written after it), so a retry does not copy again.
- *parse | validate | publish*: validation of the same staged rows gives the same answer (bad
  input fails at once); the staged rows are the second retry point
  (`parsed.json`), and validation and publishing are redone whole by a retry (they replace
  what they wrote, under the partition's lock). Keeping validate apart would also have cost a
  second copy of every row (`accepted.parquet`).
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
from acme_airflow.notify import nightly_deadline
from acme_airflow.params import configured_cluster_names, manual_run_params


@dag(
    dag_id="ingest_job_traces",
    deadline=nightly_deadline("ingest_job_traces", scheduled=True),  # late notice to on-call
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
    @task(outlets=[JOB_TRACES], map_index_template="{{ cluster }}")
    def ingest(cluster: str) -> dict:
        from airflow.sdk.exceptions import AirflowSkipException

        from acme.jobs.ingest import ingest_planned, plan_job_inputs
        from acme_airflow.params import plan_run_inputs
        from acme_airflow.tasks import lake_task

        def plan_this_cluster(*args) -> list[dict]:
            return [p for p in plan_job_inputs(*args) if p["input"]["cluster"] == cluster]

        context = get_current_context()
        plan = plan_run_inputs(plan_this_cluster)  # checks the Params: bad ones fail the task
        if not plan:
            raise AirflowSkipException(f"this run is for cluster {context['params']['cluster']!r} only")
        (planned,) = plan
        with lake_task() as lake:
            summary = ingest_planned(lake, planned, context["run_id"])
        context["outlet_events"][JOB_TRACES].extra = summary
        return summary

    # An unreadable clusters file gives no names: one task then fails with the configuration error,
    # instead of a run with nothing to do succeeding.
    ingest.expand(cluster=configured_cluster_names() or ["(the clusters file could not be read)"])


ingest_job_traces()
