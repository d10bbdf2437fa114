"""Compact storage: round trip, idempotency, bytes per sample, rollups and mergeable histograms."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import duckdb
import numpy as np
import pandas as pd
import pytest

from acme import lake_keys
from acme.lake import Lake
from acme.metrics.storage import (
    Histogram,
    Samples,
    cdf,
    histogram,
    publish_day,
    quantiles,
    read_samples,
    rollup_5m,
    series_frame,
)
from acme.metrics.synth import synth_cluster
from tests.metrics_support import merge_histograms, read_histograms, to_frame

from .conftest import DAY_START_MS, full_day, make_samples

DAY = date(2023, 7, 1)


def test_round_trip_keeps_series_times_and_exact_values(tmp_path, catalog):
    samples = make_samples(
        "gpu_power",
        {("n2", 1): [(15, 61.3), (0, 60.1)], ("n1", 0): [(0, 399.9), (15, 0.0)]},
        models={("n1", 0): "NVIDIA A100-SXM4-80GB"},
    )
    lake = Lake(str(tmp_path / "lake"))
    manifest = publish_day(lake, catalog["gpu_power"], "seren", DAY, samples)
    assert manifest["samples"] == 4 and manifest["series"] == 2
    back = read_samples(lake, "gpu_power", "seren", DAY)
    frame = to_frame(back, "seren", "W")
    assert frame["node"].tolist() == ["n1", "n1", "n2", "n2"]
    assert frame["value"].tolist() == [399.9, 0.0, 60.1, 61.3]
    assert frame["timestamp"].iloc[0] == pd.Timestamp("2023-07-01", tz="UTC")
    assert back.series["model"].tolist() == ["NVIDIA A100-SXM4-80GB", None]
    # Readers outside Python see exact decimals and the Hive partitions.
    rows = duckdb.sql(
        f"SELECT metric, cluster, node, gpu, value, typeof(value) FROM read_parquet('{tmp_path}/lake/metrics/**/*.parquet', "
        "hive_partitioning = true) ORDER BY node, timestamp"
    ).fetchall()
    assert rows[0] == ("gpu_power", "seren", "n1", 0, Decimal("399.9"), "DECIMAL(9,1)")


def test_republishing_a_day_replaces_it_and_a_partial_day_merges(tmp_path, catalog):
    lake = Lake(str(tmp_path / "lake"))
    spec = catalog["gpu_util"]
    day_one = make_samples("gpu_util", {("n1", 0): full_day(lambda i: i % 100)})
    publish_day(lake, spec, "seren", DAY, day_one)
    first = lake.read_bytes(lake_keys.metric_samples("gpu_util", "seren", DAY))
    publish_day(lake, spec, "seren", DAY, day_one)
    assert (
        lake.read_bytes(lake_keys.metric_samples("gpu_util", "seren", DAY)) == first
    )  # same input, same partition
    morning = make_samples("gpu_util", {("n1", 0): [(t, 7) for t in range(0, 3600, 15)]})
    publish_day(lake, spec, "seren", DAY, morning)  # a partial day replaces only its own span
    back = read_samples(lake, "gpu_util", "seren", DAY)
    assert len(back) == 5760 and (back.value[:240] == 7).all() and back.value[240] == 240 % 100


def test_a_synthesized_day_takes_under_three_bytes_per_sample(tmp_path, catalog):
    synth = synth_cluster("seren", 8, DAY, 1, seed=3)
    lake = Lake(str(tmp_path / "lake"))
    sizes = {}
    for metric in ("gpu_util", "sm_active", "tensor_active", "fb_used", "gpu_power", "gpu_temp"):
        values = synth.values(metric)
        n_series, steps = values.shape
        samples = Samples(
            metric,
            series_frame(
                node=[synth.nodes[g // 8] for g in range(n_series)],
                gpu=[g % 8 for g in range(n_series)],
                uuid=[synth.uuid(g) for g in range(n_series)],
                model=["NVIDIA A100-SXM4-80GB"] * n_series,
            ),  # fmt: skip
            np.repeat(np.arange(n_series, dtype=np.int32), steps),
            np.tile(synth.ts_ms(), n_series),
            values.reshape(-1),
            is_sorted=False,
        )
        sizes[metric] = publish_day(lake, catalog[metric], "seren", DAY, samples)["bytes_per_sample"]
    print("bytes/sample", sizes)
    assert all(size <= 3 for size in sizes.values()), sizes
    assert sum(sizes.values()) / len(sizes) <= 1.5


def test_rollup_5m_matches_pandas(catalog):
    rng = np.random.default_rng(0)
    samples = make_samples(
        "gpu_temp",
        {
            ("n1", 0): [(t, float(rng.integers(30, 80))) for t in range(0, 1800, 15)],
            ("n1", 1): [(t, 40.0) for t in range(600, 900, 15)],
        },
    )
    table = rollup_5m(samples, DAY).to_pandas()
    frame = to_frame(samples, "c", "°C")
    frame["bucket"] = frame["timestamp"].dt.floor("5min")
    expected = (
        frame.groupby(["node", "gpu", "bucket"])["value"].agg(["min", "mean", "max", "count"]).reset_index()
    )
    assert len(table) == len(expected) == 7
    assert (
        np.allclose(table["mean"], expected["mean"])
        and (table["count"].to_numpy() == expected["count"]).all()
    )
    assert table["bucket_start"].iloc[0] == pd.Timestamp("2023-07-01", tz="UTC")


def test_histograms_merge_across_days_and_give_quantiles_within_a_bin(tmp_path, catalog):
    spec = catalog["sm_active"]
    rng = np.random.default_rng(1)
    days = [np.clip(np.concatenate([np.zeros(3000), rng.beta(2, 2, 7000) * 100]), 0, 100) for _ in range(3)]
    merged = merge_histograms([histogram(v, spec) for v in days])
    everything = np.concatenate(days)
    q = [0.1, 0.35, 0.5, 0.9, 0.99]  # (q = 0.3 would sit exactly on the point mass at 0)
    assert np.allclose(quantiles(merged, q), np.quantile(everything, q), atol=merged.width)
    assert cdf(merged, [50])[0] == pytest.approx((everything <= 50).mean(), abs=0.002)
    lake = Lake(str(tmp_path / "lake"))
    for i, values in enumerate(days):
        day = date(2023, 7, 1 + i)
        n = len(values)
        samples = Samples(
            "sm_active",
            series_frame([("n1", 0, None, None)]),
            np.zeros(n, np.int32),
            DAY_START_MS + i * 86_400_000 + np.arange(n, dtype=np.int64) * 1000,
            spec.quantize(values),
        )
        publish_day(lake, spec, "seren", day, samples)
    month = read_histograms(lake, "sm_active", "seren", [date(2023, 7, d) for d in range(1, 31)])
    assert month.total == 30000
    assert np.allclose(quantiles(month, q), np.quantile(everything, q), atol=month.width + 0.1)


def test_histogram_edges_and_mismatched_merges(catalog):
    spec = catalog["gpu_util"]
    hist = histogram(np.array([0.0, 100.0, 100.0, 150.0, -5.0]), spec)
    assert hist.counts[0] == 1 and hist.counts[-1] == 2 and hist.overflow == 1 and hist.underflow == 1
    with pytest.raises(ValueError, match="different bins"):
        merge_histograms([hist, Histogram("gpu_util", 0, 100, np.zeros(10, np.int64))])


def test_instances_round_trip_and_partitions_written_before_them_still_read(catalog):
    from acme.metrics.storage import samples_from_table, samples_table, series_frame

    spec = catalog["fb_used"]
    rows = [("n1", 0, "GPU-a", "NVIDIA A30", "GPU_I_ID=3"), ("n1", 0, "GPU-a", "NVIDIA A30", "GPU_I_ID=4")]
    samples = Samples(
        "fb_used", series_frame(rows), np.array([0, 1, 0, 1], np.int32),
        np.array([0, 0, 15000, 15000], np.int64), np.array([1.0, 2.0, 3.0, 4.0]),
    )  # fmt: skip
    table = samples_table(samples, spec)
    back = samples_from_table("fb_used", table)
    assert back.series["gpu_instance"].tolist() == ["GPU_I_ID=3", "GPU_I_ID=4"]
    assert back.value.tolist() == [1.0, 3.0, 2.0, 4.0]
    whole_gpus = samples_table(
        Samples("fb_used", series_frame([("n1", 0, "GPU-a", None), ("n1", 1, "GPU-b", None)]),
                np.array([0, 1], np.int32), np.array([0, 0], np.int64), np.array([5.0, 6.0])),
        spec,
    ).drop_columns(["gpu_instance"])  # fmt: skip
    old = samples_from_table("fb_used", whole_gpus)
    assert old.n_series == 2 and old.series["gpu_instance"].isna().all() and old.value.tolist() == [5.0, 6.0]
