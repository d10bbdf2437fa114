"""Validation of monitoring samples: each check, the report, and the thresholds."""

from __future__ import annotations

from datetime import date

import numpy as np
import pytest

from acme.metrics.storage import empty_samples
from acme.metrics.validate import MetricsThresholdError, check_thresholds, validate_samples

from .conftest import full_day, make_samples

DAY = date(2023, 7, 1)


def test_nan_inf_range_and_duplicates_are_quarantined_with_reasons(catalog):
    samples = make_samples(
        "gpu_util",
        {
            ("n1", 0): [
                (0, 50),
                (15, np.nan),
                (30, np.inf),
                (45, -np.inf),
                (60, 101),
                (75, -1),
                (75, 7),
                (90, 100),
            ]
        },
    )
    outcome = validate_samples(samples, catalog["gpu_util"], catalog, day=DAY)
    assert outcome.accepted.value.tolist() == [50, 7, 100]
    reasons = outcome.quarantined.sort_values("timestamp")["reason"].tolist()
    assert reasons == [
        "value is NaN", "value is +Inf", "value is -Inf", "above the maximum 100 %", "below the minimum 0 %",
    ]  # fmt: skip
    assert outcome.report["reasons"]["value is NaN"] == 1 and outcome.report["quarantined"] == 5
    # the duplicate at 75 s: -1 is out of range (quarantined for that), 7 is kept as the only valid sample


def test_duplicate_timestamps_keep_the_first(catalog):
    samples = make_samples("gpu_temp", {("n1", 0): [(0, 40), (0, 41), (15, 42)]})
    outcome = validate_samples(samples, catalog["gpu_temp"], catalog, day=DAY)
    assert outcome.accepted.value.tolist() == [40, 42]
    assert outcome.report["duplicates"] == 1
    assert outcome.quarantined["reason"].tolist() == [
        "duplicate timestamp in the series (first valid sample kept)"
    ]


def test_memory_is_checked_against_each_device(catalog):
    samples = make_samples(
        "fb_used",
        {("n1", 0): [(0, 23000), (15, 24000)], ("n1", 1): [(0, 24000), (15, 90000)]},
        models={("n1", 0): "NVIDIA L4", ("n1", 1): "NVIDIA A100-SXM4-80GB"},
    )
    outcome = validate_samples(samples, catalog["fb_used"], catalog, day=DAY)
    assert outcome.accepted.value.tolist() == [23000, 24000]
    assert set(outcome.quarantined["reason"]) == {"above the maximum the device's memory"}
    assert outcome.quarantined["value"].tolist() == [24000, 90000]


def test_out_of_order_samples_are_reported_and_sorted(catalog):
    samples = make_samples("gpu_util", {("n1", 0): [(30, 3), (0, 1), (15, 2)]})
    outcome = validate_samples(samples, catalog["gpu_util"], catalog, day=DAY)
    assert outcome.accepted.value.tolist() == [1, 2, 3]
    assert outcome.report["non_monotonic_series"] == {
        "series": 1,
        "devices": [{"device": "n1/gpu0", "count": 1}],
    }


def test_counter_resets_are_reported_not_quarantined(catalog):
    samples = make_samples("gpu_energy", {("n1", 0): [(0, 100), (15, 200), (30, 5), (45, 50), (60, 1)]})
    outcome = validate_samples(samples, catalog["gpu_energy"], catalog, day=DAY)
    assert len(outcome.accepted) == 5 and outcome.quarantined.empty
    assert outcome.report["counter_resets"]["total"] == 2
    assert validate_samples(samples, catalog["gpu_power"], catalog, day=DAY).report["counter_resets"] is None


def test_coverage_and_stale_devices(catalog):
    samples = make_samples(
        "gpu_power",
        {
            ("n1", 0): full_day(lambda i: 60 + i % 7),  # complete, varying
            ("n1", 1): [(t, v) for t, v in full_day(lambda i: 60 + i % 5) if not 3600 <= t < 7200],  # 1 h gap
            ("n1", 2): full_day(lambda i: 61.5),  # flat all day
            ("n2", 0): full_day(lambda i: 70 + i % 3)[: 5760 // 2],  # stops at noon
        },
    )
    report = validate_samples(samples, catalog["gpu_power"], catalog, day=DAY, expected_series=5).report
    coverage = report["coverage"]
    assert coverage["expected_per_series"] == 5760 and coverage["missing_series"] == 1
    assert coverage["mean"] == pytest.approx((1 + (5760 - 240) / 5760 + 1 + 0.5) / 5)
    assert [d["device"] for d in coverage["lowest"]] == ["n2/gpu0", "n1/gpu1"]
    missing = {d["device"]: d["max_gap_s"] for d in report["stale"]["missing"]["devices"]}
    assert missing == {"n2/gpu0": 43200.0, "n1/gpu1": 3600.0}
    flat = report["stale"]["flat"]["devices"]
    assert flat == [{"device": "n1/gpu2", "flat_s": 86385.0}]


def test_thresholds_raise_clear_errors(catalog):
    bad = make_samples("gpu_util", {("n1", 0): full_day(lambda i: 200 if i % 10 == 0 else 50)})
    report = validate_samples(bad, catalog["gpu_util"], catalog, day=DAY).report
    with pytest.raises(
        MetricsThresholdError, match=r"gpu_util on 2023-07-01: 576 of 5760 samples \(10.00%\) quarantined"
    ):
        check_thresholds(report, "in.csv", max_share=0.01, min_cov=0.5)
    check_thresholds(report, "in.csv", max_share=0.2, min_cov=0.5)


def test_an_empty_day_fails_on_coverage(catalog):
    report = validate_samples(
        empty_samples("gpu_util"), catalog["gpu_util"], catalog, day=DAY, expected_series=8
    ).report
    assert report["samples_in"] == 0 and report["coverage"]["mean"] == 0.0
    with pytest.raises(MetricsThresholdError, match="mean device coverage 0.0% is below the required 80.0%"):
        check_thresholds(report, "http://prometheus:9090", max_share=0.01, min_cov=0.8)
