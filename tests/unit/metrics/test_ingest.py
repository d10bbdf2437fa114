"""The whole ingest for each input format, into a fresh lake; idempotency and failures."""

from __future__ import annotations

import json
from datetime import date

import pytest

from acme.errors import InputError, InputNotFoundError
from acme.lake import Lake
from acme.metrics.ingest import ingest_metrics_file
from acme.metrics.storage import read_samples
from acme.metrics.synth import write_synth_metrics
from acme.metrics.validate import MetricsThresholdError
from tests.metrics_support import read_histograms, read_snapshots

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
    assert summary["samples"] == 8 and "DCGM_FI_DEV_SM_CLOCK" in summary["skipped_metrics"]


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


FIELD = FIXTURES.parent / "field" / "metrics"


def test_a_snapshot_is_stored_apart_without_a_coverage_check_and_a_rerun_replaces_it(tmp_path):
    lake = Lake(str(tmp_path / "lake"))
    page = str(FIELD / "scrapes" / "dcgm_a30_mig_gpu_temp_issue317.prom")
    summary = ingest_metrics_file(
        lake, "exporter-text", "a30", page, snapshot=True, scrape_time="2024-04-01T12:00:00Z"
    )
    assert summary["mode"] == "snapshot" and summary["samples"] == 6 and summary["quarantined"] == 0
    assert summary["time_sources"] == {"--scrape-time": 6}
    stored = lake.list("metrics_snapshots")
    assert len(stored) == 1 and "metric=gpu_temp/cluster=a30/date=2024-04-01/" in stored[0]
    assert lake.list("metrics") == [] and lake.list("metrics_5m") == []  # no day partition, no rollup
    first = lake.read_bytes(stored[0])
    again = ingest_metrics_file(
        lake, "exporter-text", "a30", page, snapshot=True, scrape_time="2024-04-01T12:00:00Z"
    )
    assert again["samples"] == 6 and lake.list("metrics_snapshots") == stored
    assert lake.read_bytes(stored[0]) == first
    back = read_snapshots(lake, "gpu_temp", "a30", date(2024, 4, 1))
    assert (
        back.n_series == 6 and back.series["gpu_instance"].notna().all() and set(back.value.tolist()) == {35}
    )
    corrected = ingest_metrics_file(
        lake, "exporter-text", "a30", page, snapshot=True, scrape_time="2024-04-02T12:00:00Z"
    )  # the operator got the time wrong: the re-run replaces the snapshot it had dated on the 1st
    assert corrected["samples"] == 6 and len(lake.list("metrics_snapshots")) == 1
    assert read_snapshots(lake, "gpu_temp", "a30", date(2024, 4, 1)).n_series == 0


def test_a_days_ingest_of_scrapes_without_time_does_not_blame_the_exporter(tmp_path):
    lake = Lake(str(tmp_path / "lake"))
    page = tmp_path / "metrics.txt"
    page.write_text((FIXTURES / "dcgm_exporter_4x_l4_kops.prom").read_text())  # mtime: now
    with pytest.raises(InputError) as raised:
        ingest_metrics_file(lake, "exporter-text", "aws", str(page), DAY)
    message = str(raised.value)
    assert "no sample falls on 2023-07-01" in message and "file mtime: 8" in message
    assert "--scrape-time" in message and "exporter" not in message and "down" not in message
    with pytest.raises(MetricsThresholdError, match=r"1 scrape time\(s\), not a day.*--snapshot"):
        ingest_metrics_file(lake, "exporter-text", "aws", str(page), DAY, scrape_time="2023-07-01T08:00:00Z")
    assert lake.list("metrics") == []


