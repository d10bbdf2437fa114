"""Monitoring ingest against a real Prometheus (Debian's package), loaded with synthesized history.

The fixture installs Prometheus if missing, turns a synthesized OpenMetrics day into TSDB
blocks with `promtool tsdb create-blocks-from openmetrics`, serves them on 127.0.0.1 and stops
the server (by process group) when the tests are done.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
import urllib.parse
import urllib.request
from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from acme.lake import Lake
from acme.metrics.ingest import ingest_metrics_file
from acme.metrics.storage import read_samples
from acme.metrics.synth import write_synth_metrics
from tests.debian_packages import ensure_commands
from tests.integration.conftest import free_port
from tests.metrics_support import read_snapshots, to_frame

pytestmark = pytest.mark.integration
DAY = date(2023, 7, 1)


def ensure_prometheus() -> None:
    ensure_commands(["prometheus", "promtool"], ["prometheus"])


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory):
    ensure_prometheus()
    work = tmp_path_factory.mktemp("prometheus")
    openmetrics = work / "day.om"
    write_synth_metrics("seren", 1, DAY, 1, "prometheus-openmetrics", openmetrics, seed=5)
    subprocess.run(
        ["promtool", "tsdb", "create-blocks-from", "openmetrics", str(openmetrics), str(work / "tsdb")],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    (work / "prometheus.yml").write_text("global:\n  scrape_interval: 15s\n")
    port = free_port()
    log = (work / "prometheus.log").open("w")
    server = subprocess.Popen(
        ["prometheus", f"--config.file={work / 'prometheus.yml'}", f"--storage.tsdb.path={work / 'tsdb'}",
         "--storage.tsdb.retention.time=100y", f"--web.listen-address=127.0.0.1:{port}"],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline or server.poll() is not None:
                pytest.fail(
                    f"Prometheus did not become ready: {(work / 'prometheus.log').read_text()[-2000:]}"
                )
            time.sleep(0.5)
        yield {"url": url, "openmetrics": openmetrics}
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait()


def source_series(openmetrics: Path, family: str, gpu: str) -> dict[int, float]:
    """(timestamp ms → value) of one GPU's series, read straight from the OpenMetrics file."""
    pattern = re.compile(rf'^{family}{{gpu="{gpu}",[^}}]*}} (\S+) (\d+)$')
    values = {}
    with openmetrics.open() as handle:
        for line in handle:
            match = pattern.match(line)
            if match:
                values[int(match[2]) * 1000] = float(match[1])
    return values


def test_a_day_from_real_prometheus_matches_its_source_and_reingests_identically(prometheus, tmp_path):
    lake = Lake(str(tmp_path / "lake"))
    summary = ingest_metrics_file(lake, "prometheus", "seren", prometheus["url"], DAY)
    assert summary["quarantined"] == 0
    assert {"gpu_util", "sm_active", "gpu_power", "gpu_temp", "node_cpu_util", "server_power"} <= set(
        summary["metrics"]
    )
    # 8 GPUs and one node over one day at 15 s: every expected sample is there.
    assert summary["samples"] >= 0.99 * summary["series"] * 5760

    expected = source_series(prometheus["openmetrics"], "DCGM_FI_DEV_GPU_UTIL", "3")
    assert len(expected) == 5760
    frame = to_frame(read_samples(lake, "gpu_util", "seren", DAY), "seren", "%")
    gpu3 = frame[frame["gpu"] == 3]
    stored = dict(zip(gpu3["timestamp"].astype("int64") // 1000, gpu3["value"].astype(float), strict=True))
    common = sorted(set(stored) & set(expected))
    assert len(common) >= 5750
    assert all(stored[t] == expected[t] for t in common)

    partitions = {p: Path(p).read_bytes() for p in summary["partitions"]}
    again = ingest_metrics_file(lake, "prometheus", "seren", prometheus["url"], DAY)
    assert again["samples"] == summary["samples"]
    assert {p: Path(p).read_bytes() for p in again["partitions"]} == partitions


def test_an_unreachable_prometheus_is_a_clear_error_after_retries(tmp_path):
    from acme.metrics.prometheus import PrometheusQueryError

    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    with pytest.raises(PrometheusQueryError, match=r"127\.0\.0\.1"):
        ingest_metrics_file(
            Lake(str(tmp_path / "lake")), "prometheus", "seren", url, DAY,
            client_options={"max_attempts": 2, "backoff_s": 0.05, "timeout_s": 2},
        )  # fmt: skip


@pytest.mark.airflow
def test_the_nightly_metrics_dag_pulls_a_day_from_prometheus(prometheus, airflow_db, lake_dir):
    from tests.dags.test_ingest_metrics import run_metrics_dag

    assert run_metrics_dag(cluster="seren", source="prometheus", input=prometheus["url"]).state == "success"
    stored = sorted(
        p.parent.parent.parent.name for p in lake_dir.glob("metrics/*/cluster=seren/date=*/*.parquet")
    )
    assert {"metric=gpu_util", "metric=sm_active", "metric=node_cpu_util", "metric=server_power"} <= set(
        stored
    )


def test_a_snapshot_is_an_instant_query_of_real_prometheus(prometheus, tmp_path):
    lake = Lake(str(tmp_path / "lake"))
    summary = ingest_metrics_file(
        lake, "prometheus", "seren", prometheus["url"], snapshot=True, scrape_time="2023-07-01T12:00:00Z"
    )
    assert summary["mode"] == "snapshot" and summary["quarantined"] == 0
    assert {"gpu_util", "gpu_temp", "server_power"} <= set(summary["metrics"])
    assert lake.list("metrics") == [] and lake.list("metrics_snapshots")
    noon_ms = int(datetime(2023, 7, 1, 12, tzinfo=UTC).timestamp() * 1000)
    expected = source_series(prometheus["openmetrics"], "DCGM_FI_DEV_GPU_UTIL", "3")[noon_ms]
    frame = to_frame(read_snapshots(lake, "gpu_util", "seren", DAY), "seren", "%")
    gpu3 = frame[frame["gpu"] == 3]
    assert gpu3["value"].tolist() == [expected]
    assert [t.timestamp() * 1000 for t in gpu3["timestamp"]] == [noon_ms]


def test_a_saved_real_answer_ingests_like_the_live_query_and_sharded_answers_pass_the_checks(
    prometheus, tmp_path
):
    start = int(datetime(2023, 7, 1, tzinfo=UTC).timestamp())
    query = urllib.parse.urlencode(
        {"query": "DCGM_FI_DEV_GPU_TEMP", "start": start, "end": start + 86400 - 15, "step": 15}
    )
    with urllib.request.urlopen(f"{prometheus['url']}/api/v1/query_range?{query}", timeout=60) as response:
        saved = tmp_path / "gpu_temp_day.json"
        saved.write_bytes(response.read())
    from_file = Lake(str(tmp_path / "from_file"))
    summary = ingest_metrics_file(from_file, "prometheus-json", "seren", str(saved), DAY)
    live = Lake(str(tmp_path / "live"))
    sharded = ingest_metrics_file(
        live, "prometheus", "seren", prometheus["url"], DAY, metrics=["gpu_temp"],
        client_options={"max_series_per_query": 4},  # queries carry Hostname=~"..." shard matchers
    )  # fmt: skip
    assert summary["samples"] == sharded["samples"] == 8 * 5760
    file_frame = to_frame(read_samples(from_file, "gpu_temp", "seren", DAY), "seren", "°C")
    live_frame = to_frame(read_samples(live, "gpu_temp", "seren", DAY), "seren", "°C")
    assert file_frame.equals(live_frame)
