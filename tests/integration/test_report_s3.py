"""The report over a lake on a real S3 API (moto server on loopback): DuckDB reads the Parquet
partitions through the lake's own fsspec filesystem and the report is published into the bucket."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from datetime import date
from pathlib import Path

import pytest

from acme.jobs.ingest import JobInput, ingest_job_file
from acme.lake import Lake, open_lake
from acme.report.build import build_report

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
DAYS = ("2023-07-01", "2023-07-02")


def fill(lake: Lake, metrics_folder: Path) -> None:
    """The bundled Seren job days and one node's telemetry of the first day."""
    from acme.metrics.ingest import ingest_metrics_file

    for day in DAYS:
        path = ROOT / "include" / "sample_data" / "jobs" / "seren" / f"{day}.csv"
        ingest_job_file(lake, JobInput("seren", "acmetrace", str(path)), path)
    ingest_metrics_file(lake, "acmetrace-csv", "seren", str(metrics_folder), date(2023, 7, 1))


@pytest.fixture(scope="module")
def metrics_folder(tmp_path_factory) -> Path:
    from acme.metrics.synth import write_synth_metrics

    folder = tmp_path_factory.mktemp("s3-report") / "metrics"
    write_synth_metrics("seren", 1, date(2023, 7, 1), 1, "acmetrace-csv", folder, seed=5)
    return folder


def test_report_from_an_s3_lake_is_published_into_the_bucket(s3_env, metrics_folder, tmp_path):
    prefix = f"run-{uuid.uuid4().hex[:8]}"
    s3_lake = open_lake(f"s3://{s3_env['bucket']}/{prefix}")
    fill(s3_lake, metrics_folder)
    manifest = build_report(s3_lake, "seren", "2023-07")
    assert manifest["report"] == f"s3://acme-lake/{prefix}/reports/cluster=seren/period=2023-07/index.html"
    assert manifest["index"] == f"s3://acme-lake/{prefix}/reports/index.html"
    listing = s3_env["client"].list_objects_v2(Bucket=s3_env["bucket"], Prefix=f"{prefix}/reports/")
    keys = {item["Key"][len(prefix) + 1 :] for item in listing["Contents"]}
    base = "reports/cluster=seren/period=2023-07"
    assert {f"{base}/index.html", f"{base}/report.json", "reports/index.html"} <= keys
    assert {f"{base}/figures/{name}.png" for name in ("duration_cdf", "gpu_util_cdf", "power_cdf")} <= keys
    assert len([k for k in keys if k.endswith(".png")]) == manifest["figures"]
    index = s3_lake.read_bytes("reports/index.html").decode()
    assert 'href="cluster=seren/period=2023-07/index.html"' in index

    # The same inputs in a local lake give the same figures: one code path for both.
    local = Lake(str(tmp_path / "lake"))
    fill(local, metrics_folder)
    local_summary = build_report(local, "seren", "2023-07")["summary"]
    stored = json.loads(s3_lake.read_bytes(f"{base}/report.json"))
    assert stored["gpu_jobs"] == local_summary["gpu_jobs"] > 0
    assert stored["median_run_time_gpu_s"] == local_summary["median_run_time_gpu_s"]
    assert stored["gpu_time_share"] == local_summary["gpu_time_share"]
    assert stored["findings"]["gpu_util_cdf"].startswith("GPU utilization is polarized")

    # The command line reads the S3 lake (standard AWS environment) and writes a local folder.
    command = [sys.executable, "-m", "acme", "report", "--lake", s3_lake.uri, "--cluster", "seren",
               "--period", "2023-07-02", "-o", str(tmp_path / "out")]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT / "plugins", timeout=300)
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    assert printed["index"] == str(tmp_path / "out" / "index.html")
    assert (tmp_path / "out" / "cluster=seren" / "period=2023-07-02" / "tables" / "summary.json").is_file()
