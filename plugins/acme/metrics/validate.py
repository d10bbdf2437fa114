"""Validation of monitoring samples: vectorized checks over numpy arrays, results as JSON.

Why not great-expectations (which validates the job traces): a Seren-size cluster produces about
79 million GPU samples a day (2,288 GPUs × 6 metrics × 5,760 samples at 15 s); GX's pandas
execution engine materializes per-expectation masks and row-level results over a DataFrame and
would need minutes and several GB for that. The checks here are the same kind of expectations
(ranges, nulls, uniqueness, ordering, completeness) written as a few passes over the sorted
arrays of :class:`acme.metrics.storage.Samples`, about a second per 13 M samples.

Checks per metric, in order:

- **non-monotonic series** (input order): samples of a series arriving out of time order are
  counted per series and reported; sorting fixes them, nothing is quarantined for it;
- **NaN / ±Inf** values: quarantined (``value is NaN``, ``value is +Inf``, ...);
- **out of range** (the catalog's range; GPU memory against the device's memory from its model
  name): quarantined with the bound;
- **duplicate timestamps** within a series: the first valid sample is kept, the others quarantined;
- **counter resets** (counters only): a decrease within a series is counted and reported, the
  samples are kept (a reset is what a restarted exporter or driver does, not bad data);
- **coverage** per device: accepted samples / the samples expected for the day at the step;
- **stale devices**: a gap longer than ``stale_missing_after_s`` (also at the day's start or end),
  or a value flat for longer than the metric's ``stale_flat_after_s``.

``check_thresholds`` turns the report into a clear error when the quarantined share of a metric
exceeds ``max_quarantine_share`` (``ACME_METRICS_MAX_QUARANTINE_SHARE``, default 1 %) or the mean
device coverage falls below ``min_coverage`` (``ACME_METRICS_MIN_COVERAGE``, default 0.8).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING, Any

from acme.errors import QuarantineThresholdError

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from acme.metrics.catalog import Catalog, MetricSpec
    from acme.metrics.storage import Samples

REASONS = {
    1: "value is NaN",
    2: "value is +Inf",
    3: "value is -Inf",
    4: "below the minimum",
    5: "above the maximum",
    6: "duplicate timestamp in the series (first valid sample kept)",
}
QUARANTINE_COLUMNS = (
    "metric",
    "node",
    "gpu",
    "uuid",
    "timestamp",
    "value",
    "reason",
    "source_line",
    "record",
)
LISTED = 20  # how many devices a report names per finding


class MetricsThresholdError(QuarantineThresholdError):
    """A metric's day failed its coverage or quarantine threshold: it was not published."""


@dataclass
class MetricValidation:
    accepted: Samples  # sorted by (series, time)
    quarantined: pd.DataFrame  # QUARANTINE_COLUMNS
    report: dict[str, Any]


