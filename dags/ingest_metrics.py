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

**Node groups**: a datacenter-size day is split into `node_groups` mapped tasks (the cluster's
`metrics.node_groups`, or the Param), each storing its nodes' samples and rollup parts; then
`merge_node_groups` writes the day's rollups and histograms from the parts, exactly those of a
single task, and updates the Asset. 1 (the default) keeps one task per input.

**Manual runs**: `day`, optionally `cluster`, and `source` + `input` to read an exported file;
`snapshot`, `scrape_time` and `node` (the `--snapshot`, `--scrape-time`, `--node` flags of
`python -m acme ingest-metrics`, and the cluster's `metrics.` settings of the same names) store
one-off scrapes without a coverage check, date samples that carry no timestamp (`{ds}` is the
run's day) and name the host of a scrape without a node label. Empty = the cluster's setting.
**Backfill**: `airflow backfill create --dag-id ingest_metrics --from-date … --to-date …`.
"""

from __future__ import annotations

from airflow.sdk import CronDataIntervalTimetable, Param, dag, get_current_context, task

from acme import settings
from acme.metrics.formats import FORMAT_NAMES as METRIC_FORMATS
from acme_airflow.assets import METRICS
from acme_airflow.defaults import DEFAULT_ARGS, Tag
from acme_airflow.params import manual_run_params

# A mapped ingest's label: the cluster, and "3/8" for the fourth of eight node groups.
NODE_GROUP_LABEL = (
    "{{ planned['cluster'] }}{% if planned.get('node_group') %} "
    "{{ planned['node_group'][0] }}/{{ planned['node_group'][1] }}{% endif %}"
)


@dag(
    dag_id="ingest_metrics",
    schedule=CronDataIntervalTimetable("@daily", timezone="UTC"),
    start_date=settings.project().start_date,
    catchup=settings.project().catchup,
    max_active_runs=settings.project().max_active_runs,
    default_args=DEFAULT_ARGS,
    tags=[Tag.INGEST, Tag.METRICS, Tag.NIGHTLY],
    doc_md=__doc__,
    description="Nightly: each cluster's GPU and node telemetry of a UTC day → validated metric partitions and rollups",
    params={
        **manual_run_params(
            list(METRIC_FORMATS),
            "Prometheus URL, file or folder to ingest instead of the configured one.",
        ),
        "snapshot": Param(
            None,
            type=["null", "boolean"],
            title="Snapshot mode (--snapshot)",
            description="One-off scrapes or instant queries: stored as snapshots, no daily coverage check. "
            "Empty = the cluster's metrics.snapshot.",
        ),
        "scrape_time": Param(
            None,
            type=["null", "string"],
            title="Scrape time (--scrape-time)",
            description="When samples without a timestamp were scraped (RFC 3339 or epoch seconds; {ds} is the "
            "run's day); the time of a Prometheus snapshot. Empty = the cluster's metrics.scrape_time.",
        ),
        "node": Param(
            None,
            type=["null", "string"],
            title="Node (--node)",
            description="The host of samples without a node label (a scrape taken at one host's exporter). "
            "Empty = the cluster's metrics.node.",
        ),
        "node_groups": Param(
            None,
            type=["null", "integer"],
            minimum=1,
            title="Node groups",
            description="Split each input's day into this many mapped tasks by node (1 = one task). "
            "Empty = the cluster's metrics.node_groups.",
        ),
    },
)
def ingest_metrics():
    @task
    def plan_inputs() -> list[dict]:
        from functools import partial

        from acme.metrics.ingest import plan_metric_inputs
        from acme_airflow.params import plan_run_inputs

        params = get_current_context()["params"]
        overrides = {name: params.get(name) for name in ("snapshot", "scrape_time", "node", "node_groups")}
        return plan_run_inputs(partial(plan_metric_inputs, **overrides))

    @task(map_index_template=NODE_GROUP_LABEL)
    def ingest(planned: dict) -> dict:
        from acme.metrics.ingest import ingest_planned_input
        from acme_airflow.tasks import lake_task

        with lake_task() as lake:
            return ingest_planned_input(lake, planned)

    @task(outlets=[METRICS])
    def merge_node_groups(manifests: list[dict]) -> list[dict]:
        from acme.metrics.node_groups import merge_node_groups as merge
        from acme_airflow.tasks import lake_task

        with lake_task() as lake:
            merged = merge(lake, list(manifests))
        get_current_context()["outlet_events"][METRICS].extra = {"inputs": merged}
        return merged

    merge_node_groups(ingest.expand(planned=plan_inputs()))


ingest_metrics()
