"""Default task arguments and tags every DAG of the project uses."""

from datetime import timedelta
from enum import StrEnum

DEFAULT_ARGS = {
    "owner": "acme-ops",
    # Transient failures (object store, scheduler command, worker loss) usually pass on retry;
    # every task is idempotent, so retrying is always safe.
    "retries": 2,
    "retry_delay": timedelta(minutes=2),
    "retry_exponential_backoff": True,
    "max_retry_delay": timedelta(minutes=20),
}


class Tag(StrEnum):
    INGEST = "ingest"
    JOBS = "jobs"
    METRICS = "metrics"
    NIGHTLY = "nightly"
    REPORT = "report"
    DIAGNOSIS = "diagnosis"
    RECOVERY = "recovery"
    TRAINING = "training"
    EVALUATION = "evaluation"
