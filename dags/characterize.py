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

**Lemon nodes** (`suggest_lemon_cordons`, docs/lemon-nodes.md): each reported cluster's nodes are ranked by their
recent infrastructure failures; the worst are suggested for keeping cordoned (a record under
`recovery/lemon/cluster=<c>/date=<d>/` and an on-call notice), and cordoned through the recovery backend only
when `ACME_LEMON_AUTO_CORDON` is on.

**Manual runs**: `cluster` (a configured cluster or all) and `period` (`YYYY-MM`,
`YYYY-MM-DD` or `all`).
"""

from __future__ import annotations

from airflow.sdk import AssetOrTimeSchedule, CronTriggerTimetable, Param, dag, get_current_context, task

from acme import settings
from acme_airflow.assets import DIAGNOSES, METRICS, REPORTS
from acme_airflow.defaults import DEFAULT_ARGS, Tag
from acme_airflow.notify import nightly_deadline
from acme_airflow.params import cluster_param


@dag(
    dag_id="characterize",
    deadline=nightly_deadline("characterize", scheduled=False),  # late notice to on-call
    schedule=AssetOrTimeSchedule(
        timetable=CronTriggerTimetable("0 4 1 * *", timezone="UTC"), assets=(DIAGNOSES | METRICS)
    ),
    start_date=settings.project().start_date,
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
        from acme.report.build import plan_run
        from acme_airflow.context import run_date, triggering_extras
        from acme_airflow.tasks import lake_task

        context = get_current_context()
        params = context["params"]
        with lake_task() as lake:
            return plan_run(
                lake, params["cluster"], triggering_extras(context), run_date(context), params["period"]
            )

    @task(outlets=[REPORTS], map_index_template="{{ planned['cluster'] }} {{ planned['period'] }}")
    def build_report(planned: dict) -> dict:
        from acme.report.build import build_report as build
        from acme.report.build import report_result
        from acme_airflow.tasks import lake_task

        with lake_task() as lake:
            result = report_result(build(lake, planned["cluster"], planned["period"], write_index=False))
        event = {k: v for k, v in result.items() if k != "figures"}
        get_current_context()["outlet_events"][REPORTS].extra = event
        return result

    @task
    def publish_index(built: list[dict]) -> dict:
        from acme.report.publish import ReportWriter
        from acme_airflow.tasks import lake_task

        with lake_task() as lake:
            return {"index": ReportWriter(lake).write_index(), "reports": len(built)}

    @task
    def suggest_lemon_cordons(planned: list[dict]) -> list[dict]:
        """Rank each reported cluster's nodes by their recent infrastructure failures; suggest keeping the worst
        cordoned (a record in the lake and an on-call notice), cordon them only if ACME_LEMON_AUTO_CORDON is on."""
        from acme.notify.outbox import enqueue
        from acme.recovery.lemon_nightly import suggest_cordons
        from acme_airflow.context import run_date
        from acme_airflow.notify import deliver_queued
        from acme_airflow.tasks import lake_task

        day = run_date(get_current_context())
        with lake_task() as lake:
            results = [
                suggest_cordons(lake, cluster, day) for cluster in sorted({p["cluster"] for p in planned})
            ]
            for notice in [r["notice"] for r in results if r["notice"]]:
                enqueue(lake, notice)
            deliver_queued(lake)
        return [{"cluster": r["cluster"], "record": r["record"], "suggested": [s["node"] for s in r["suggested"]]}
                for r in results]  # fmt: skip

    planned = plan_reports()
    publish_index(build_report.expand(planned=planned))
    suggest_lemon_cordons(planned)


characterize()
