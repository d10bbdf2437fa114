"""The datasets the DAGs produce and consume, declared once."""

from airflow.sdk import Asset

# Canonical job records, partitioned by cluster and submit day (acme.lake documents the layout).
JOB_TRACES = Asset(name="acme_job_traces", uri="acme://lake/jobs", group="acme")

# GPU, node and power telemetry, partitioned by metric, cluster and UTC day, with rollups.
METRICS = Asset(name="acme_metrics", uri="acme://lake/metrics", group="acme")
