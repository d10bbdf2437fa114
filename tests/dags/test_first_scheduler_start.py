"""What a newcomer meets first: a scheduler started with the bundled configuration, and the trigger
form's Params.

- The nightly job DAG's first scheduled run is for yesterday, which has no bundled sample: the run
  ends at once, skipped with the reason and how to configure a source, never a retry loop.
- A missing input outside the bundled samples still fails in the extract, where Airflow retries it
  (an export may arrive late).
- ``cluster`` is a dropdown of the configured clusters plus ``all``; every DAG has a summary line and
  every Param a description.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DAGS_FOLDER = ROOT / "dags"

pytestmark = pytest.mark.airflow


@pytest.fixture(scope="module")
def dagbag():
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(DAGS_FOLDER))
    assert not bag.import_errors, bag.import_errors
    return bag


def test_a_scheduled_day_without_bundled_input_is_skipped_once_with_the_reason(airflow_db, lake_dir, dagbag):
    dag = dagbag.dags["ingest_job_traces"]
    for task in dag.tasks:  # production retries kept, only faster: a regression fails instead of hanging
        task.retry_delay = timedelta(seconds=1)
        task.max_retry_delay = timedelta(seconds=1)
    yesterday = datetime(2026, 11, 30, tzinfo=UTC)  # what a first start creates: no sample for that day
    run = dag.test(logical_date=yesterday)
    assert run.state == "success"
    instances = run.get_task_instances()
    assert sorted(ti.rendered_map_index for ti in instances) == ["kalos", "seren"]
    assert all(ti.state == "skipped" and ti.try_number == 1 for ti in instances)
    assert not list(lake_dir.glob("jobs/**/*.parquet"))


def test_missing_bundled_samples_are_left_out_and_other_inputs_kept(tmp_path):
    from airflow.sdk.exceptions import AirflowSkipException

    from acme import settings
    from acme_airflow.params import without_missing_sample_days

    samples = settings.project().include_dir / "sample_data" / "jobs"
    day = date(2026, 11, 30)

    def planned(cluster: str, uri: Path) -> dict:
        return {"input": {"cluster": cluster, "uri": str(uri)}, "command": None}

    present = planned("seren", samples / "seren" / "2023-07-01.csv")
    absent = planned("kalos", samples / "kalos" / f"{day}.csv")
    late_export = planned("kalos", tmp_path / "exports" / f"{day}.csv")
    assert without_missing_sample_days([present, absent], day) == [present]
    assert without_missing_sample_days([late_export], day) == [late_export]  # the extract retries it
    with pytest.raises(AirflowSkipException) as skipped:
        without_missing_sample_days([absent], day)
    message = str(skipped.value)
    assert message.startswith("no bundled sample for 2026-11-30 (kalos): the bundled configuration only has")
    assert "2023-07-01 to 2023-07-03" in message and "include/config/clusters.yaml" in message
    # The metrics plan's shape: the input is the URI itself.
    metric = {"cluster": "seren", "input": str(samples / "seren" / f"{day}.csv"), "day": str(day)}
    with pytest.raises(AirflowSkipException):
        without_missing_sample_days([metric], day)


def test_cluster_is_a_dropdown_of_the_configured_clusters_and_all(dagbag):
    from airflow.sdk.definitions.param import ParamsDict
    from airflow.sdk.exceptions import ParamValidationError

    for dag_id in ("ingest_job_traces", "ingest_metrics", "diagnose_failures", "characterize"):
        schema = dagbag.dags[dag_id].params.get_param("cluster").schema
        assert schema["enum"] == ["all", "kalos", "seren"], dag_id
        params = ParamsDict(dagbag.dags[dag_id].params)
        with pytest.raises(ParamValidationError):
            params.update({"cluster": "selene"})
            params.validate()


def test_an_unreadable_cluster_file_leaves_cluster_free_text_for_the_run_to_refuse(tmp_path, monkeypatch):
    from acme_airflow.params import cluster_param, configured_cluster_names

    broken = tmp_path / "clusters.yaml"
    broken.write_text("clusters: [this is not a mapping\n")
    monkeypatch.setenv("ACME_CLUSTERS_FILE", str(broken))
    assert configured_cluster_names() == []
    param = cluster_param()
    assert param.schema["type"] == "string" and "enum" not in param.schema and param.value == "all"


def test_every_dag_has_a_summary_line_and_every_param_a_description(dagbag):
    for dag_id, dag in dagbag.dags.items():
        assert dag.description and 30 < len(dag.description) <= 120, dag_id
        for name in dag.params:
            described = dag.params.get_param(name).description
            assert described and len(described) > 15, f"{dag_id}.{name}: no description"