def validate_samples(
    samples: Samples,
    spec: MetricSpec,
    catalog: Catalog,
    *,
    day: date | None = None,
    step_s: int = 15,
    expected_series: int | None = None,
) -> MetricValidation:
    """Check one metric's samples (see the module doc); returns accepted samples, quarantine, report."""
    import numpy as np

    from acme.metrics.storage import DAY_MS, canonicalize, day_start_ms

    n_in = len(samples)
    non_monotonic = _non_monotonic(samples) if not samples.is_sorted else np.zeros(samples.n_series, np.int64)
    samples = canonicalize(samples)
    sid, ts, value = samples.series_id, samples.ts_ms, samples.value

    code = np.zeros(n_in, dtype=np.int8)
    finite = np.isfinite(value)
    if not finite.all():
        code[np.isnan(value)] = 1
        code[np.isposinf(value)] = 2
        code[np.isneginf(value)] = 3
    low, high = spec.range_for(_device_memory(samples, catalog) if spec.high is None else None)
    high_per_sample = high[sid] if isinstance(high, np.ndarray) else high
    with np.errstate(invalid="ignore"):
        code[(code == 0) & (value < low)] = 4
        code[(code == 0) & (value > high_per_sample)] = 5
    valid = np.flatnonzero(code == 0)  # duplicates among the valid samples: the first valid one is kept
    v_sid, v_ts = sid[valid], ts[valid]
    repeated = (v_sid[1:] == v_sid[:-1]) & (v_ts[1:] == v_ts[:-1])
    code[valid[1:][repeated]] = 6

    bad = code != 0
    n_bad = int(np.count_nonzero(bad))
    quarantined = _quarantine_frame(samples, bad, code, spec, high) if n_bad else _empty_quarantine()
    accepted = samples.take(~bad) if n_bad else samples

    days = [day] if day is not None else _days_of(ts)
    expected_per_series = len(days) * (86400 // step_s)
    counts = np.bincount(accepted.series_id, minlength=samples.n_series)
    coverage = counts / expected_per_series if expected_per_series else np.zeros(samples.n_series)
    resets = _counter_resets(accepted) if spec.kind == "counter" else None
    window = (day_start_ms(days[0]), day_start_ms(days[-1]) + DAY_MS) if days else (0, 0)
    max_gap = _max_gap_s(accepted, window, step_s)
    flat = _max_flat_s(accepted) if spec.stale_flat_after_s else None

    names = _device_names(samples)
    series_total = max(samples.n_series, expected_series or 0)
    missing_series = max(0, (expected_series or 0) - samples.n_series)
    mean_coverage = float(coverage.sum() / series_total) if series_total else 0.0
    reasons = {REASONS[c]: int(n) for c, n in zip(*np.unique(code[bad], return_counts=True), strict=True)}
    report = {
        "metric": spec.name,
        "unit": spec.unit,
        "kind": spec.kind,
        "days": [d.isoformat() for d in days],
        "step_s": step_s,
        "samples_in": n_in,
        "accepted": len(accepted),
        "quarantined": n_bad,
        "quarantine_share": round(n_bad / n_in, 6) if n_in else 0.0,
        "reasons": reasons,
        "series": samples.n_series,
        "duplicates": int(np.count_nonzero(code == 6)),
        "non_monotonic_series": _listing(non_monotonic, names),
        "counter_resets": None if resets is None else {"total": int(resets.sum()), **_listing(resets, names)},
        "coverage": {
            "expected_per_series": expected_per_series,
            "expected_series": expected_series,
            "missing_series": missing_series,
            "mean": round(mean_coverage, 6),
            "min": round(float(coverage.min()), 6) if len(coverage) else 0.0,
            "below_0.9": int(np.count_nonzero(coverage < 0.9)),
            "lowest": [
                {"device": names[i], "coverage": round(float(coverage[i]), 4)}
                for i in np.argsort(coverage, kind="stable")[:LISTED]
                if coverage[i] < 1
            ],
        },
        "stale": {
            "missing_after_s": catalog.stale_missing_after_s,
            "missing": _over(max_gap, catalog.stale_missing_after_s, names, "max_gap_s"),
            "flat_after_s": spec.stale_flat_after_s,
            "flat": None
            if flat is None or spec.stale_flat_after_s is None
            else _over(flat, spec.stale_flat_after_s, names, "flat_s"),
        },
    }
    return MetricValidation(accepted, quarantined, report)


def check_thresholds(
    report: dict[str, Any], source: str, max_share: float | None = None, min_cov: float | None = None
) -> None:
    """Raise :class:`MetricsThresholdError` when the report breaks a threshold, saying which and why."""
    from acme import settings

    max_share = settings.metrics().max_quarantine_share if max_share is None else max_share
    min_cov = settings.metrics().min_coverage if min_cov is None else min_cov
    problems = []
    if report["samples_in"] and report["quarantine_share"] > max_share:
        top = ", ".join(f"{reason}: {count}" for reason, count in report["reasons"].items())
        problems.append(
            f"{report['quarantined']} of {report['samples_in']} samples ({report['quarantine_share']:.2%}) "
            f"quarantined, above the allowed {max_share:.2%} ({top})"
        )
    coverage = report["coverage"]["mean"]
    if coverage < min_cov:
        problems.append(
            f"mean device coverage {coverage:.1%} is below the required {min_cov:.1%} "
            f"({report['accepted']} accepted samples for {report['series']} series, "
            f"{report['coverage']['expected_per_series']} expected per series at {report['step_s']} s)"
        )
    if problems:
        raise MetricsThresholdError(
            f"{source}: metric {report['metric']} on {', '.join(report['days']) or 'no day'}: "
            + "; ".join(problems)
            + "; it was not published"
        )


# --- the checks -------------------------------------------------------------------------------


def _non_monotonic(samples: Samples) -> np.ndarray:
    """Per series: how many times a sample's time is before its predecessor's, in input order."""
    import numpy as np

    if not len(samples):
        return np.zeros(samples.n_series, np.int64)
    order = np.argsort(samples.series_id, kind="stable")
    sid, ts = samples.series_id[order], samples.ts_ms[order]
    backwards = (sid[1:] == sid[:-1]) & (ts[1:] < ts[:-1])
    return np.bincount(sid[1:][backwards], minlength=samples.n_series)


def _counter_resets(samples: Samples) -> np.ndarray:
    import numpy as np

    sid, value = samples.series_id, samples.value
    drop = (sid[1:] == sid[:-1]) & (value[1:] < value[:-1])
    return np.bincount(sid[1:][drop], minlength=samples.n_series)


def _max_gap_s(samples: Samples, window: tuple[int, int], step_s: int) -> np.ndarray:
    """Per series: the longest stretch without a sample within the window (s), edges included."""
    import numpy as np

    n_series = samples.n_series
    gaps = np.full(n_series, (window[1] - window[0]) / 1000.0)
    if not len(samples):
        return gaps
    sid, ts = samples.series_id, samples.ts_ms
    starts = np.flatnonzero(np.r_[True, sid[1:] != sid[:-1]])
    ends = np.r_[starts[1:], len(sid)] - 1
    present = sid[starts]
    inner = np.zeros(len(sid))
    inner[1:] = np.where(sid[1:] == sid[:-1], (ts[1:] - ts[:-1]) / 1000.0 - step_s, 0)
    longest_inner = np.maximum.reduceat(inner, starts)
    leading = (ts[starts] - window[0]) / 1000.0
    trailing = (window[1] - ts[ends]) / 1000.0 - step_s
    gaps[present] = np.maximum(np.maximum(longest_inner, leading), trailing)
    return np.maximum(gaps, 0)


def _max_flat_s(samples: Samples) -> np.ndarray:
    """Per series: the longest time (s) the value stayed exactly the same."""
    import numpy as np

    flat = np.zeros(samples.n_series)
    if not len(samples):
        return flat
    sid, ts, value = samples.series_id, samples.ts_ms, samples.value
    change = np.r_[True, (sid[1:] != sid[:-1]) | (value[1:] != value[:-1])]
    starts = np.flatnonzero(change)
    ends = np.r_[starts[1:], len(sid)] - 1
    duration = (ts[ends] - ts[starts]) / 1000.0
    run_sid = sid[starts]
    series_starts = np.flatnonzero(np.r_[True, run_sid[1:] != run_sid[:-1]])
    flat[run_sid[series_starts]] = np.maximum.reduceat(duration, series_starts)
    return flat


def _device_memory(samples: Samples, catalog: Catalog) -> np.ndarray:
    import numpy as np

    models = samples.series["model"].tolist()
    return np.array([catalog.memory_of(m) for m in models], dtype=np.float64)


def _device_names(samples: Samples) -> list[str]:
    series = samples.series
    gpus = series["gpu"].astype("float64").fillna(-1).astype(int).tolist()
    return [
        (node if gpu < 0 else f"{node}/gpu{gpu}") + (f"/{instance}" if instance else "")
        for node, gpu, instance in zip(
            series["node"].tolist(), gpus, series["gpu_instance"].tolist(), strict=True
        )
    ]


def _listing(counts: np.ndarray, names: list[str]) -> dict[str, Any]:
    import numpy as np

    hit = np.flatnonzero(counts)
    top = hit[np.argsort(-counts[hit], kind="stable")][:LISTED]
    return {"series": len(hit), "devices": [{"device": names[i], "count": int(counts[i])} for i in top]}


def _over(values: np.ndarray, limit: float, names: list[str], label: str) -> dict[str, Any]:
    import numpy as np

    hit = np.flatnonzero(values > limit)
    top = hit[np.argsort(-values[hit], kind="stable")][:LISTED]
    return {"series": len(hit), "devices": [{"device": names[i], label: float(values[i])} for i in top]}


def _days_of(ts: np.ndarray) -> list[date]:
    from datetime import timedelta

    import numpy as np

    from acme.metrics.storage import DAY_MS

    if not len(ts):
        return []
    return [date(1970, 1, 1) + timedelta(days=int(d)) for d in np.unique(ts // DAY_MS)]


def _quarantine_frame(samples: Samples, bad, code, spec: MetricSpec, high) -> pd.DataFrame:
    import numpy as np
    import pandas as pd

    idx = np.flatnonzero(bad)
    sid = samples.series_id[idx]
    series = samples.series
    high_text = "the device's memory" if isinstance(high, np.ndarray) else f"{high:g} {spec.unit}"
    messages = {
        **REASONS,
        4: f"below the minimum {spec.low:g} {spec.unit}",
        5: f"above the maximum {high_text}",
    }
    codes = code[idx]
    reason = pd.Categorical.from_codes(
        codes.astype(np.int64) - 1, categories=[messages[c] for c in sorted(messages)]
    )
    return pd.DataFrame(
        {
            "metric": spec.name,
            "node": series["node"].to_numpy()[sid],
            "gpu": pd.array(series["gpu"].to_numpy()[sid], dtype="Int16"),
            "uuid": series["uuid"].to_numpy()[sid],
            "timestamp": pd.to_datetime(samples.ts_ms[idx], unit="ms", utc=True),
            "value": samples.value[idx],
            "reason": reason.astype(str),
            "source_line": pd.array([None] * len(idx), dtype="Int64"),
            "record": None,
        }
    )


def _empty_quarantine() -> pd.DataFrame:
    import pandas as pd

    return pd.DataFrame({name: pd.Series(dtype="object") for name in QUARANTINE_COLUMNS})
