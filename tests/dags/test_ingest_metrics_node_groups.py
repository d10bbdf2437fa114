"""The nightly monitoring DAG split by node group (dag.test): the stored rollups and histograms are those
of a single-task run, and re-runs in either layout leave one copy of every sample."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from tests.dags.test_ingest_metrics import run_metrics_dag

DAY = "2023-07-01"
NODES = 7  # in 3 groups: 1, 3 and 3 nodes
GROUPS = 3

pytestmark = pytest.mark.airflow


@pytest.fixture
def wide_csv_day(tmp_path):
    from acme.metrics.synth import write_synth_metrics

    folder = tmp_path / "exports" / "seren" / DAY
    write_synth_metrics("seren", NODES, date(2023, 7, 1), 1, "acmetrace-csv", folder, seed=4)
    return folder


def stored(lake_dir: Path, area: str) -> dict[str, list[dict]]:
    """Every table of a rollup area, its dictionary columns decoded, by partition folder."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    tables = {}
    for path in sorted(lake_dir.glob(f"{area}/**/*.parquet")):
        table = pq.read_table(path)
        for index, field in enumerate(table.schema):
            if pa.types.is_dictionary(field.type):
                table = table.set_column(index, field.name, table[field.name].cast(pa.string()))
        tables[str(path.parent.relative_to(lake_dir))] = (table.schema, table.to_pylist())
    return tables


def sample_files(lake_dir: Path) -> list[str]:
    return sorted(p.name for p in lake_dir.glob("metrics/metric=gpu_util/cluster=seren/*/*.parquet"))


def samples_of(lake_dir: Path, metric: str):
    from acme.lake import Lake
    from acme.metrics.storage import read_samples

    samples = read_samples(Lake(str(lake_dir)), metric, "seren", date.fromisoformat(DAY))
    return (
        list(samples.series["node"]),
        samples.series_id.tolist(),
        samples.ts_ms.tolist(),
        samples.value.tolist(),
    )


def test_node_groups_store_the_rollups_and_histograms_of_a_single_task_run(
    airflow_db, lake_dir, wide_csv_day
):
    from acme.metrics.node_groups import node_group_of
    from acme.metrics.synth import node_names

    groups = {node_group_of(n, GROUPS) for n in node_names("seren", NODES)}
    assert groups == set(range(GROUPS)), "every group holds a node (else the empty group is tested only)"
    manual = {"cluster": "seren", "source": "acmetrace-csv", "input": str(wide_csv_day)}

    assert run_metrics_dag(**manual, node_groups=1).state == "success"
    single = {area: stored(lake_dir, area) for area in ("metrics_5m", "metrics_hist")}
    single_samples = samples_of(lake_dir, "gpu_power")
    assert sample_files(lake_dir) == ["samples.parquet"]
    assert len(single["metrics_5m"]) == 14 and len(single["metrics_hist"]) == 14

    assert run_metrics_dag(**manual, node_groups=GROUPS).state == "success"
    grouped = {area: stored(lake_dir, area) for area in ("metrics_5m", "metrics_hist")}
    assert grouped == single, "rollups and histograms exactly as a single task stores them"
    assert sample_files(lake_dir) == [f"samples.group-{g:03d}-of-{GROUPS:03d}.parquet" for g in range(GROUPS)]
    assert samples_of(lake_dir, "gpu_power") == single_samples, "each sample once, the single-task file gone"

    assert run_metrics_dag(**manual, node_groups=GROUPS).state == "success"
    assert {area: stored(lake_dir, area) for area in ("metrics_5m", "metrics_hist")} == single
    assert samples_of(lake_dir, "gpu_power") == single_samples, "a re-run replaces the groups' files"

    assert run_metrics_dag(**manual, node_groups=1).state == "success"
    assert sample_files(lake_dir) == ["samples.parquet"], "back to one task: the groups' files are gone"
    assert samples_of(lake_dir, "gpu_power") == single_samples


def test_a_cluster_setting_splits_the_day_and_a_group_without_nodes_is_no_failure(
    airflow_db, lake_dir, wide_csv_day, monkeypatch
):
    from acme.metrics.node_groups import node_group_of
    from acme.metrics.synth import node_names

    many = 16  # more groups than nodes: some hold none
    assert len({node_group_of(n, many) for n in node_names("seren", NODES)}) < many
    clusters = wide_csv_day.parents[2] / "clusters.yaml"
    clusters.write_text(
        "clusters:\n"
        "  seren:\n"
        "    jobs: {format: acmetrace, input: '{include}/sample_data/jobs/seren/{ds}.csv'}\n"
        f"    metrics: {{format: acmetrace-csv, input: '{wide_csv_day}', node_groups: {many}}}\n"
    )
    monkeypatch.setenv("ACME_CLUSTERS_FILE", str(clusters))
    run = run_metrics_dag()
    assert run.state == "success"
    ingests = [ti for ti in run.get_task_instances() if ti.task_id == "ingest"]
    assert len(ingests) == many
    files = sample_files(lake_dir)
    assert 1 < len(files) < many and all(f.endswith(f"-of-{many:03d}.parquet") for f in files)
    nodes = samples_of(lake_dir, "gpu_util")[0]
    assert len(nodes) == NODES * 8 and sorted(set(nodes)) == sorted(node_names("seren", NODES))
