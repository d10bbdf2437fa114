"""Readers the metrics tests share: whole-text parsing, a day from a Prometheus client, and the
stored histograms and snapshots read back. The pipeline itself streams files
(``parse_exposition_file``), fetches through the ingest, and reads these artifacts in SQL (report)
or not at all; only tests need them as Python objects."""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import TYPE_CHECKING

from acme import lake_keys
from acme.metrics.exposition import TimeOptions, _parse_lines
from acme.metrics.prometheus import matrix_to_samples
from acme.metrics.storage import (
    Histogram,
    canonicalize,
    concat_samples,
    empty_samples,
    samples_from_table,
)

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

    from acme.lake import Lake
    from acme.metrics.catalog import Catalog
    from acme.metrics.exposition import ExpositionResult
    from acme.metrics.prometheus import PrometheusClient
    from acme.metrics.storage import Samples


def parse_exposition(
    text: str,
    catalog: Catalog,
    *,
    source_file: str = "<text>",
    default_time_ms: int | None = None,
    scrape_time_ms: int | None = None,
    default_node: str | None = None,
    openmetrics: bool | None = None,
) -> ExpositionResult:
    """Parse exposition text held in memory (the pipeline streams files: ``parse_exposition_file``)."""
    if openmetrics is None:
        openmetrics = text.rstrip().endswith("# EOF")
    lines = text.split("\n")  # the format's line end; str.splitlines would also split on \x1e, \x85...
    if lines and lines[-1] == "":
        lines.pop()
    numbered = ((number, line, 0) for number, line in enumerate(lines, start=1))
    options = TimeOptions(scrape_time_ms, default_time_ms, "default time", default_node)
    return _parse_lines(numbered, catalog, source_file, options, openmetrics, 0)


def fetch_day(
    client: PrometheusClient,
    catalog: Catalog,
    day: date,
    step_s: float = 15,
    metrics: list[str] | None = None,
) -> dict[str, Samples]:
    """Every catalog metric with PromQL (or those named) for one UTC day."""
    start = datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp()
    chosen = [catalog[m] for m in metrics] if metrics else [s for s in catalog if s.promql]
    return {
        spec.name: matrix_to_samples(client.fetch(spec, start, start + 86400, step_s), spec)
        for spec in chosen
    }


def read_histograms(lake: Lake, metric: str, cluster: str, days: list[date]) -> Histogram | None:
    """The merged histogram of the days that have one (None when none has)."""
    found = [
        histogram_from_table(metric, lake.read_parquet(lake_keys.metric_histogram(metric, cluster, d)))
        for d in days
        if lake.exists(lake_keys.metric_histogram(metric, cluster, d))
    ]
    return merge_histograms(found) if found else None


def read_snapshots(lake: Lake, metric: str, cluster: str, day: date) -> Samples:
    """Every snapshot of a metric taken on ``day`` (all inputs), as one Samples."""
    prefix = lake_keys.metric_partition(metric, cluster, day, lake_keys.METRICS_SNAPSHOTS)
    parts = [samples_from_table(metric, lake.read_parquet(key)) for key in sorted(lake.list(prefix))]
    return canonicalize(concat_samples(parts)) if parts else empty_samples(metric)


def merge_histograms(histograms: list[Histogram]) -> Histogram:
    """Sum of histograms of the same metric and bins (e.g. the days of a month)."""
    import numpy as np

    if not histograms:
        raise ValueError("no histograms to merge")
    first = histograms[0]
    for other in histograms[1:]:
        if (other.metric, other.low, other.high, other.bins) != (
            first.metric,
            first.low,
            first.high,
            first.bins,
        ):
            raise ValueError(
                f"cannot merge histograms with different bins: {first.metric} [{first.low}, {first.high}) × "
                f"{first.bins} and {other.metric} [{other.low}, {other.high}) × {other.bins}"
            )
    return Histogram(
        first.metric,
        first.low,
        first.high,
        np.sum([h.counts for h in histograms], axis=0),
        sum(h.underflow for h in histograms),
        sum(h.overflow for h in histograms),
    )


def histogram_from_table(metric: str, table: pa.Table) -> Histogram:
    import numpy as np

    low = table["bin_low"].to_numpy()
    high = table["bin_high"].to_numpy()
    counts = table["count"].to_numpy().astype(np.int64)
    return Histogram(
        metric, float(high[0]), float(low[-1]), counts[1:-1].copy(), int(counts[0]), int(counts[-1])
    )


def to_frame(samples: Samples, cluster: str, unit: str) -> pd.DataFrame:
    """The canonical long form of ``samples`` (the pipeline keeps arrays)."""
    import pandas as pd

    series = samples.series.iloc[samples.series_id]
    return pd.DataFrame(
        {
            "cluster": cluster,
            "metric": samples.metric,
            "node": series["node"].to_numpy(),
            "gpu": pd.array(series["gpu"].to_numpy(), dtype="Int16"),
            "uuid": series["uuid"].to_numpy(),
            "timestamp": pd.to_datetime(samples.ts_ms, unit="ms", utc=True),
            "value": samples.value,
            "unit": unit,
        }
    )
