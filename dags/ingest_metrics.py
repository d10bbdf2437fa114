"""
### Nightly monitoring ingest

For each cluster with a `metrics` source in `include/config/clusters.yaml` and the run's UTC
day: pull the day's GPU, node and power telemetry (Prometheus `query_range` at the scrape
step, split under the per-series point limit and retried with backoff; or dcgm-exporter
scrape files; or AcmeTrace wide CSVs), validate it (ranges, NaN/Inf, duplicates, order,
counter resets, coverage, stale devices), store it compactly per metric and day, roll it up
(per-GPU 5-minute aggregates, mergeable daily histograms) and update the `acme_metrics` Asset.

A metric that fails its coverage or quarantine threshold is not published and fails the run
with its name; re-runs replace the day's partitions. Clusters without a metrics source are
skipped.

**Manual runs**: `day`, optionally `cluster`, and `source` + `input` to read an exported file.
**Backfill**: `airflow backfill create --dag-id ingest_metrics --from-date … --to-date …`.
"""

from __future__ import annotations

from airflow.sdk import CronDataIntervalTimetable, dag, get_current_context, task

from acme import config
from acme.clusters import METRIC_FORMATS
from acme_airflow.assets import METRICS
from acme_airflow.defaults import DEFAULT_ARGS, Tag
from acme_airflow.params import manual_run_params


@dag(
    dag_id="ingest_metrics",
    schedule=CronDataIntervalTimetable("@daily", timezone="UTC"),
    start_date=config.start_date(),
    catchup=config.catchup(),
    max_active_runs=config.max_active_runs(),
    default_args=DEFAULT_ARGS,
    tags=[Tag.INGEST, Tag.METRICS, Tag.NIGHTLY],
    doc_md=__doc__,
    description="Nightly: each cluster's GPU and node telemetry of a UTC day → validated metric partitions and rollups",
    params=manual_run_params(
        list(METRIC_FORMATS),
        "Prometheus URL, file or folder to ingest instead of the configured one.",
    ),
)
def ingest_metrics():
    @task
    def plan_inputs() -> list[dict]:
        from acme.metrics.ingest import plan_metric_inputs
        from acme_airflow.params import plan_run_inputs

        return plan_run_inputs(plan_metric_inputs)

    @task(outlets=[METRICS], map_index_template="{{ planned['cluster'] }}")
    def ingest(planned: dict) -> dict:
        from acme.metrics.ingest import ingest_metrics_file
        from acme_airflow.failures import no_retry_for_bad_input
        from acme_airflow.lake import task_lake

        with no_retry_for_bad_input():
            summary = ingest_metrics_file(
                task_lake(), planned["format"], planned["cluster"], planned["input"], planned["day"],
                step_s=planned["step_s"],
            )  # fmt: skip
        manifest = {
            key: summary[key] for key in ("cluster", "day", "samples", "series", "quarantined", "metrics")
        }
        manifest["partitions"] = summary["partitions"]
        get_current_context()["outlet_events"][METRICS].extra = manifest
        return manifest

    ingest.expand(planned=plan_inputs())


ingest_metrics()
