"""Shared helpers of the monitoring tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from acme.metrics.catalog import load_catalog
from acme.metrics.storage import Samples, series_frame

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "metrics"
DAY_START_MS = 1_688_169_600_000  # 2023-07-01T00:00:00Z


@pytest.fixture(scope="session")
def catalog():
    return load_catalog()


def make_samples(metric: str, per_series: dict[tuple, list[tuple[int, float]]], models=None) -> Samples:
    """Samples from {(node, gpu): [(seconds after 2023-07-01T00Z, value), ...]} in the given order."""
    keys = list(per_series)
    rows = [
        (node, gpu, f"GPU-{node}-{gpu}" if gpu is not None else None, (models or {}).get((node, gpu)))
        for node, gpu in keys
    ]
    ids, ts, values = [], [], []
    for sid, key in enumerate(keys):
        for second, value in per_series[key]:
            ids.append(sid)
            ts.append(DAY_START_MS + second * 1000)
            values.append(value)
    return Samples(
        metric, series_frame(rows), np.array(ids, np.int32), np.array(ts, np.int64), np.array(values, float)
    )


def full_day(value_fn, step_s: int = 15) -> list[tuple[int, float]]:
    return [(t, value_fn(i)) for i, t in enumerate(range(0, 86400, step_s))]
