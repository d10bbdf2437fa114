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
