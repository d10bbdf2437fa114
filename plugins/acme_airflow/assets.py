"""The datasets the DAGs produce and consume, declared once."""

from airflow.sdk import Asset

# Canonical job records, partitioned by cluster and submit day (acme.lake documents the layout).
JOB_TRACES = Asset(name="acme_job_traces", uri="acme://lake/jobs", group="acme")

# GPU, node and power telemetry, partitioned by metric, cluster and UTC day, with rollups.
METRICS = Asset(name="acme_metrics", uri="acme://lake/metrics", group="acme")

# A training job's new checkpoint; event extra: {"location": URI, "model_size": "7B"} (evaluate_checkpoint).
CHECKPOINTS = Asset(name="acme_checkpoints", uri="acme://checkpoints", group="acme")

# Failure diagnoses of failed jobs, partitioned by cluster and submit day (acme.diagnosis.records).
DIAGNOSES = Asset(name="acme_diagnoses", uri="acme://lake/diagnoses", group="acme")

# Characterization reports per cluster and period (reports/…); event extra: cluster, period, report URL.
REPORTS = Asset(name="acme_reports", uri="acme://lake/reports", group="acme")