def test_an_input_that_stores_nothing_is_refused_even_without_a_day(tmp_path):
    lake = Lake(str(tmp_path / "lake"))
    page = str(FIELD / "scrapes" / "hami_vgpu_monitor_issue34.prom")
    with pytest.raises(
        InputError, match=r"none of its 4 sample\(s\) is of a catalog metric.*ACME_METRICS_CATALOG"
    ):
        ingest_metrics_file(lake, "exporter-text", "hami", page, snapshot=True, node="n1")
    ipmi = str(FIELD / "scrapes" / "ipmi_exporter_dcmi_power_pr160.prom")
    with pytest.raises(InputError, match="no node label.*--node"):
        ingest_metrics_file(lake, "exporter-text", "bmc", ipmi, snapshot=True)
    assert lake.list("metrics_snapshots") == [] and lake.list("metrics") == []


def test_saved_answers_matrix_daily_vector_snapshot_and_unnamed_series(tmp_path, catalog):
    lake = Lake(str(tmp_path / "lake"))
    matrix_answer = tmp_path / "range.json"  # hand-made in the shape of a query_range answer
    values = [[START + 3600 * h, str(40 + h)] for h in range(24)]
    matrix_answer.write_text(json.dumps(matrix([({"__name__": "DCGM_FI_DEV_GPU_TEMP", "Hostname": "n1",
                                                   "gpu": "0"}, values)])[1]))  # fmt: skip
    summary = ingest_metrics_file(lake, "prometheus-json", "c", str(matrix_answer), DAY, step_s=3600)
    assert summary["samples"] == 24 and summary["metrics"] == ["gpu_temp"]
    assert read_samples(lake, "gpu_temp", "c", DAY).value.tolist()[:2] == [40, 41]

    unnamed = tmp_path / "expr.json"  # `100 * DCGM_FI_PROF_SM_ACTIVE` drops __name__: already in %
    unnamed.write_text(json.dumps(matrix([({"Hostname": "n1", "gpu": "0"}, [[START, "37.5"]])])[1]))
    with pytest.raises(InputError, match="carry no __name__.*--metric"):
        ingest_metrics_file(lake, "prometheus-json", "c", str(unnamed), snapshot=True)
    summary = ingest_metrics_file(
        lake, "prometheus-json", "c", str(unnamed), snapshot=True, metric="sm_active"
    )
    assert read_snapshots(lake, "sm_active", "c", DAY).value.tolist() == [37.5]

    vector = str(FIELD / "api" / "instant_vector_gpu_temp_l40s_upcloud.json")
    with pytest.raises(InputError, match="instant vector.*--snapshot"):
        ingest_metrics_file(lake, "prometheus-json", "c", vector, DAY)
    summary = ingest_metrics_file(lake, "prometheus-json", "c", vector, snapshot=True)
    assert summary["samples"] == 1
    back = read_snapshots(lake, "gpu_temp", "c", date(2026, 4, 9))
    assert back.value.tolist() == [32] and back.ts_ms.tolist() == [1775721747082]
    assert back.series["node"].tolist() == ["gpu1-wl8sg"]


def test_a_prometheus_snapshot_is_an_instant_query_at_the_scrape_time(tmp_path):
    server = FakePrometheus()
    try:
        server.default = (200, {"status": "success", "data": {"resultType": "vector", "result": [
            {"metric": {"__name__": "DCGM_FI_DEV_GPU_UTIL", "Hostname": "n1", "gpu": "0"},
             "value": [START + 600, "88"]}]}})  # fmt: skip
        lake = Lake(str(tmp_path / "lake"))
        with pytest.raises(InputError, match="--scrape-time"):
            ingest_metrics_file(lake, "prometheus", "c", server.url, snapshot=True, metrics=["gpu_util"])
        summary = ingest_metrics_file(
            lake, "prometheus", "c", server.url, snapshot=True, metrics=["gpu_util"],
            scrape_time="2023-07-01T00:10:00Z",
        )  # fmt: skip
    finally:
        server.close()
    path, params = server.requests[-1]
    assert path == "/api/v1/query" and params["time"] == str(START + 600)
    assert summary["samples"] == 1 and read_snapshots(lake, "gpu_util", "c", DAY).value.tolist() == [88]
    assert summary["time_sources"] == {"sample timestamp": 1}
