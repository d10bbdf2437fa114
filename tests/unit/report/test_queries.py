"""The report's SQL layer against the lake's own readers: same histograms, daily figures to a bin."""

from __future__ import annotations

import duckdb
import numpy as np
import pytest

from acme.report.periods import parse_period
from acme.report.queries import NoJobsError, ReportQueries, partition_keys
from tests.metrics_support import read_histograms
from tests.unit.report.conftest import METRIC_DAYS


def test_merged_histogram_equals_the_storage_modules_merge(synth_lake):
    with ReportQueries(synth_lake, "seren", parse_period("all")) as queries:
        for metric in ("gpu_util", "gpu_power", "gpu_temp"):
            ours = queries.metric_histogram(metric)
            theirs = read_histograms(synth_lake, metric, "seren", list(METRIC_DAYS))
            assert (ours.low, ours.high, ours.underflow, ours.overflow) == (
                theirs.low, theirs.high, theirs.underflow, theirs.overflow,
            )  # fmt: skip
            assert np.array_equal(ours.counts, theirs.counts) and ours.total > 0


@pytest.mark.parametrize("metric, bin_width", [("gpu_temp", 1.0), ("gpu_util", 0.1)])
def test_daily_mean_and_max_from_histograms_match_the_rollups_to_one_bin(synth_lake, metric, bin_width):
    with ReportQueries(synth_lake, "seren", parse_period("all")) as queries:
        daily = queries.metric_daily(metric).set_index("day")
    rollups = [
        synth_lake.path(k) for k in synth_lake.list(f"metrics_5m/metric={metric}") if k.endswith(".parquet")
    ]
    exact = duckdb.execute(
        "SELECT CAST(bucket_start AS DATE) AS day, sum(mean * count) / sum(count) AS mean, max(max) AS max "
        "FROM read_parquet($f) GROUP BY 1 ORDER BY 1",
        {"f": rollups},
    ).df().set_index("day")  # fmt: skip
    assert list(daily.index) == list(exact.index) and len(daily) == len(METRIC_DAYS)
    assert (abs(daily["max"] - exact["max"]) <= bin_width).all()
    assert (abs(daily["mean"] - exact["mean"]) <= bin_width / 2 + 1e-9).all()


def test_partitions_are_chosen_by_period(synth_lake):
    june_5 = partition_keys(synth_lake, "jobs/cluster=kalos", parse_period("2023-06-05"), "jobs.parquet")
    assert june_5 == ["jobs/cluster=kalos/date=2023-06-05/jobs.parquet"]
    june = partition_keys(synth_lake, "jobs/cluster=kalos", parse_period("2023-06"), "jobs.parquet")
    assert [k.split("/")[2] for k in june] == [f"date=2023-06-{d:02d}" for d in range(5, 19)]
    with pytest.raises(NoJobsError, match="no job partitions in month 2023-05"):
        ReportQueries(synth_lake, "kalos", parse_period("2023-05"))
    with ReportQueries(synth_lake, "kalos", parse_period("all")) as queries:
        assert queries.days[0] == "2023-06-05" and len(queries.days) == 14
