"""Lakes for the report tests, built through the real ingest from synthesized and real AcmeTrace rows."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from acme.jobs.ingest import JobInput, ingest_job_file
from acme.lake import Lake

START = dt.date(2023, 6, 5)  # the calibration window of tests/unit/test_synth_trace.py
DAYS = 14
SEED = 7
METRIC_DAYS = (dt.date(2023, 6, 5), dt.date(2023, 6, 6))

DIAGNOSIS_COLUMNS = (
    "cluster", "job_id", "date", "reason", "category", "attribution", "confidence", "source", "mitigation",
    "rule_id", "rule_version", "evidence", "diagnosed_at",
)  # fmt: skip


def ingest_synth_trace(lake: Lake, cluster: str, folder: Path, start=START, days=DAYS, scale=1.0) -> int:
    from acme.jobs.synth import write_synth_trace

    path = folder / f"trace_{cluster}.csv"
    written = write_synth_trace(cluster, start, days, path, scale=scale, seed=SEED)
    summary = ingest_job_file(lake, JobInput(cluster, "acmetrace", str(path)), path)
    assert summary["quarantined"] == 0
    return written["rows"]


def ingest_synth_metrics(lake: Lake, cluster: str, folder: Path, days=METRIC_DAYS) -> None:
    from acme.metrics.ingest import ingest_metrics_file
    from acme.metrics.synth import write_synth_metrics

    exports = folder / f"metrics_{cluster}"
    write_synth_metrics(cluster, 1, days[0], len(days), "acmetrace-csv", exports, seed=3)
    for day in days:
        ingest_metrics_file(lake, "acmetrace-csv", cluster, str(exports), day)


def write_diagnoses(lake: Lake, cluster: str, records: list[dict]) -> list[str]:
    """Diagnosis partitions in the layout the diagnosis helper publishes (one file per submit day)."""
    import pandas as pd
    import pyarrow as pa

    frame = pd.DataFrame(records)
    keys = []
    for day, part in frame.groupby("date"):
        table = pa.Table.from_pandas(
            part[list(DIAGNOSIS_COLUMNS)].reset_index(drop=True), preserve_index=False
        )
        key = f"diagnoses/cluster={cluster}/date={day}/diagnoses.parquet"
        lake.write_parquet(key, table)
        keys.append(key)
    return keys


def failed_jobs(lake: Lake, cluster: str, limit: int) -> list[dict]:
    """The first failed GPU jobs of the lake (job id, submit day, GPUs, run time)."""
    import duckdb

    files = [lake.path(k) for k in lake.list(f"jobs/cluster={cluster}") if k.endswith("jobs.parquet")]
    rows = duckdb.execute(
        "SELECT job_id, CAST(submit_time AS DATE)::VARCHAR, gpu_num, run_s, gpu_time FROM read_parquet($f) "
        "WHERE state_group = 'failed' AND gpu_num > 0 ORDER BY submit_time, job_id LIMIT $n",
        {"f": files, "n": limit},
    ).fetchall()
    return [dict(zip(("job_id", "date", "gpu_num", "run_s", "gpu_time"), r, strict=True)) for r in rows]


def diagnosis(cluster: str, job: dict, reason: str, category: str, when: str = "2023-06-20T00:00:00") -> dict:
    import pandas as pd

    return {
        "cluster": cluster, "job_id": str(job["job_id"]), "date": job["date"], "reason": reason,
        "category": category, "attribution": "root cause", "confidence": 0.9, "source": "rules",
        "mitigation": "restart", "rule_id": reason.lower().replace(" ", "_"), "rule_version": "1",
        "evidence": json.dumps({"lines": [1]}), "diagnosed_at": pd.Timestamp(when, tz="UTC"),
    }  # fmt: skip


@pytest.fixture(scope="session")
def synth_lake(tmp_path_factory) -> Lake:
    """Both clusters over the calibration window, one node of Seren telemetry on two days."""
    folder = tmp_path_factory.mktemp("report-synth")
    lake = Lake(str(folder / "lake"))
    for cluster in ("seren", "kalos"):
        ingest_synth_trace(lake, cluster, folder)
    ingest_synth_metrics(lake, "seren", folder)
    return lake
