"""
### Characterization reports

Publishes, per cluster and period, the characterization of the NSDI'24 paper ("Characterization
of Large Language Model Development in the Datacenter") on the cluster's own data: summary
beside the paper's clusters, duration, GPU demand and utilization CDFs, workload types, power,
final states and the failure table, trends. Each report is an HTML page with its figures and
every table as CSV and JSON, under `reports/cluster=<c>/period=<p>/` in the lake;
`reports/index.html` lists them all.

**When**: after each failure diagnosis (the `acme_diagnoses` Asset, which `diagnose_failures`
updates after every job-trace ingest, with the clusters and days it covered) and each monitoring
ingest (`acme_metrics`): the day, its month and the whole history of that cluster. A job-trace
ingest reaches the reports through its diagnosis, so the day's report has the day's failure table
and is built once, not once before and once after its diagnosis; events that arrive while a run is
queued or running are coalesced into the next run (`max_active_runs=1`). And on the 1st of each
month at 04:00 UTC (the previous month and the whole history of every cluster).
Reports are rebuilt whole from the lake, so re-runs replace them.

**Manual runs**: `cluster` (a configured cluster or all) and `period` (`YYYY-MM`,
`YYYY-MM-DD` or `all`).
"""

from __future__ import annotations

from airflow.sdk import AssetOrTimeSchedule, CronTriggerTimetable, Param, dag, get_current_context, task

from acme import config
from acme_airflow.assets import DIAGNOSES, METRICS, REPORTS
from acme_airflow.defaults import DEFAULT_ARGS, Tag
from acme_airflow.params import cluster_param


@dag(
    dag_id="characterize",
    schedule=AssetOrTimeSchedule(
        timetable=CronTriggerTimetable("0 4 1 * *", timezone="UTC"), assets=(DIAGNOSES | METRICS)
    ),
    start_date=config.start_date(),
    catchup=False,
    max_active_runs=1,  # runs rewrite the shared index page: one at a time
    default_args=DEFAULT_ARGS,
    tags=[Tag.REPORT, Tag.NIGHTLY],
    doc_md=__doc__,
    description="After each ingest and monthly: the paper's characterization per cluster and period as HTML reports",
    params={
        "cluster": cluster_param(),
        "period": Param(
            None,
            type=["null", "string"],
            pattern=r"^(all|\d{4}-\d{2}(-\d{2})?)$",
            title="Period",
            description="YYYY-MM, YYYY-MM-DD or all. Empty = what the trigger implies.",
        ),
    },
)
def characterize():
    @task
    def plan_reports() -> list[dict]:
        from acme.clusters import load_clusters
        from acme.report.build import plan_reports as plan
        from acme_airflow.failures import no_retry_for_bad_input
        from acme_airflow.lake import task_lake

        context = get_current_context()
        params = context["params"]
        clusters = sorted(load_clusters()) if params["cluster"] == "all" else [params["cluster"]]
        # A metrics event names its cluster and day; a diagnosis event the (cluster, day) pairs it covered.
        ingested = [
            pair
            for events in (context.get("triggering_asset_events") or {}).values()
            for event in events
            for pair in (event.extra or {}).get("days") or [event.extra or {}]
            if pair.get("cluster") and pair.get("day")
        ]
        # The monthly trigger's own time (a manual or asset-triggered run may have no logical date).
        run_day = (context.get("logical_date") or context["dag_run"].run_after).date()
        with no_retry_for_bad_input():
            return plan(task_lake(), clusters, ingested, run_day, params["period"])

    @task(outlets=[REPORTS], map_index_template="{{ planned['cluster'] }} {{ planned['period'] }}")
    def build_report(planned: dict) -> dict:
        from acme.report.build import build_report as build
        from acme_airflow.failures import no_retry_for_bad_input
        from acme_airflow.lake import task_lake

        with no_retry_for_bad_input():
            manifest = build(task_lake(), planned["cluster"], planned["period"], write_index=False)
        summary = {k: manifest["summary"].get(k) for k in ("cluster", "period", "gpu_jobs", "fail_rate_gpu")}
        get_current_context()["outlet_events"][REPORTS].extra = {**summary, "report": manifest["report"]}
        return {"report": manifest["report"], "figures": manifest["figures"], **summary}

    @task
    def publish_index(built: list[dict]) -> dict:
        from acme.report.publish import ReportWriter
        from acme_airflow.lake import task_lake

        return {"index": ReportWriter(task_lake()).write_index(), "reports": len(built)}

    publish_index(build_report.expand(planned=plan_reports()))


characterize()
