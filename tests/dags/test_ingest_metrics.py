"""The nightly monitoring DAG run by Airflow (dag.test) on synthesized telemetry."""

from __future__ import annotations

from datetime import UTC, date, datetime
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DAY = "2023-07-01"

pytestmark = pytest.mark.airflow


def run_metrics_dag(**conf):
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(ROOT / "dags" / "ingest_metrics.py"))
    assert not bag.import_errors, bag.import_errors
    dag = bag.dags["ingest_metrics"]
    for task in dag.tasks:
        task.retries = 0
    return dag.test(
        logical_date=datetime.fromisoformat(DAY).replace(tzinfo=UTC), run_conf={"day": DAY, **conf}
    )


@pytest.fixture
def wide_csv_day(tmp_path):
    from acme.metrics.synth import write_synth_metrics

    folder = tmp_path / "exports" / "seren" / DAY
    write_synth_metrics("seren", 1, date(2023, 7, 1), 1, "acmetrace-csv", folder, seed=4)
    return folder


def partitions(lake_dir: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(lake_dir)): p.read_bytes() for p in sorted(lake_dir.glob("metrics*/**/*.parquet"))
    }


def test_configured_cluster_is_ingested_and_a_rerun_changes_nothing(
    airflow_db, lake_dir, wide_csv_day, monkeypatch
):
    clusters = wide_csv_day.parents[2] / "clusters.yaml"
    pattern = str(wide_csv_day.parents[1] / "{cluster}" / "{ds}")
    clusters.write_text(
        "clusters:\n"
        "  seren:\n"
        "    jobs: {format: acmetrace, input: '{include}/sample_data/jobs/seren/{ds}.csv'}\n"
        f"    metrics: {{format: acmetrace-csv, input: '{pattern}'}}\n"
        "  kalos:\n"
        "    jobs: {format: acmetrace, input: '{include}/sample_data/jobs/kalos/{ds}.csv'}\n"
    )
    monkeypatch.setenv("ACME_CLUSTERS_FILE", str(clusters))
    assert run_metrics_dag().state == "success"
    first = partitions(lake_dir)
    samples = [k for k in first if k.startswith("metrics/") and "cluster=seren" in k and f"date={DAY}" in k]
    assert {k.split("/")[1] for k in samples} >= {
        "metric=gpu_util",
        "metric=gpu_power",
        "metric=server_power",
    }
    assert any(k.startswith("metrics_5m/") for k in first) and any(
        k.startswith("metrics_hist/") for k in first
    )
    assert not any("cluster=kalos" in k for k in first), "kalos has no metrics source"

    assert run_metrics_dag().state == "success"
    assert partitions(lake_dir) == first


def test_a_manual_run_over_an_exported_file_and_a_bad_one(airflow_db, lake_dir, wide_csv_day, tmp_path):
    assert (
        run_metrics_dag(cluster="seren", source="acmetrace-csv", input=str(wide_csv_day)).state == "success"
    )
    assert partitions(lake_dir)

    broken = tmp_path / "broken"
    broken.mkdir()
    header, *rows = (wide_csv_day / "gpu_util.csv").read_text().splitlines()
    rows = [
        ",".join(["250" if i else v for i, v in enumerate(r.split(","))]) for r in rows
    ]  # 250% utilization
    (broken / "gpu_util.csv").write_text("\n".join([header, *rows]) + "\n")
    run = run_metrics_dag(cluster="seren", source="acmetrace-csv", input=str(broken))
    assert run.state == "failed"
    assert list(lake_dir.glob("quarantine/metrics/cluster=seren/*/*gpu_util*.parquet"))


FIELD_SCRAPES = ROOT / "tests" / "fixtures" / "field" / "metrics" / "scrapes"
IPMI_SCRAPE = FIELD_SCRAPES / "ipmi_exporter_dcmi_power_pr160.prom"  # a real scrape: no host label, no time


def stored_snapshot(lake_dir: Path, cluster: str):
    from acme.lake import Lake
    from tests.metrics_support import read_snapshots

    samples = read_snapshots(Lake(str(lake_dir)), "server_power", cluster, date.fromisoformat(DAY))
    return list(samples.series["node"]), [int(t) for t in samples.ts_ms], [float(v) for v in samples.value]


def test_a_cluster_configured_for_one_off_scrapes_stores_snapshots(
    airflow_db, lake_dir, tmp_path, monkeypatch
):
    clusters = tmp_path / "clusters.yaml"
    clusters.write_text(
        "clusters:\n"
        "  seren:\n"
        "    jobs: {format: acmetrace, input: '{include}/sample_data/jobs/seren/{ds}.csv'}\n"
        f"    metrics: {{format: exporter-text, input: '{IPMI_SCRAPE}', snapshot: true,\n"
        "              scrape_time: '{ds}T23:59:45Z', node: seren-n000}\n"
        "  kalos:\n"
        "    jobs: {format: acmetrace, input: '{include}/sample_data/jobs/kalos/{ds}.csv'}\n"
    )
    monkeypatch.setenv("ACME_CLUSTERS_FILE", str(clusters))
    assert run_metrics_dag().state == "success"
    first = partitions(lake_dir)
    assert [k.rsplit("/", 1)[0] for k in first] == [
        f"metrics_snapshots/metric=server_power/cluster=seren/date={DAY}"
    ]
    end_of_day = int(datetime.fromisoformat(f"{DAY}T23:59:45+00:00").timestamp() * 1000)
    assert stored_snapshot(lake_dir, "seren") == (["seren-n000"], [end_of_day], [372.0])

    assert run_metrics_dag().state == "success"
    assert partitions(lake_dir) == first, "a re-run replaces its snapshot"


def test_manual_params_give_snapshot_mode_scrape_time_and_node(airflow_db, lake_dir):
    manual = {"cluster": "kalos", "source": "exporter-text", "input": str(IPMI_SCRAPE), "snapshot": True,
              "scrape_time": f"{DAY}T08:00:00Z"}  # fmt: skip
    assert run_metrics_dag(**manual).state == "failed", "a scrape without a host label needs the node Param"
    assert partitions(lake_dir) == {}

    assert run_metrics_dag(**manual, node="kalos-n007").state == "success"
    eight = int(datetime.fromisoformat(f"{DAY}T08:00:00+00:00").timestamp() * 1000)
    assert stored_snapshot(lake_dir, "kalos") == (["kalos-n007"], [eight], [372.0])
    assert not any(k.startswith("metrics/") for k in partitions(lake_dir)), "snapshots only, no day partition"
