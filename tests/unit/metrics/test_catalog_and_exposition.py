"""The metric catalog, and the exposition parser on a real dcgm-exporter page and on bad input."""

from __future__ import annotations

import math
import os

import pytest

from acme.errors import ConfigError
from acme.metrics.catalog import load_catalog
from acme.metrics.exposition import (
    parse_exposition_file,
    parse_labels,
    time_from_file_name,
)
from tests.metrics_support import parse_exposition

from .conftest import DAY_START_MS, FIXTURES

REQUIRED = {
    "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_MEMORY_TEMP", "DCGM_FI_DEV_XID_ERRORS",
    "ipmi_dcmi_power_consumption_watts",
}  # fmt: skip


def test_catalog_holds_the_issue_metrics_with_units_ranges_and_queries(catalog):
    assert set(catalog.by_exporter_name()) >= REQUIRED
    for name in ("node_cpu_util", "node_mem_util", "ib_tx", "ib_rx"):
        assert catalog[name].level == "node" and catalog[name].promql
    assert "node_infiniband_port_data_transmitted_bytes_total" in catalog["ib_tx"].promql
    assert (catalog["gpu_util"].low, catalog["gpu_util"].high) == (0, 100)
    assert (catalog["gpu_power"].low, catalog["gpu_power"].high) == (0, 1000)
    assert (catalog["gpu_temp"].low, catalog["gpu_temp"].high) == (-20, 120)
    assert catalog["fb_used"].high is None  # the device's memory
    assert catalog.memory_of("NVIDIA A100-SXM4-80GB") == 81920 and catalog.memory_of("NVIDIA L4") == 23034
    assert catalog["gpu_energy"].kind == "counter"
    for spec in catalog:
        assert spec.unit and spec.kind in ("gauge", "counter") and spec.hist[2] >= 1


def test_catalog_errors_name_the_metric(tmp_path):
    bad = tmp_path / "metrics.yaml"
    bad.write_text(
        "metrics:\n  x:\n    unit: '%'\n    range: [0, 100]\n    hist: [0, 100, 10]\n    precision: 0.1\n    storage: uint8\n"
    )
    with pytest.raises(ConfigError, match="x: precision 0.1 needs storage: decimal"):
        load_catalog(bad)
    with pytest.raises(ConfigError, match="unknown metric 'nope'"):
        load_catalog()["nope"]


def test_real_dcgm_exporter_page(catalog):
    text = (FIXTURES / "dcgm_exporter_4x_l4_kops.prom").read_text()
    result = parse_exposition(text, catalog, source_file="kops.prom", default_time_ms=DAY_START_MS)
    assert result.rejects.empty
    assert result.types["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"] == "counter"
    assert result.help["DCGM_FI_DEV_POWER_USAGE"] == "Power draw (in W)."
    assert set(result.samples) == {
        "gpu_util",
        "gpu_temp",
        "mem_temp",
        "gpu_power",
        "fb_used",
        "gpu_energy",
        "tensor_active",
        "gr_engine_active",
    }
    assert result.skipped_metrics["DCGM_FI_DEV_SM_CLOCK"] == 1
    power = result.samples["gpu_power"]
    assert power.value.tolist() == [16.365] and power.ts_ms.tolist() == [DAY_START_MS]
    series = power.series.iloc[0]
    assert (series["node"], series["gpu"], series["model"]) == ("i-030791dc5a37cd257", 0, "NVIDIA L4")
    assert series["uuid"] == "GPU-c2f76b33-7953-256e-8f33-1343419b1a1c"
    assert result.samples["gpu_energy"].value.tolist() == [4742776]
    assert result.samples["tensor_active"].value.tolist() == [0.0]  # ratio x 100


def test_page_without_any_time_is_rejected_line_by_line(catalog):
    text = (FIXTURES / "dcgm_exporter_4x_l4_kops.prom").read_text()
    result = parse_exposition(text, catalog, source_file="metrics.txt")
    assert not result.samples
    assert len(result.rejects) == 23 and result.rejects["reason"].str.startswith("no timestamp").all()


