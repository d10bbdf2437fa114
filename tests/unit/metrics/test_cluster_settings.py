"""The per-cluster metrics settings of ``clusters.yaml`` (format, snapshot, scrape_time, node) and
the manual-run Params that override them in the plan of ``ingest_metrics``."""

from __future__ import annotations

from datetime import date

import pytest

from acme.clusters import load_clusters
from acme.errors import ConfigError
from acme.metrics import ingest
from acme.metrics.formats import FORMAT_NAMES
from acme.metrics.ingest import plan_metric_inputs

DAY = date(2023, 7, 1)


def clusters_file(tmp_path, metrics: str, folder: str = "."):
    # a new path per content: load_clusters caches by path
    (tmp_path / folder).mkdir(exist_ok=True)
    path = tmp_path / folder / "clusters.yaml"
    path.write_text(
        "clusters:\n"
        "  seren:\n"
        "    jobs: {format: acmetrace, input: '{include}/sample_data/jobs/seren/{ds}.csv'}\n"
        f"    metrics: {metrics}\n"
        "  kalos:\n"
        "    jobs: {format: acmetrace, input: '{include}/sample_data/jobs/kalos/{ds}.csv'}\n"
    )
    return path


def test_every_format_named_has_a_reader():
    assert set(ingest._READERS) == set(FORMAT_NAMES)
    assert "prometheus-json" in FORMAT_NAMES


def test_snapshot_scrape_time_and_node_are_cluster_settings(tmp_path):
    path = clusters_file(
        tmp_path,
        "{format: exporter-text, input: '/exports/{cluster}/ipmi-{ds}.prom', snapshot: true, "
        "scrape_time: '{ds}T23:59:45Z', node: seren-n000}",
    )
    source = load_clusters(path)["seren"].metrics
    assert (source.format, source.snapshot, source.node) == ("exporter-text", True, "seren-n000")
    planned = plan_metric_inputs(load_clusters(path), DAY)
    assert planned == [
        {
            "cluster": "seren",
            "format": "exporter-text",
            "input": "/exports/seren/ipmi-2023-07-01.prom",
            "day": "2023-07-01",
            "step_s": 15,
            "snapshot": True,
            "scrape_time": "2023-07-01T23:59:45Z",
            "node": "seren-n000",
        }
    ]


def test_a_saved_prometheus_answer_is_a_cluster_format_and_the_defaults_are_daily(tmp_path):
    path = clusters_file(tmp_path, "{format: prometheus-json, input: '/exports/{ds}.json'}")
    (planned,) = plan_metric_inputs(load_clusters(path), DAY)
    assert planned["format"] == "prometheus-json"
    assert (planned["snapshot"], planned["scrape_time"], planned["node"]) == (False, None, None)


def test_an_unquoted_yaml_time_and_epoch_seconds_are_scrape_times(tmp_path):
    path = clusters_file(
        tmp_path, "{format: exporter-text, input: /x.prom, scrape_time: 2023-07-01T12:00:00Z}"
    )
    assert plan_metric_inputs(load_clusters(path), DAY)[0]["scrape_time"] == "2023-07-01T12:00:00+00:00"
    path = clusters_file(
        tmp_path, "{format: exporter-text, input: /x.prom, scrape_time: 1688212800}", "epoch"
    )
    assert plan_metric_inputs(load_clusters(path), DAY)[0]["scrape_time"] == "1688212800"


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("snapshot: yes-please", r"metrics.snapshot must be true or false, got 'yes-please'"),
        ("scrape_time: noon", r"metrics.scrape_time: 'noon' is neither an RFC 3339 time"),
        ("node: ''", r"metrics.node must be a host name"),
        (
            "scrape-time: '2023-07-01T00:00:00Z'",
            r"unknown metrics settings \['scrape-time'\]; known: .*scrape_time",
        ),
    ],
)
def test_a_bad_setting_is_refused_naming_the_cluster_and_setting(tmp_path, setting, message):
    path = clusters_file(tmp_path, f"{{format: exporter-text, input: /x.prom, {setting}}}")
    with pytest.raises(ConfigError, match=r"clusters.yaml: cluster 'seren': " + message):
        load_clusters(path)


def test_params_override_the_cluster_settings(tmp_path):
    path = clusters_file(
        tmp_path,
        "{format: exporter-text, input: /x.prom, snapshot: true, scrape_time: '{ds}T06:00:00Z', node: a}",
    )
    (planned,) = plan_metric_inputs(
        load_clusters(path), DAY, "seren", snapshot=False, scrape_time="{ds}T18:00:00Z", node="b"
    )
    assert (planned["snapshot"], planned["scrape_time"], planned["node"]) == (
        False,
        "2023-07-01T18:00:00Z",
        "b",
    )
    (unset,) = plan_metric_inputs(load_clusters(path), DAY, "seren", snapshot=None, scrape_time=None, node="")
    assert (unset["snapshot"], unset["scrape_time"], unset["node"]) == (True, "2023-07-01T06:00:00Z", "a")


def test_a_manual_source_takes_only_the_params_not_the_clusters_settings(tmp_path):
    path = clusters_file(
        tmp_path, "{format: exporter-text, input: /x.prom, snapshot: true, node: a, step_s: 60}"
    )
    (planned,) = plan_metric_inputs(load_clusters(path), DAY, "seren", "prometheus-json", "/saved.json")
    assert planned["format"] == "prometheus-json" and planned["input"] == "/saved.json"
    assert (planned["snapshot"], planned["scrape_time"], planned["node"], planned["step_s"]) == (
        False,
        None,
        None,
        60,
    )
    (with_params,) = plan_metric_inputs(
        load_clusters(path), DAY, "seren", "exporter-text", "/one.prom", snapshot=True, node="n1"
    )
    assert (with_params["snapshot"], with_params["node"]) == (True, "n1")


def test_a_bad_scrape_time_param_is_refused_naming_the_param(tmp_path):
    path = clusters_file(tmp_path, "{format: exporter-text, input: /x.prom}")
    with pytest.raises(ConfigError, match=r"Param scrape_time \(--scrape-time\): 'yesterday' is neither"):
        plan_metric_inputs(load_clusters(path), DAY, "seren", scrape_time="yesterday")
