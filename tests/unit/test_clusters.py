"""Cluster configuration and the clusters a run covers."""

from __future__ import annotations

from datetime import date

import pytest

from acme.clusters import load_clusters, selected_clusters
from acme.errors import ConfigError
from acme.jobs.formats import FORMAT_NAMES as SOURCES
from acme.jobs.ingest import plan_job_inputs
from acme.metrics.formats import FORMAT_NAMES as METRIC_FORMATS
from acme.metrics.ingest import plan_metric_inputs


def test_the_bundled_configuration_loads():
    clusters = load_clusters()
    assert set(clusters) == {"seren", "kalos"}
    assert all(c.jobs.format == "acmetrace" and c.metrics is None for c in clusters.values())


def test_a_run_selects_all_or_one_cluster_and_refuses_bad_params():
    clusters = load_clusters()
    assert selected_clusters(clusters, "all", "configured", SOURCES, None) == ["kalos", "seren"]
    assert selected_clusters(clusters, "seren", "sacct", SOURCES, "/x.txt") == ["seren"]
    with pytest.raises(ConfigError, match="unknown cluster 'helios'; configured: kalos, seren"):
        selected_clusters(clusters, "helios", "configured", SOURCES, None)
    with pytest.raises(ConfigError, match="unknown source 'slurm'"):
        selected_clusters(clusters, "all", "slurm", SOURCES, "/x")
    with pytest.raises(ConfigError, match="give the input location too"):
        selected_clusters(clusters, "all", "k8s", SOURCES, None)


def test_job_and_metric_plans_use_the_same_selection(tmp_path):
    from datetime import date

    clusters = load_clusters()
    jobs = plan_job_inputs(clusters, date(2023, 7, 1))
    assert [p["input"]["cluster"] for p in jobs] == ["kalos", "seren"]
    assert jobs[1]["input"]["uri"].endswith("sample_data/jobs/seren/2023-07-01.csv")
    assert plan_metric_inputs(clusters, date(2023, 7, 1)) == []  # no metrics source configured
    manual = plan_metric_inputs(clusters, date(2023, 7, 1), "kalos", "exporter-text", "/exports/k.prom")
    assert manual == [
        {
            "cluster": "kalos",
            "format": "exporter-text",
            "input": "/exports/k.prom",
            "day": "2023-07-01",
            "step_s": 15,
            "snapshot": False,
            "scrape_time": None,
            "node": None,
        }
    ]
    with pytest.raises(ConfigError, match="kalos' has no metrics source"):
        plan_metric_inputs(clusters, date(2023, 7, 1), "kalos")
    with pytest.raises(ConfigError, match="unknown source 'csv'"):
        plan_metric_inputs(clusters, date(2023, 7, 1), "all", "csv", "/x")
    assert "acmetrace-csv" in METRIC_FORMATS


def test_configuration_errors_name_the_file_and_cluster(tmp_path):
    bad = tmp_path / "clusters.yaml"
    bad.write_text(
        "clusters:\n  seren:\n    jobs: {format: acmetrace, input: x}\n    metrics: {format: csv, input: y}\n"
    )
    clusters = load_clusters(bad)  # each area checks its own section's format when it plans from it
    with pytest.raises(ConfigError, match=r"clusters.yaml: cluster 'seren': metrics.format must be one of"):
        plan_metric_inputs(clusters, date(2023, 7, 1))
    # (load_clusters caches by path: each case is a file of its own)
    cases = [
        ("{format: csv, input: x}", plan_job_inputs, r"cluster 'seren': jobs.format must be one of"),
        (
            "{format: acmetrace, command: [ssh, head]}",
            plan_job_inputs,
            r"cluster 'seren': jobs.command \(live mode\) exists for sacct only",
        ),
        ("{format: '', input: x}", None, r"cluster 'seren': jobs.format must name a format"),
    ]
    for number, (jobs, plan, message) in enumerate(cases):
        path = tmp_path / f"clusters-{number}.yaml"
        path.write_text(f"clusters:\n  seren:\n    jobs: {jobs}\n")
        with pytest.raises(ConfigError, match=f"clusters-{number}.yaml: " + message):
            clusters = load_clusters(path)
            plan(clusters, date(2023, 7, 1))


@pytest.mark.parametrize("name", ["seren\n", "Seren", "seren/../x", "", "9seren", "a" * 64, None, 7])
def test_a_cluster_name_is_a_safe_path_component_only(name):
    from acme.clusters import is_cluster_name

    assert not is_cluster_name(name)
    assert is_cluster_name("seren") and is_cluster_name("kalos-2_b")


def test_sacct_delimiter_is_a_cluster_setting_and_reaches_the_parser(tmp_path):
    from datetime import date

    from acme.jobs.ingest import JobInput

    config = tmp_path / "clusters.yaml"
    config.write_text(
        "clusters:\n"
        "  habrok:\n"
        "    jobs: {format: sacct, input: '/exports/{ds}.txt', delimiter: '☃', timezone: Europe/Amsterdam,\n"
        "           fields: 'JobID,State,Start,End'}\n"
        "  live:\n"
        "    jobs: {format: sacct, command: [sacct], delimiter: '☃'}\n"
    )
    clusters = load_clusters(config)
    assert clusters["habrok"].jobs.delimiter == "☃"
    planned = {p["input"]["cluster"]: p for p in plan_job_inputs(clusters, date(2024, 3, 10))}
    habrok = JobInput.from_dict(planned["habrok"]["input"])
    assert (habrok.delimiter, habrok.timezone, habrok.fields) == (
        "☃",
        "Europe/Amsterdam",
        ("JobID", "State", "Start", "End"),
    )
    # the live command asks sacct for --parsable2, so its output is '|'-separated whatever the files use
    assert JobInput.from_dict(planned["live"]["input"]).delimiter == "|"
    bad = tmp_path / "bad.yaml"  # (configurations are cached by path)
    bad.write_text("clusters:\n  x:\n    jobs: {format: sacct, input: /a, delimiter: ''}\n")
    with pytest.raises(ConfigError, match="jobs.delimiter must be a non-empty string"):
        load_clusters(bad)
