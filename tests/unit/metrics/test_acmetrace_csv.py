"""The AcmeTrace-style wide CSVs: column mapping, time zones, and every kind of bad cell or row."""

from __future__ import annotations

import math

import numpy as np
import pytest

from acme.errors import InputError
from acme.metrics.acmetrace_csv import map_columns, metric_of_file, parse_wide_csv

from .conftest import DAY_START_MS


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_columns_map_to_node_and_gpu_after_the_last_separator(catalog):
    mapped, notes = map_columns(
        ["SH-IDC1-10-140-0-12-3", "node7_gpu2", "node7:1", "gpu-node/4", "weird", "node7_gpu2"],
        catalog["gpu_util"],
    )
    assert mapped[:4] == [("SH-IDC1-10-140-0-12", 3), ("node7", 2), ("node7", 1), ("gpu-node", 4)]
    assert mapped[4] is None and mapped[5] is None  # unmappable, repeated
    assert any("repeats node7 GPU 2" in n for n in notes) and any("'weird'" in n for n in notes)
    node_level, _ = map_columns(["SH-IDC1-10-140-0-12"], catalog["server_power"])
    assert node_level == [("SH-IDC1-10-140-0-12", None)]


def test_node_names_given_for_a_gpu_metric_are_refused(catalog):
    with pytest.raises(InputError, match="look like node names"):
        map_columns([f"SH-IDC1-10-140-0-{i}" for i in range(20, 40)], catalog["gpu_util"])


def test_wide_file_unpivots_sorted_and_in_utc(tmp_path, catalog):
    path = write(
        tmp_path,
        "gpu_util.csv",
        "Time,b-1,b-0,a-0\n"
        "2023-07-01 08:00:15+08:00,1,2,3\n"
        "2023-07-01 08:00:00+08:00,4,,6\n"  # rows out of order; an empty cell is a missing sample
        "2023-07-01 08:00:30+08:00,NaN,inf,9\n",
    )
    assert metric_of_file(path, catalog).name == "gpu_util"
    parsed = parse_wide_csv(path, catalog["gpu_util"])
    samples = parsed.samples
    assert samples.is_sorted and parsed.missing_cells == 1 and parsed.rejects.empty
    assert [tuple(r) for r in samples.series[["node", "gpu"]].itertuples(index=False)] == [
        ("a", 0),
        ("b", 0),
        ("b", 1),
    ]
    assert samples.series_id.tolist() == [0, 0, 0, 1, 1, 2, 2, 2]
    assert samples.ts_ms.tolist()[:3] == [DAY_START_MS, DAY_START_MS + 15000, DAY_START_MS + 30000]
    values = samples.value.tolist()
    assert (
        values[:4] == [6, 3, 9, 2]
        and values[4] == math.inf
        and values[5:7] == [4, 1]
        and math.isnan(values[7])
    )
    assert any("not in time order" in n for n in parsed.notes)


def test_bad_rows_times_and_cells_become_rejects(tmp_path, catalog):
    path = write(
        tmp_path,
        "server_power.csv",
        "Time,n1,n2\n"
        "2023-07-01 08:00:00+08:00,1000,1100\n"
        "2023-07-01 08:00:15+08:00,1000\n"  # too few cells
        "not a time,1,2\n"
        "2023-07-01 08:00:45+08:00,oops,1200\n",
    )
    parsed = parse_wide_csv(path, catalog["server_power"])
    reasons = parsed.rejects.sort_values("source_line")["reason"].tolist()
    assert "expected 3 cells, got 2" in reasons
    assert any(r.startswith("Time 'not a time'") for r in reasons)
    assert "n1: 'oops' is not a number" in reasons
    assert parsed.samples.value.tolist() == [1000, 1100, 1200]
    assert parsed.samples.series["gpu"].isna().all()


def test_day_filter_and_naive_times_as_utc_plus_8(tmp_path, catalog):
    path = write(tmp_path, "gpu_temp.csv", "Time,n-0\n2023-07-01 07:59:45,40\n2023-07-01 08:00:00,41\n")
    from datetime import date

    parsed = parse_wide_csv(path, catalog["gpu_temp"], day=date(2023, 7, 1))
    assert parsed.samples.ts_ms.tolist() == [DAY_START_MS] and parsed.samples.value.tolist() == [41]


def test_files_without_time_or_rows(tmp_path, catalog):
    with pytest.raises(InputError, match="no Time column"):
        parse_wide_csv(write(tmp_path, "gpu_util.csv", "When,n-0\nx,1\n"), catalog["gpu_util"])
    with pytest.raises(InputError, match="empty file"):
        parse_wide_csv(write(tmp_path, "gpu_temp.csv", ""), catalog["gpu_temp"])
    empty = parse_wide_csv(write(tmp_path, "fb_used.csv", "Time,n-0\n"), catalog["fb_used"])
    assert len(empty.samples) == 0 and np.array_equal(empty.samples.series["gpu"].to_numpy(), [0])
