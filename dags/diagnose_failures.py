"""
### Failure diagnosis of the day's failed jobs

Runs after every nightly job-trace ingest (it is scheduled on the `acme_job_traces` Asset and
takes the clusters and days that ingest published) and on a manual trigger right after a
crash. For every failed job: **locate** its runtime log (`ACME_DIAGNOSIS_LOG_PATTERN`) →
**compress** it (filter rules of the job's family, then the bundled ones) → **rules** (bundled
and learned) → **retrieval** of similar past diagnoses from the lake's vector store → the
**LLM agent** only when still not confident and an endpoint is configured (offline otherwise;
an unavailable agent falls back to retrieval and the record says so) → write the record to
`diagnoses/cluster=<c>/date=<d>/` and update the `acme_diagnoses` Asset.

**Routing**: Infrastructure failures of Pretrain/SFT jobs trigger `recover_training` with
`{"cluster", "job_id", "nodes", "checkpoint_uri", "dry_run", "reason"}`; user failures get an
owner message at `diagnosis/messages/cluster=<c>/date=<d>/<job_id>.json`.

**Manual runs**: `cluster` and `job_id` (and `log`, a location under the log root, when the
log is elsewhere than the pattern says); or `cluster` and `day` to redo a day. Re-runs replace
records, messages and stored cases; a recovery is triggered at most once per job
(`trigger_run_id` is the job's).
"""

from __future__ import annotations

from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator
from airflow.sdk import Param, dag, get_current_context, task

from acme import config
from acme.diagnosis import settings
from acme_airflow.assets import DIAGNOSES, JOB_TRACES
from acme_airflow.defaults import DEFAULT_ARGS, Tag
from acme_airflow.params import cluster_param

RECOVERY_DAG_ID = "recover_training"


@dag(
    dag_id="diagnose_failures",
    schedule=JOB_TRACES,
    start_date=config.start_date(),
    catchup=False,
    max_active_runs=config.max_active_runs(),
    default_args=DEFAULT_ARGS,
    tags=[Tag.NIGHTLY, Tag.JOBS, Tag.DIAGNOSIS],
    doc_md=__doc__,
    description="After each job ingest, or by hand after a crash: failed jobs' logs → root cause → owner message or recovery",
    params={
        "cluster": cluster_param(),
        "job_id": Param(
            None,
            type=["null", "string"],
            title="Job id",
            description="Diagnose this job only (needs a cluster).",
        ),
        "log": Param(
            None,
            type=["null", "string"],
            title="Log location",
            description="Path under the log root (ACME_DIAGNOSIS_LOG_ROOT), relative or absolute; "
            "empty = found by ACME_DIAGNOSIS_LOG_PATTERN.",
        ),
        "day": Param(
            None,
            type=["null", "string"],
            format="date",
            title="Day (UTC)",
            description="Submit day of the jobs; empty = the days the triggering ingest published, or yesterday.",
        ),
    },
)
def diagnose_failures():
    @task
    def plan_jobs() -> list[dict]:
        from acme.clusters import load_clusters
        from acme.diagnosis.nightly import diagnosis_targets, plan_diagnoses
        from acme_airflow.context import run_day
        from acme_airflow.failures import no_retry_for_bad_input
        from acme_airflow.lake import task_lake

        context = get_current_context()
        params = context["params"]
        events = (context.get("triggering_asset_events") or {}).get(JOB_TRACES) or []
        with no_retry_for_bad_input():
            targets = diagnosis_targets(
                load_clusters(), params["cluster"], run_day(context), [e.extra for e in events],
                manual=bool(params.get("day") or params.get("job_id")),
            )  # fmt: skip
            plan = plan_diagnoses(task_lake(), targets, job_id=params.get("job_id"), log=params.get("log"))
        print(f"planned {plan['planned']} failed jobs, left out {plan['left_out']} (ACME_DIAGNOSIS_MAX_JOBS)")
        return plan["items"]

    @task(
        max_active_tis_per_dag=settings.concurrency(),
        map_index_template="{{ item['cluster'] }}/{{ item['job']['job_id'] }}",
    )
    def diagnose(item: dict) -> dict:
        from acme.diagnosis.nightly import diagnose_and_route
        from acme_airflow.failures import no_retry_for_bad_input
        from acme_airflow.lake import task_lake
        from acme_airflow.llm import failure_agent

        with no_retry_for_bad_input():
            # The LLM endpoint from the Airflow connection (ACME_LLM_CONN_ID), else the environment;
            # None offline.
            return diagnose_and_route(task_lake(), item, agent=failure_agent())

    @task(outlets=[DIAGNOSES])
    def publish(manifests: list[dict]) -> list[dict]:
        """Summarize the run on the Asset; return the recovery requests (conf + a run id per job)."""
        from acme.diagnosis.nightly import summarize

        summary = summarize([m for m in manifests if m])
        get_current_context()["outlet_events"][DIAGNOSES].extra = {
            k: summary[k] for k in ("jobs", "reasons", "sources", "routes", "partitions")
        }
        return [
            {"conf": conf, "trigger_run_id": f"recover__{conf['cluster']}__{conf['job_id']}"}
            for conf in summary["recoveries"]
        ]

    recoveries = publish(diagnose.expand(item=plan_jobs()))
    # Mapped over the recovery requests: none (the usual night) -> the task is skipped, nothing is triggered.
    TriggerDagRunOperator.partial(
        task_id="trigger_recovery",
        trigger_dag_id=RECOVERY_DAG_ID,
        skip_when_already_exists=True,
        wait_for_completion=False,
    ).expand_kwargs(recoveries)


diagnose_failures()