# Hand-made: every kind of malformed line, between good ones, with escapes and special values.
BAD_PAGE = r"""# scrape_time 2023-07-01T00:00:15Z
# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).\nsecond line \\ backslash
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu="0",Hostname="n\"1\\x",UUID="GPU-a",} 97
DCGM_FI_DEV_GPU_UTIL{gpu="1",Hostname="n1"} NaN
DCGM_FI_DEV_GPU_UTIL{gpu="2",Hostname="n1"} +Inf
DCGM_FI_DEV_GPU_UTIL{gpu="3",Hostname="n1"} -Inf 1688169630000
DCGM_FI_DEV_GPU_UTIL{gpu="4",Hostname="n1"}
DCGM_FI_DEV_GPU_UTIL{gpu="5",Hostname="n1" 3
DCGM_FI_DEV_GPU_UTIL{gpu=5,Hostname="n1"} 3
DCGM_FI_DEV_GPU_UTIL{gpu="6",Hostname="n1"} twelve
DCGM_FI_DEV_GPU_UTIL{gpu="7",Hostname="n1"} 1 soon
9DCGM_FI_DEV_GPU_UTIL 1
# TYPE DCGM_FI_DEV_GPU_TEMP thermometer
DCGM_FI_DEV_GPU_TEMP{gpu="0"} 40
# scrape_time yesterday
DCGM_FI_DEV_GPU_TEMP{gpu="0",Hostname="n1"} 41
"""


def test_malformed_lines_become_rejects_with_line_and_reason(catalog):
    result = parse_exposition(BAD_PAGE, catalog, source_file="bad.prom")
    reasons = dict(zip(result.rejects["source_line"], result.rejects["reason"], strict=True))
    assert reasons == {
        8: "sample has no value",
        9: "unterminated label set (no closing '}')",
        10: 'malformed label set (expected name="value" pairs separated by commas)',
        11: "value 'twelve' is not a number",
        12: "timestamp 'soon' is not a number",
        13: "line does not start with a metric name",
        14: "TYPE line needs a metric name and one of counter, gauge, gaugehistogram, histogram, info, "
        "stateset, summary, unknown, untyped",
        15: "no label gives the node of DCGM_FI_DEV_GPU_TEMP (looked for Hostname, hostname, kubernetes_node, "
        "node, instance; for a scrape of one host give its name with --node)",
        16: "scrape_time is neither RFC 3339 nor epoch seconds",
    }
    assert result.help["DCGM_FI_DEV_GPU_UTIL"] == "GPU utilization (in %).\nsecond line \\ backslash"
    util = result.samples["gpu_util"]
    assert util.series["node"].tolist() == ['n"1\\x', "n1", "n1", "n1"]
    values = util.value.tolist()
    assert values[0] == 97 and math.isnan(values[1]) and values[2] == math.inf and values[3] == -math.inf
    assert util.ts_ms.tolist() == [DAY_START_MS + 15000] * 3 + [DAY_START_MS + 30000]
    assert result.samples["gpu_temp"].ts_ms.tolist() == [DAY_START_MS + 15000]  # the last good scrape_time


def test_label_parsing_edge_cases():
    assert parse_labels('a="1", b = "x,y}" ,') == {"a": "1", "b": "x,y}"}
    assert parse_labels('a="1" b="2"') is None
    assert parse_labels("") == {}


def test_times_from_file_names():
    assert time_from_file_name("/scrapes/dcgm-20230701T000015Z.prom") == DAY_START_MS + 15000
    assert time_from_file_name("node1_1688169615.prom") == DAY_START_MS + 15000
    assert time_from_file_name("metrics.txt") is None


def test_concatenated_scrapes_and_openmetrics_seconds(catalog):
    text = "\n".join(
        f'# scrape_time {DAY_START_MS // 1000 + 15 * i}\nDCGM_FI_DEV_GPU_UTIL{{gpu="0",Hostname="n1"}} {i}'
        for i in range(3)
    )
    result = parse_exposition(text, catalog)
    assert result.scrapes == 3 and result.samples["gpu_util"].ts_ms.tolist() == [
        DAY_START_MS + 15000 * i for i in range(3)
    ]
    om = 'DCGM_FI_DEV_GPU_UTIL{gpu="0",Hostname="n1"} 5 1688169600.5\n# EOF\n'
    assert parse_exposition(om, catalog).samples["gpu_util"].ts_ms.tolist() == [DAY_START_MS + 500]


