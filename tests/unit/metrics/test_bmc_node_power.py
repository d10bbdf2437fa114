"""Node power from BMC exporters other than ipmi_exporter (issue 31), mapped to ``server_power``.

The real scrapes are in ``tests/fixtures/field/metrics/scrapes/`` (sources in its ``SOURCES.md``; the
field tier ingests each one). Here: the mapping itself (the catalog's ``aliases:``: sums over PSUs,
selects the system's PowerControl), and the paper's power analysis over a day of the real
bmc_exporter page (the page repeated every minute: constructed from the real one, named so).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from acme.metrics.catalog import load_catalog
from acme.metrics.exposition import parse_exposition_file

SCRAPES = Path(__file__).resolve().parents[2] / "fixtures" / "field" / "metrics" / "scrapes"
BMC_PSU = SCRAPES / "bmc_exporter_psu_power_readme.prom"
IDRAC = SCRAPES / "idrac_exporter_redfish_power_readme.prom"
T0 = 1_590_022_578_000  # 2020-05-21T00:56:18Z, the page's commit


def server_power(path: Path, node: str = "bmc-1"):
    result = parse_exposition_file(path, load_catalog(), scrape_time_ms=T0, default_node=node)
    return result, result.samples.get("server_power")


def test_the_catalog_maps_the_bmc_and_redfish_names_to_server_power():
    catalog = load_catalog()
    aliases = catalog.exporter_aliases()
    assert {"power_draw_watts", "chassis_power_draw_watts", "idrac_power_control_consumed_watts"} <= set(
        aliases
    )
    assert all(spec.name == "server_power" for spec, _ in aliases.values())
    assert aliases["power_draw_watts"][1].sum_over == "psu"
    # only plain aliases are offered to readers that store samples as they are (Prometheus answers)
    plain = catalog.by_exporter_name()
    assert "chassis_power_draw_watts" in plain and "power_draw_watts" not in plain


def test_bmc_exporter_psu_readings_are_summed_into_the_node_power():
    result, samples = server_power(BMC_PSU)
    assert samples is not None and list(samples.value) == [175.0]  # psu 1: 70 W + psu 2: 105 W
    assert result.summed == {"power_draw_watts": 1}
    assert result.time_sources == {"--scrape-time": 1}  # one stored sample, one time
    assert "processor_temperature_celsius" in result.skipped_metrics


def test_constructed_psu_readings_of_two_nodes_and_two_times_are_summed_per_node_and_time(tmp_path):
    page = tmp_path / "constructed_bmc_two_nodes.prom"
    page.write_text(
        'power_draw_watts{instance="a:9622",psu="1"} 100 1000\n'
        'power_draw_watts{instance="a:9622",psu="2"} 120 1000\n'
        'power_draw_watts{instance="b:9622",psu="1"} 90 1000\n'
        'power_draw_watts{instance="a:9622",psu="1"} 101 2000\n'
        'power_draw_watts{instance="a:9622"} 300 3000\n'  # a label-less DCMI reading: the whole already
    )
    result = parse_exposition_file(page, load_catalog())
    samples = result.samples["server_power"]
    nodes = list(samples.series["node"])
    got = sorted(
        (nodes[s], int(t), float(v))
        for s, t, v in zip(samples.series_id, samples.ts_ms, samples.value, strict=True)
    )
    assert got == [("a", 1000, 220.0), ("a", 2000, 101.0), ("a", 3000, 300.0), ("b", 1000, 90.0)]
    assert result.summed == {"power_draw_watts": 1}


def test_idrac_exporter_system_power_control_is_the_node_power_and_subsystems_are_not(tmp_path):
    result, samples = server_power(IDRAC)
    assert list(samples.value) == [166.0]
    assert "idrac_power_supply_input_watts" in result.skipped_metrics  # one PSU's input, not the node's
    page = tmp_path / "constructed_idrac_with_cpu_control.prom"
    page.write_text(
        IDRAC.read_text() + 'idrac_power_control_consumed_watts{id="1",name="CPU Sub-system Power"} 80\n'
    )
    result, samples = server_power(page)
    assert list(samples.value) == [166.0]
    assert (
        result.skipped_metrics[
            "idrac_power_control_consumed_watts (series that are not the node's server_power)"
        ]
        == 1
    )


@pytest.mark.parametrize("bad", [{"name": 3}, {"name": "x", "match": {"name": "("}}, 7])
def test_a_malformed_alias_fails_the_catalog_naming_it(tmp_path, bad):
    import yaml

    from acme.errors import ConfigError

    document = yaml.safe_load(
        (Path(__file__).resolve().parents[3] / "include/metrics/metrics.yaml").read_text()
    )
    document["metrics"]["server_power"]["aliases"] = [bad]
    path = tmp_path / "catalog.yaml"
    path.write_text(yaml.safe_dump(document))
    with pytest.raises(ConfigError, match="server_power"):
        load_catalog(path)


def test_the_power_analysis_works_on_a_day_of_the_bmc_exporter_page(tmp_path):
    """A day of the real bmc_exporter page, once a minute (constructed: the page repeated with a
    ``# scrape_time`` before each copy), ingested daily; the report's power section reads the node's
    curve from it (and needs a job of that day: the real Elapsed-only sacct export)."""
    from acme.jobs.ingest import JobInput, ingest_job_file
    from acme.lake import Lake
    from acme.metrics.ingest import ingest_metrics_file
    from acme.report.characterize import characterize
    from acme.report.periods import parse_period

    day = dt.date(2023, 1, 23)
    page = BMC_PSU.read_text()
    start = dt.datetime.combine(day, dt.time(0), tzinfo=dt.UTC)
    scrapes = tmp_path / "constructed_bmc_day.prom"
    with scrapes.open("w") as out:
        for minute in range(24 * 60):
            moment = start + dt.timedelta(minutes=minute)
            out.write(f"# scrape_time {moment.strftime('%Y-%m-%dT%H:%M:%SZ')}\n{page}")
    lake = Lake(str(tmp_path / "lake"))
    summary = ingest_metrics_file(lake, "exporter-text", "bmc", str(scrapes), day, step_s=60, node="10.0.0.1")
    assert summary["metrics"] == ["server_power"] and summary["samples"] == 24 * 60
    assert summary["summed_samples"] == {"power_draw_watts": 24 * 60}

    export = SCRAPES.parents[1] / "jobs" / "reportseff_issue16_elapsed_only.txt"
    fields = (
        "AdminComment,AllocCPUS,Elapsed,JobID,JobIDRaw,MaxRSS,NNodes,NTasks,ReqMem,State,Timelimit,TotalCPU"
    )
    ingest_job_file(
        lake, JobInput("bmc", "sacct", str(export), day, tuple(fields.split(",")), "UTC", "^|^"), export
    )

    report = characterize(lake, "bmc", parse_period("all"))
    power = report.tables["power_cdf"]
    own = power[(power["metric"] == "server_power") & (power["source"] == "bmc")]
    median = float(own.loc[own["cdf_pct"] == 50, "value"].iloc[0])
    assert 170.0 <= median <= 180.0  # every sample is the node's 175 W; the histogram's bins are 10 W
    figure = next(f for f in report.figures if f.name == "power_cdf")
    assert f"median server power {median:.0f} W" in figure.finding
