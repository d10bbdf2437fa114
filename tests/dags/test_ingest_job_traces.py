"""The nightly job-trace DAG run by Airflow (dag.test) on the bundled sample days."""

from __future__ import annotations

import csv
import uuid
from datetime import UTC
from pathlib import Path

import pyarrow.parquet as pq
import pytest

ROOT = Path(__file__).resolve().parents[2]
SAMPLE_DAY = "2023-07-01"

pytestmark = pytest.mark.airflow


def load_dag():
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(ROOT / "dags" / "ingest_job_traces.py"))
    assert not bag.import_errors, bag.import_errors
    return bag.dags["ingest_job_traces"]


def run_dag(day: str, **conf):
    from datetime import datetime

    dag = load_dag()
    for task in dag.tasks:  # a failing test must fail now, not after the production retry delays
        task.retries = 0
    logical_date = datetime.fromisoformat(day).replace(tzinfo=UTC)
    return dag.test(logical_date=logical_date, run_conf={"day": day, **conf})


def csv_rows(path: Path) -> int:
    with path.open() as handle:
        return sum(1 for _ in csv.reader(handle)) - 1


def lake_content(lake_dir: Path) -> dict[str, list]:
    return {
        str(path.relative_to(lake_dir)): pq.read_table(path).to_pylist()
        for path in sorted(lake_dir.glob("jobs/*/*/jobs.parquet"))
    }


def test_nightly_run_publishes_every_cluster_once_and_a_rerun_changes_nothing(airflow_db, lake_dir):
    run = run_dag(SAMPLE_DAY)
    assert run.state == "success"
    for cluster in ("seren", "kalos"):
        expected = csv_rows(ROOT / "include" / "sample_data" / "jobs" / cluster / f"{SAMPLE_DAY}.csv")
        partition = lake_dir / f"jobs/cluster={cluster}/date={SAMPLE_DAY}/jobs.parquet"
        table = pq.read_table(partition)
        assert expected > 0 and table.num_rows == expected
        assert len(set(table["job_id"].to_pylist())) == expected
        assert (partition.parent / "_validation.json").exists()
    assert not (lake_dir / "staging").exists() or not any((lake_dir / "staging").rglob("*.parquet"))

    before = lake_content(lake_dir)
    assert run_dag(SAMPLE_DAY).state == "success"
    assert lake_content(lake_dir) == before


def test_one_ingest_task_per_configured_cluster_and_a_one_cluster_run_skips_the_others(airflow_db, lake_dir):
    run = run_dag(SAMPLE_DAY, cluster="seren")
    assert run.state == "success"
    states = {ti.rendered_map_index: (ti.task_id, ti.state) for ti in run.get_task_instances()}
    assert states == {"kalos": ("ingest", "skipped"), "seren": ("ingest", "success")}
    assert sorted(p.parent.parent.name for p in lake_dir.glob("jobs/*/*/jobs.parquet")) == ["cluster=seren"]


def test_an_unreadable_clusters_file_fails_the_run_instead_of_doing_nothing(
    airflow_db, lake_dir, tmp_path, monkeypatch
):
    broken = tmp_path / "clusters.yaml"
    broken.write_text("clusters: [this is not a mapping\n")
    monkeypatch.setenv("ACME_CLUSTERS_FILE", str(broken))
    run = run_dag(SAMPLE_DAY)
    assert run.state == "failed"
    (ingest,) = run.get_task_instances()
    assert ingest.state == "failed" and ingest.try_number == 1  # a configuration error is not retried
    assert not (lake_dir / "jobs").exists()


def test_a_bad_input_fails_the_run_keeps_its_quarantine_and_publishes_nothing(airflow_db, lake_dir, tmp_path):
    sample = ROOT / "include" / "sample_data" / "jobs" / "kalos" / f"{SAMPLE_DAY}.csv"
    header, *rows = sample.read_text().splitlines()
    bad_rows = [row.replace(",Eval,", ",Evaluation,") for row in rows[:20]]
    assert bad_rows != rows[:20], "sample rows must contain Eval jobs"
    broken = tmp_path / "kalos-export.csv"
    broken.write_text("\n".join([header, *bad_rows, *rows[20:]]) + "\n")

    run = run_dag(SAMPLE_DAY, cluster="kalos", source="acmetrace", input=str(broken))
    assert run.state == "failed"
    assert not (lake_dir / "jobs").exists()
    (quarantine,) = (lake_dir / "quarantine/jobs/cluster=kalos").rglob("*.parquet")
    reasons = set(pq.read_table(quarantine)["reason"].to_pylist())
    assert reasons == {"unknown job type"}