# Hand-made: one sample per way of getting a time, to check the order of precedence.
TIMED_PAGE = """DCGM_FI_DEV_GPU_UTIL{gpu="0",Hostname="n1"} 1 1688169600000
DCGM_FI_DEV_GPU_UTIL{gpu="1",Hostname="n1"} 2
# scrape_time 2023-07-01T00:00:30Z
DCGM_FI_DEV_GPU_UTIL{gpu="2",Hostname="n1"} 3
"""


def test_a_samples_time_comes_from_its_timestamp_then_flag_comment_file_name_mtime(catalog, tmp_path):
    def times(path, **kwargs):
        result = parse_exposition_file(path, catalog, **kwargs)
        util = result.samples["gpu_util"]
        return dict(zip(util.series["gpu"].tolist(), util.ts_ms.tolist(), strict=True)), result.time_sources

    plain = tmp_path / "metrics.txt"
    plain.write_text(TIMED_PAGE)
    os.utime(plain, (1688169645, 1688169645))  # mtime 2023-07-01T00:00:45Z
    by_gpu, sources = times(plain)
    assert by_gpu == {0: DAY_START_MS, 1: DAY_START_MS + 45000, 2: DAY_START_MS + 30000}
    assert sources == {"sample timestamp": 1, "file mtime": 1, "# scrape_time comment": 1}

    named = tmp_path / "dcgm-20230701T000015Z.prom"
    named.write_text(TIMED_PAGE)
    by_gpu, sources = times(named)
    assert by_gpu == {0: DAY_START_MS, 1: DAY_START_MS + 15000, 2: DAY_START_MS + 30000}
    assert sources["file name"] == 1

    by_gpu, sources = times(named, scrape_time_ms=DAY_START_MS + 60000)  # --scrape-time beats the rest
    assert by_gpu == {0: DAY_START_MS, 1: DAY_START_MS + 60000, 2: DAY_START_MS + 60000}
    assert sources == {"sample timestamp": 1, "--scrape-time": 2}


def test_mig_and_vgpu_instances_are_series_of_their_own(catalog):
    # Hand-made from the shape of dcgm-exporter's MIG lines (real ones: tests/fixtures/field/metrics):
    # two instances and the whole GPU share gpu and UUID; a HAMi-style vGPU share by vdeviceid.
    page = """DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-a",Hostname="n1",GPU_I_PROFILE="1g.6gb",GPU_I_ID="3"} 10
DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-a",Hostname="n1",GPU_I_PROFILE="1g.6gb",GPU_I_ID="4"} 20
DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-a",Hostname="n1"} 30
DCGM_FI_DEV_FB_USED{gpu="1",UUID="GPU-b",Hostname="n1",vdeviceid="0"} 40
DCGM_FI_DEV_FB_USED{gpu="1",UUID="GPU-b",Hostname="n1",vdeviceid="1"} 50
"""
    result = parse_exposition(page, catalog, default_time_ms=DAY_START_MS)
    fb = result.samples["fb_used"]
    assert fb.series["gpu_instance"].tolist() == [
        "GPU_I_PROFILE=1g.6gb/GPU_I_ID=3", "GPU_I_PROFILE=1g.6gb/GPU_I_ID=4", None, "vdeviceid=0", "vdeviceid=1",
    ]  # fmt: skip
    assert fb.series_id.tolist() == [0, 1, 2, 3, 4] and fb.value.tolist() == [10, 20, 30, 40, 50]


def test_node_less_samples_take_the_given_node(catalog):
    page = "ipmi_dcmi_power_consumption_watts 372\n"
    refused = parse_exposition(page, catalog, default_time_ms=DAY_START_MS)
    assert not refused.samples and refused.rejects["reason"].iloc[0].endswith("give its name with --node)")
    taken = parse_exposition(page, catalog, default_time_ms=DAY_START_MS, default_node="bmc-9")
    power = taken.samples["server_power"]
    assert power.series["node"].tolist() == ["bmc-9"] and power.value.tolist() == [372]
