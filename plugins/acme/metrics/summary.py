"""What the lake holds of telemetry: daily metric partitions, one-off snapshots and quarantined samples.

``summarize_metrics(lake)`` is the telemetry part of ``python -m acme lake-summary``. It reads only
Parquet footers (row counts), never the samples, so it stays quick on a lake of many months:

- ``metrics/metric=<m>/cluster=<c>/date=<d>/samples.parquet``: daily ingests (``mode: daily``; a day
  split by node group has one ``samples.group-<g>-of-<N>.parquet`` per group instead);
- ``metrics_snapshots/metric=<m>/cluster=<c>/date=<d>/<input>.parquet``: one-off scrapes and instant
  queries stored with ``--snapshot`` (``mode: snapshot``, one file per input);
- ``quarantine/metrics/cluster=<c>/date=<d>/<input>-<metric>.parquet``: samples that failed validation
  (``<input>-_parse.parquet``: lines that could not be parsed at all).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from acme import lake_keys

if TYPE_CHECKING:
    from acme.lake import Lake

DAILY_AREA = lake_keys.METRICS
SNAPSHOT_AREA = lake_keys.METRICS_SNAPSHOTS
QUARANTINE_AREA = lake_keys.QUARANTINE_METRICS


def summarize_metrics(lake: Lake) -> dict[str, Any]:
    """Samples per daily partition and per snapshot file, and quarantined samples, with totals.

    Keys: ``metric_samples``, ``metric_partitions``, ``metric_days`` (sorted ``(cluster, date)`` of the
    daily partitions), ``snapshot_samples``, ``snapshot_files``, ``snapshot_days``,
    ``metric_quarantined`` and ``metric_files`` (one entry per file: metric, cluster, date, mode,
    rows, path).
    """
    daily = [_entry(lake, key, "daily") for key in _parquet_keys(lake, DAILY_AREA)]
    snapshots = [_entry(lake, key, "snapshot") for key in _parquet_keys(lake, SNAPSHOT_AREA)]
    quarantine = [_entry(lake, key, "quarantine") for key in _parquet_keys(lake, QUARANTINE_AREA)]
    return {
        "metric_samples": sum(e["rows"] for e in daily),
        "metric_partitions": len({(e["metric"], e["cluster"], e["date"]) for e in daily}),
        "metric_days": sorted({(e["cluster"], e["date"]) for e in daily}),
        "snapshot_samples": sum(e["rows"] for e in snapshots),
        "snapshot_files": len(snapshots),
        "snapshot_days": sorted({(e["cluster"], e["date"]) for e in snapshots}),
        "metric_quarantined": sum(e["rows"] for e in quarantine),
        "metric_files": daily + snapshots + quarantine,
    }


def _parquet_keys(lake: Lake, area: str) -> list[str]:
    # lake.list(area) lists the folder `area/`, so "metrics" does not reach into "metrics_snapshots"
    return [key for key in lake.list(area) if key.startswith(f"{area}/") and key.endswith(".parquet")]


def _entry(lake: Lake, key: str, mode: str) -> dict[str, Any]:
    parts = lake_keys.partition_values(key)
    if mode == "quarantine":  # <input_key>-<metric>.parquet; the input key is <format>-<16 hex digits>
        parts["metric"] = key.rsplit("/", 1)[-1].removesuffix(".parquet").rsplit("-", 1)[-1]
    return {
        "metric": parts.get("metric"),
        "cluster": parts.get("cluster"),
        "date": parts.get("date"),
        "mode": mode,
        "rows": lake.num_rows(key),
        "path": lake.url(key),
    }