@pytest.mark.integration
def test_the_same_dag_writes_to_s3_through_an_airflow_connection(airflow_db, monkeypatch, tmp_path):
    import json

    from tests.integration.conftest import start_s3_server

    with start_s3_server() as s3:
        prefix = f"dagtest-{uuid.uuid4().hex[:8]}"
        monkeypatch.setenv("ACME_LAKE_URI", f"s3://{s3['bucket']}/{prefix}")
        connection = {
            "conn_type": "aws",
            "login": "test",
            "password": "test",
            "extra": {"endpoint_url": s3["endpoint"], "region_name": "us-east-1"},
        }
        monkeypatch.setenv("AIRFLOW_CONN_AWS_DEFAULT", json.dumps(connection))
        monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
        assert run_dag(SAMPLE_DAY, cluster="seren").state == "success"
        listing = s3["client"].list_objects_v2(Bucket=s3["bucket"], Prefix=prefix)
        keys = sorted(item["Key"] for item in listing.get("Contents", []))
        partition = f"{prefix}/jobs/cluster=seren/date={SAMPLE_DAY}/jobs.parquet"
        assert partition in keys
        assert not [k for k in keys if "/staging/" in k or "/_locks/" in k]


def test_live_sacct_mode_runs_the_configured_command_and_keeps_its_output(
    airflow_db, lake_dir, tmp_path, monkeypatch
):
    """A cluster configured with a live sacct command (here a stand-in script printing a real-format extract)."""
    extract = ROOT / "tests" / "fixtures" / "sacct" / "constructed_edge_cases.txt"
    calls = tmp_path / "calls.txt"
    fake_sacct = tmp_path / "fake-sacct"
    fake_sacct.write_text(f'#!/bin/sh\necho "$@" > {calls}\ncat {extract}\n')
    fake_sacct.chmod(0o755)
    clusters = tmp_path / "clusters.yaml"
    clusters.write_text(
        f"clusters:\n  seren:\n    jobs: {{format: sacct, command: [{fake_sacct}], timezone: Asia/Shanghai}}\n"
    )
    monkeypatch.setenv("ACME_CLUSTERS_FILE", str(clusters))
    monkeypatch.setenv("ACME_QUARANTINE_MAX_SHARE", "1.0")  # the extract holds deliberately bad lines

    assert run_dag(SAMPLE_DAY).state == "success"
    arguments = calls.read_text().split()
    # The UTC day, written in the cluster's local time for sacct.
    assert "--starttime=2023-07-01T08:00:00" in arguments and "--endtime=2023-07-02T08:00:00" in arguments
    (raw,) = lake_dir.glob("raw/jobs/cluster=seren/date=2023-07-01/*")
    assert raw.read_text() == extract.read_text()
    published = list(lake_dir.glob("jobs/cluster=seren/*/jobs.parquet"))
    assert published
    sources = {row for path in published for row in pq.read_table(path)["source"].to_pylist()}
    assert sources == {"sacct"}
    assert list(lake_dir.glob("quarantine/jobs/cluster=seren/date=2023-07-01/*.parquet"))


def test_bad_data_fails_without_retries_but_other_errors_keep_them():
    from airflow.sdk.exceptions import AirflowFailException

    from acme.errors import QuarantineThresholdError, SchemaDriftError
    from acme_airflow.failures import no_retry_for_bad_input

    for error in (SchemaDriftError("x.csv", "missing: gpu_time"), QuarantineThresholdError("x.csv: 20% bad")):
        with pytest.raises(AirflowFailException, match="x.csv"), no_retry_for_bad_input():
            raise error
    with pytest.raises(ConnectionResetError), no_retry_for_bad_input():
        raise ConnectionResetError("object store went away")
