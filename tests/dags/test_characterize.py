"""The characterize DAG run by Airflow (dag.test) over a lake holding the bundled sample days."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.airflow


def run_characterize(logical_date: str, **conf):
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(ROOT / "dags" / "characterize.py"))
    assert not bag.import_errors, bag.import_errors
    dag = bag.dags["characterize"]
    for task in dag.tasks:
        task.retries = 0
    return dag.test(logical_date=datetime.fromisoformat(logical_date).replace(tzinfo=UTC), run_conf=conf)


@pytest.fixture
def sample_lake(lake_dir):
    from acme.jobs.ingest import JobInput, ingest_job_file
    from acme.lake import Lake

    lake = Lake(str(lake_dir))
    for cluster in ("seren", "kalos"):
        for day in ("2023-07-01", "2023-07-02", "2023-07-03"):
            path = ROOT / "include" / "sample_data" / "jobs" / cluster / f"{day}.csv"
            ingest_job_file(lake, JobInput(cluster, "acmetrace", str(path)), path)
    return lake_dir


def reports(lake_dir: Path) -> dict[str, dict]:
    return {
        str(p.parent.relative_to(lake_dir / "reports")): json.loads(p.read_text())
        for p in sorted((lake_dir / "reports").glob("cluster=*/period=*/report.json"))
    }


def test_monthly_run_reports_last_month_and_the_history_of_every_cluster(airflow_db, sample_lake):
    run = run_characterize("2023-08-01T04:00:00")
    assert run.state == "success"
    found = reports(sample_lake)
    assert sorted(found) == [
        "cluster=kalos/period=2023-07",
        "cluster=kalos/period=all",
        "cluster=seren/period=2023-07",
        "cluster=seren/period=all",
    ]
    assert found["cluster=seren/period=2023-07"]["days"] == 3
    assert (
        found["cluster=seren/period=all"]["gpu_jobs"] == found["cluster=seren/period=2023-07"]["gpu_jobs"] > 0
    )
    index = (sample_lake / "reports" / "index.html").read_text()
    for key in found:
        assert f'href="{key}/index.html"' in index

    files = sorted(p.relative_to(sample_lake) for p in (sample_lake / "reports").rglob("*") if p.is_file())
    assert run_characterize("2023-08-01T04:00:00").state == "success"
    assert (
        sorted(p.relative_to(sample_lake) for p in (sample_lake / "reports").rglob("*") if p.is_file())
        == files
    )


def test_manual_run_for_one_cluster_and_day(airflow_db, sample_lake):
    run = run_characterize("2023-07-03T06:00:00", cluster="seren", period="2023-07-02")
    assert run.state == "success"
    assert list(reports(sample_lake)) == ["cluster=seren/period=2023-07-02"]
    assert (
        'href="cluster=seren/period=2023-07-02/index.html"'
        in (sample_lake / "reports" / "index.html").read_text()
    )
