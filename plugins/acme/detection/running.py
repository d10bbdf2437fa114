"""Which GPU jobs run at a moment, from the jobs lake.

A job runs at ``at`` when it started by then and has not ended before it (``end_time`` null: still
RUNNING in the last ingest). The partitions of the ``lookback_days`` submit days up to ``at`` are read
(only their few needed columns): a job submitted earlier than that and still running is not seen (raise
``ACME_DETECT_JOB_LOOKBACK_DAYS``). Jobs without a node list (AcmeTrace does not publish one) cannot be
matched to telemetry and are counted apart.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from acme.lake import Lake

COLUMNS = ("cluster", "job_id", "job_name", "user", "job_type", "state", "submit_time", "start_time",
           "end_time", "gpu_num", "node_num", "node_list")  # fmt: skip


def running_gpu_jobs(lake: Lake, cluster: str, at: datetime, lookback_days: int) -> dict[str, Any]:
    """``{"jobs": [job dicts with "nodes"], "without_node_list": n, "partitions_read": n}``."""
    import pyarrow.parquet as pq

    from acme.hostlist import expand_hostlist
    from acme.lake_keys import jobs_partition

    jobs: list[dict[str, Any]] = []
    without_nodes = read = 0
    for back in range(lookback_days + 1):
        day = (at - timedelta(days=back)).date()
        key = jobs_partition(cluster, day)
        if not lake.exists(key):
            continue
        read += 1
        with lake.local_file(key) as path:
            table = pq.read_table(path, columns=[c for c in COLUMNS if c in pq.read_schema(path).names])
        for row in table.to_pylist():
            start, end = row.get("start_time"), row.get("end_time")
            if not row.get("gpu_num") or start is None or start > at or (end is not None and end < at):
                continue
            nodes = expand_hostlist(row.get("node_list"))
            if not nodes:
                without_nodes += 1
                continue
            jobs.append({**_json_safe(row), "nodes": nodes})
    jobs.sort(key=lambda j: j["job_id"])
    return {"jobs": jobs, "without_node_list": without_nodes, "partitions_read": read}


def _json_safe(row: dict[str, Any]) -> dict[str, Any]:
    return {k: (v.isoformat() if isinstance(v, datetime) else v) for k, v in row.items()}
