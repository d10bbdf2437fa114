"""The whole ingest for each input format, into a fresh lake; idempotency and failures."""

from __future__ import annotations

import json
from datetime import date

import pytest

from acme.errors import InputError, InputNotFoundError
from acme.lake import Lake
from acme.metrics.ingest import ingest_metrics_file
from acme.metrics.storage import read_histograms, read_samples
from acme.metrics.synth import write_synth_metrics
from acme.metrics.validate import MetricsThresholdError

from .conftest import FIXTURES
from .test_prometheus_fake_server import START, FakePrometheus, matrix

DAY = date(2023, 7, 1)


def test_wide_csv_folder_end_to_end_and_rerun_is_identical(tmp_path):
    write_synth_metrics("seren", 4, DAY, 1, "acmetrace-csv", tmp_path / "wide", seed=1,
                        metrics=["gpu_util", "gpu_power", "server_power"])  # fmt: skip
    lake = Lake(str(tmp_path / "lake"))
    summary = ingest_metrics_file(lake, "acmetrace-csv", "seren", str(tmp_path / "wide"), DAY)
    assert summary["metrics"] == ["gpu_power", "gpu_util", "server_power"]
    assert summary["samples"] == (32 + 32 + 4) * 5760 and summary["quarantined"] == 0
    assert summary["bytes_per_sample"] < 3 and len(summary["partitions"]) == 3
    first = {key: lake.read_bytes(key) for key in lake.list("metrics")}
    again = ingest_metrics_file(lake, "acmetrace-csv", "seren", str(tmp_path / "wide"), DAY)
    assert again["samples"] == summary["samples"]
    assert {key: lake.read_bytes(key) for key in lake.list("metrics")} == first
    assert (
        len(lake.list("metrics_5m")) == 3
        and read_histograms(lake, "gpu_util", "seren", [DAY]).total == 32 * 5760
    )
    report = json.loads(lake.read_bytes(summary["validation"][len(lake.uri) + 1 :]))
    assert report["metrics"]["gpu_util"]["coverage"]["mean"] == 1.0


def test_exporter_text_scrapes_with_a_bad_line(tmp_path):
    path = tmp_path / "scrapes.prom"
    write_synth_metrics("seren", 1, DAY, 1, "exporter-text", path, seed=2, step_s=60,
                        metrics=["gpu_util", "gpu_temp", "xid_errors"])  # fmt: skip
    path.write_text(path.read_text() + 'DCGM_FI_DEV_GPU_UTIL{gpu="0",Hostname="x" oops\n')
    lake = Lake(str(tmp_path / "lake"))
    summary = ingest_metrics_file(lake, "exporter-text", "seren", str(path), DAY, step_s=60)
    assert summary["samples"] == 3 * 8 * 1440 and summary["quarantined"] == 1
    quarantine = lake.list("quarantine/metrics")
    assert (
        len(quarantine) == 1
        and lake.read_parquet(quarantine[0]).to_pandas()["reason"].str.contains("label").all()
    )
    back = read_samples(lake, "gpu_util", "seren", DAY)
    assert (
        back.series["uuid"].str.startswith("GPU-").all()
        and back.series["model"].eq("NVIDIA A100-SXM4-80GB").all()
    )


def test_the_real_page_fails_coverage_but_says_why(tmp_path):
    lake = Lake(str(tmp_path / "lake"))
    page = tmp_path / "dcgm-20230701T000000Z.prom"
    page.write_text((FIXTURES / "dcgm_exporter_4x_l4_kops.prom").read_text())
    with pytest.raises(
        MetricsThresholdError, match=r"metric gpu_util on 2023-07-01: mean device coverage 0.0%"
    ):
        ingest_metrics_file(lake, "exporter-text", "aws", str(page), DAY)
    summary = ingest_metrics_file(lake, "exporter-text", "aws", str(page), DAY, min_coverage=0)
    assert summary["samples"] == 7 and "DCGM_FI_DEV_SM_CLOCK" in summary["skipped_metrics"]


def test_prometheus_day_through_a_fake_server(tmp_path, catalog):
    server = FakePrometheus()
    try:
        values = [[START + 3600 * h, str(50 + h)] for h in range(24)]
        server.default = matrix(
            [({"Hostname": "n1", "gpu": str(g), "UUID": f"GPU-{g}"}, values) for g in range(2)]
        )
        lake = Lake(str(tmp_path / "lake"))
        summary = ingest_metrics_file(
            lake, "prometheus", "seren", server.url, DAY, step_s=3600, metrics=["gpu_util", "gpu_temp"]
        )
    finally:
        server.close()
    assert summary["samples"] == 2 * 2 * 24 and summary["metrics"] == ["gpu_util", "gpu_temp"]
    assert read_samples(lake, "gpu_temp", "seren", DAY).value.tolist()[:2] == [50, 51]
    with pytest.raises(InputError, match="needs the UTC day"):
        ingest_metrics_file(lake, "prometheus", "seren", "http://127.0.0.1:9", None)


def test_an_empty_prometheus_day_is_a_clear_failure(tmp_path):
    server = FakePrometheus()
    try:
        server.default = matrix([])
        lake = Lake(str(tmp_path / "lake"))
        with pytest.raises(MetricsThresholdError, match="gpu_util on 2023-07-01: mean device coverage 0.0%"):
            ingest_metrics_file(lake, "prometheus", "seren", server.url, DAY, metrics=["gpu_util"],
                                expected_series={"gpu_util": 16})  # fmt: skip
    finally:
        server.close()
    assert lake.list("metrics") == []


def test_unknown_format_and_missing_input(tmp_path):
    lake = Lake(str(tmp_path / "lake"))
    with pytest.raises(InputError, match="unknown metrics format 'csv'"):
        ingest_metrics_file(lake, "csv", "seren", "x")
    with pytest.raises(InputNotFoundError, match="no such file"):  # not a bad input: retried, it may arrive
        ingest_metrics_file(lake, "acmetrace-csv", "seren", str(tmp_path / "nothing"))
