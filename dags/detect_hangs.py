"""
### Hang and fail-slow detection of running GPU jobs

Every 2 minutes, for every configured cluster: **which GPU jobs run** now (the jobs lake: started,
not ended, with a node list) — when none does, the run stops there (short circuit: nothing else is
read) → **detect** (mapped per cluster): the last 16 minutes of SM, tensor-core and GPU utilization,
of InfiniBand traffic and of storage writes of those jobs' nodes (Prometheus when the cluster's metrics source is
Prometheus, else the metrics lake), then the two detectors of `acme.detection`:

- **hang**: all of a job's GPUs without tensor-core work and its nodes without RDMA traffic while
  the collective's kernels spin (`gpu_util` ≥ 90 %) for `ACME_DETECT_HANG_MINUTES` (2.5); without a
  resident kernel (a stall) for `ACME_DETECT_STALL_MINUTES` (10). A node writing ≥
  `ACME_DETECT_STORAGE_WRITE_BPS` (10 MB/s) to the shared file system (`storage_write`) means a
  checkpoint, not a hang; where no node writes, a spin right after a pause is a hang too (without that
  metric it waits for the stall rule, as a checkpoint's barrier wait looks the same);
- **fail-slow**: a node's SM activity or InfiniBand traffic below `ACME_DETECT_SLOW_RATIO` (0.7) of
  its peers' in `ACME_DETECT_SLOW_WINDOWS` (3) consecutive 5-minute windows.

Each suspect's evidence is written as a log under the diagnosis log root
(`detect/cluster=<c>/job=<id>/<kind>-<episode>.log`) and **starts `diagnose_failures`** for the job
(Params `cluster`, `job_id`, `log`, `day`), whose rules (`detected-hang`, `detected-fail-slow`)
classify it as an infrastructure failure, so a Pretrain/SFT job goes on to `recover_training` (a dry
run unless `ACME_RECOVERY_DRY_RUN=false`). One diagnosis per episode: the trigger's run id names the
job, the kind and the episode, so the next runs seeing the same hang do not start another.

**Schedule**: a cron trigger every 2 minutes (the run's time is the end of its window), no catchup
(a detection for a moment long past would start a recovery too late to help), one active run at a
time, short retries (a detection three minutes late is still useful; ten minutes late it is stale).
**Manual runs**: `cluster` (one, or `all`) and `at` (the window's end, ISO 8601 with a time zone;
empty = the run's time), e.g. to replay a past incident against the lake.
"""

from __future__ import annotations

from datetime import timedelta

from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator
from airflow.sdk import Param, dag, get_current_context, task
from airflow.timetables.trigger import CronTriggerTimetable

from acme import settings
from acme_airflow.defaults import DEFAULT_ARGS, Tag
from acme_airflow.params import cluster_param

DIAGNOSIS_DAG_ID = "diagnose_failures"


@dag(
    dag_id="detect_hangs",
    schedule=CronTriggerTimetable("*/2 * * * *", timezone="UTC"),
    start_date=settings.project().start_date,
    catchup=False,
    max_active_runs=1,
    dagrun_timeout=timedelta(minutes=10),
    default_args={
        **DEFAULT_ARGS,
        "retry_delay": timedelta(seconds=20),
        "retry_exponential_backoff": False,
    },
    tags=[Tag.TRAINING, Tag.METRICS, Tag.DIAGNOSIS],
    description="Every 2 min: running GPU jobs' telemetry checked for hangs and fail-slow nodes; suspects go to diagnosis",
    doc_md=__doc__,
    params={
        "cluster": cluster_param(),
        "at": Param(
            None,
            type=["null", "string"],
            title="Window end",
            description="ISO 8601 time with a time zone; empty = the run's time.",
        ),
    },
)
def detect_hangs():
    @task.short_circuit
    def running_jobs() -> list[dict]:
        """The clusters where a GPU job runs; none -> every later task is skipped."""
        from acme.detection.run import plan_detection
        from acme_airflow.tasks import lake_task

        context = get_current_context()
        with lake_task() as lake:
            return plan_detection(
                lake, context["params"]["cluster"], context["params"].get("at"),
                context.get("data_interval_end"), context["dag_run"].run_after,
            )  # fmt: skip

    @task(map_index_template="{{ item['cluster'] }}")
    def detect(item: dict) -> list[dict]:
        """Detect on one cluster; write each suspect's evidence; the diagnosis runs to start."""
        from acme.detection.run import detect_and_report
        from acme_airflow.tasks import lake_task

        with lake_task() as lake:
            return detect_and_report(lake, item["cluster"], item["at"])

    @task
    def collect(triggers: list[list[dict]]) -> list[dict]:
        return [t for per_cluster in triggers for t in per_cluster]

    diagnoses = collect(detect.expand(item=running_jobs()))
    # Mapped over the suspects: none (the usual run) -> skipped, nothing is triggered.
    TriggerDagRunOperator.partial(
        task_id="start_diagnosis",
        trigger_dag_id=DIAGNOSIS_DAG_ID,
        skip_when_already_exists=True,
        wait_for_completion=False,
    ).expand_kwargs(diagnoses)


detect_hangs()
