"""Monitoring ingest: read an input, validate each metric, quarantine what fails, publish partitions.

``ingest_metrics_file(lake, fmt, cluster, input, day)`` is what the command line
(``python -m acme ingest-metrics``) and, task by task, the nightly DAG run:

- ``prometheus``: ``input`` is the server's base URL; every catalog metric with PromQL is fetched
  for the UTC ``day`` (required) at ``step_s``;
- ``exporter-text``: a dcgm-exporter scrape file, or a folder of them (``*.prom``, ``*.txt``,
  ``*.metrics``), see ``acme.metrics.exposition``;
- ``acmetrace-csv``: a wide CSV, or a folder of them, one metric per file (see
  ``acme.metrics.acmetrace_csv``).

Metrics are processed one at a time (a Seren-size metric-day is 13 M samples; holding one at a
time keeps the peak memory at a few hundred MB per metric). For each: validate, write the
input's quarantine and validation report, check the thresholds, then replace the metric's
day partitions with samples and rollups. A metric that fails its thresholds is not published
and the others are; the run then raises :class:`MetricsThresholdError` naming every failed one.

Artifacts keyed by the input (replaced by a re-run)::

    quarantine/metrics/cluster=<c>/date=<d>/<input_key>-<metric>.parquet
    validation/metrics/cluster=<c>/date=<d>/<input_key>.json
"""

from __future__ import annotations

import hashlib
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

from acme.errors import ConfigError, InputError, InputNotFoundError
from acme.metrics.validate import MetricsThresholdError

if TYPE_CHECKING:
    import pandas as pd

    from acme.clusters import Cluster
    from acme.lake import Lake
    from acme.metrics.catalog import Catalog
    from acme.metrics.storage import Samples

FORMATS = ("prometheus", "exporter-text", "acmetrace-csv")
SCRAPE_SUFFIXES = (".prom", ".txt", ".metrics")


def input_key(fmt: str, uri: str, day: date | None) -> str:
    digest = hashlib.sha1(f"{fmt}|{uri}|{day}".encode()).hexdigest()[:16]
    return f"{fmt}-{digest}"


def ingest_metrics_file(
    lake: Lake,
    fmt: str,
    cluster: str,
    input: str,
    day: date | str | None = None,
    *,
    step_s: int = 15,
    catalog: Catalog | None = None,
    metrics: list[str] | None = None,
    max_quarantine_share: float | None = None,
    min_coverage: float | None = None,
    expected_series: dict[str, int] | None = None,
    session: Any = None,
    client_options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Ingest one input (see the module doc); returns the run's summary."""
    from acme.metrics.catalog import load_catalog

    if fmt not in FORMATS:
        raise InputError(input, f"unknown metrics format {fmt!r}; expected one of {', '.join(FORMATS)}")
    if isinstance(day, str):
        day = date.fromisoformat(day)
    catalog = catalog or load_catalog()
    key = input_key(fmt, input, day)
    summary: dict[str, Any] = {
        "input": input, "format": fmt, "cluster": cluster, "day": day.isoformat() if day else None,
        "samples": 0, "series": 0, "quarantined": 0, "metrics": [], "partitions": [],
        "bytes": 0, "notes": [], "skipped_metrics": {},
    }  # fmt: skip
    reports: dict[str, Any] = {}
    failures: list[str] = []
    for spec_name, samples, rejects in _read_input(
        fmt, input, day, catalog, metrics, step_s, session, client_options, summary
    ):
        spec = catalog[spec_name]
        outcome = _ingest_metric(
            lake, catalog, spec, cluster, key, input, samples, day, step_s, rejects,
            (expected_series or {}).get(spec_name), max_quarantine_share, min_coverage,
        )  # fmt: skip
        reports[spec_name] = outcome["report"]
        summary["quarantined"] += outcome["quarantined"]
        if outcome.get("error"):
            failures.append(outcome["error"])
            continue
        summary["metrics"].append(spec_name)
        summary["samples"] += outcome["samples"]
        summary["series"] += outcome["series"]
        summary["partitions"].extend(p["path"] for p in outcome["partitions"])
        summary["bytes"] += sum(p["bytes"] for p in outcome["partitions"])
        summary.setdefault("per_metric", {})[spec_name] = {
            "samples": outcome["samples"],
            "bytes_per_sample": outcome["partitions"][0]["bytes_per_sample"]
            if outcome["partitions"]
            else None,
        }
    orphans = summary.pop("_orphan_rejects", None)
    if orphans is not None and len(orphans):  # malformed lines of an input without any catalog metric
        summary["quarantined"] += len(orphans)
        _write_parse_rejects(lake, cluster, key, day, orphans)
    summary["bytes_per_sample"] = (
        round(summary["bytes"] / summary["samples"], 3) if summary["samples"] else None
    )
    report_day = day or _first_day(reports)
    summary["validation"] = lake.write_json(
        f"validation/metrics/cluster={cluster}/date={report_day or 'undated'}/{key}.json",
        {"input": input, "format": fmt, "cluster": cluster, "day": day, "metrics": reports,
         "notes": summary["notes"], "skipped_metrics": summary["skipped_metrics"]},
    )  # fmt: skip
    if not reports:
        summary["notes"].append(f"{input}: no samples of any catalog metric")
        if day is not None:  # an idle GPU still reports: a day without any sample is an outage
            raise MetricsThresholdError(
                f"{input}: no samples of any catalog metric on {day}; nothing was published "
                "(is the exporter or the scrape down?)"
            )
    if failures:
        raise MetricsThresholdError("; ".join(failures))
    return summary


def _ingest_metric(
    lake,
    catalog,
    spec,
    cluster,
    key,
    source,
    samples,
    day,
    step_s,
    parse_rejects,
    expected,
    max_share,
    min_cov,
) -> dict[str, Any]:
    from acme.metrics.storage import split_by_day
    from acme.metrics.validate import check_thresholds, validate_samples

    outcome = validate_samples(samples, spec, catalog, day=day, step_s=step_s, expected_series=expected)
    report = outcome.report
    quarantined = outcome.quarantined
    if parse_rejects is not None and len(parse_rejects) and "node" not in parse_rejects:
        quarantined = _concat(quarantined, _rejects_as_quarantine(parse_rejects, spec.name))
        report["parse_rejects"] = len(parse_rejects)
    report["quarantine"] = _write_quarantine(
        lake, cluster, key, day or _first_day({spec.name: report}), spec.name, quarantined
    )
    result = {"report": report, "quarantined": len(quarantined), "samples": 0, "series": 0, "partitions": []}
    try:
        check_thresholds(report, source, max_share, min_cov)
    except MetricsThresholdError as exc:
        result["error"] = str(exc)
        return result
    by_day = split_by_day(outcome.accepted)
    if day is not None:
        by_day = {d: s for d, s in by_day.items() if d == day}
    for part_day, part in sorted(by_day.items()):
        result["partitions"].append(_publish(lake, spec, cluster, part_day, part, source))
    result["samples"] = len(outcome.accepted)
    result["series"] = report["series"]
    return result


def _publish(lake, spec, cluster, day, samples, source):
    from acme.metrics.storage import publish_day

    return publish_day(lake, spec, cluster, day, samples, source)


def _read_input(fmt, uri, day, catalog, metrics, step_s, session, client_options, summary):
    """Yield (metric, samples, parse rejects) one metric at a time."""
    if fmt == "prometheus":
        yield from _read_prometheus(uri, day, catalog, metrics, step_s, session, client_options)
    elif fmt == "exporter-text":
        yield from _read_exporter_text(uri, catalog, metrics, summary)
    else:
        yield from _read_wide_csv(uri, day, catalog, metrics, summary)


def _read_prometheus(uri, day, catalog, metrics, step_s, session, client_options):
    from datetime import UTC, datetime

    from acme.metrics.prometheus import PrometheusClient, matrix_to_samples

    if day is None:
        raise InputError(uri, "a Prometheus ingest needs the UTC day to fetch (--day)")
    client = PrometheusClient(uri, session=session, **(client_options or {}))
    start = datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp()
    for spec in [catalog[m] for m in metrics] if metrics else [s for s in catalog if s.promql]:
        yield spec.name, matrix_to_samples(client.fetch(spec, start, start + 86400, step_s), spec), None


def _read_exporter_text(uri, catalog, metrics, summary):
    from acme.metrics.exposition import read_exposition_files
    from acme.metrics.storage import concat_samples

    path = Path(uri)
    if not path.exists():
        raise InputNotFoundError(uri, "no such file or folder (not arrived yet?)")
    files = sorted(p for p in path.iterdir() if p.suffix in SCRAPE_SUFFIXES) if path.is_dir() else [path]
    if not files:
        raise InputError(uri, f"no scrape files ({', '.join(SCRAPE_SUFFIXES)}) in the folder")
    results = read_exposition_files(files, catalog)
    rejects = _concat_all([r.rejects for r in results])
    for result in results:
        for name, count in result.skipped_metrics.items():
            summary["skipped_metrics"][name] = summary["skipped_metrics"].get(name, 0) + count
    names = sorted({m for r in results for m in r.samples})
    if metrics:
        names = [m for m in names if m in metrics]
    for i, name in enumerate(names):
        parts = [r.samples[name] for r in results if name in r.samples]
        # parse rejects belong to the file, not to a metric: reported once, with the first metric
        yield name, concat_samples(parts), rejects if i == 0 else None
    if not names and rejects is not None and len(rejects):
        summary["notes"].append(f"{uri}: {len(rejects)} malformed line(s) and no sample of a catalog metric")
        summary["_orphan_rejects"] = rejects


def _read_wide_csv(uri, day, catalog, metrics, summary):
    from acme.metrics.acmetrace_csv import metric_of_file, parse_wide_csv

    path = Path(uri)
    if not path.exists():
        raise InputNotFoundError(uri, "no such file or folder (not arrived yet?)")
    files = sorted(path.glob("*.csv")) if path.is_dir() else [path]
    if not files:
        raise InputError(uri, "no .csv files in the folder")
    for file in files:
        spec = metric_of_file(file, catalog)
        if metrics and spec.name not in metrics:
            continue
        parsed = parse_wide_csv(file, spec, source_file=str(file), day=day)
        summary["notes"].extend(parsed.notes)
        yield spec.name, parsed.samples, parsed.rejects


def _rejects_as_quarantine(rejects: pd.DataFrame, metric: str) -> pd.DataFrame:
    import pandas as pd

    return pd.DataFrame(
        {
            "metric": metric,
            "node": None,
            "gpu": pd.array([None] * len(rejects), dtype="Int16"),
            "uuid": None,
            "timestamp": pd.Series([pd.NaT] * len(rejects), dtype="datetime64[ns, UTC]"),
            "value": float("nan"),
            "reason": rejects["reason"].to_numpy(),
            "source_line": pd.array(rejects["source_line"].to_numpy(), dtype="Int64"),
            "record": rejects["record"].to_numpy(),
        }
    )


def _concat(a, b):
    import pandas as pd

    if a is None or not len(a):
        return b
    if b is None or not len(b):
        return a
    return pd.concat([a, b], ignore_index=True)


def _concat_all(frames):
    result = None
    for frame in frames:
        result = _concat(result, frame)
    return result


def _write_quarantine(lake, cluster, key, day, metric, quarantined) -> str | None:
    """Replace this input's quarantine for one metric (removing a stale one when nothing failed)."""
    import pyarrow as pa

    target = f"quarantine/metrics/cluster={cluster}/date={day or 'undated'}/{key}-{metric}.parquet"
    if quarantined is None or not len(quarantined):
        if lake.exists(target):
            lake.delete_prefix(target)
        return None
    frame = quarantined.reset_index(drop=True).astype(
        {"node": "object", "uuid": "object", "record": "object"}
    )
    return lake.write_parquet(target, pa.Table.from_pandas(frame, preserve_index=False))


def _write_parse_rejects(lake, cluster, key, day, rejects) -> str:
    import pyarrow as pa

    target = f"quarantine/metrics/cluster={cluster}/date={day or 'undated'}/{key}-_parse.parquet"
    return lake.write_parquet(
        target, pa.Table.from_pandas(rejects.reset_index(drop=True), preserve_index=False)
    )


def _first_day(reports: dict[str, Any]) -> str | None:
    days = sorted(d for r in reports.values() for d in r.get("days", []))
    return days[0] if days else None


def read_samples_frame(
    lake: Lake, metric: str, cluster: str, day: date, unit: str | None = None
) -> pd.DataFrame:
    """The canonical long form of a stored metric-day (for small reads and tests)."""
    from acme.metrics.catalog import load_catalog
    from acme.metrics.storage import read_samples

    samples: Samples = read_samples(lake, metric, cluster, day)
    return samples.to_frame(cluster, unit or load_catalog()[metric].unit)


def plan_metric_inputs(
    clusters: dict[str, Cluster],
    day: date,
    cluster: str = "all",
    source: str = "configured",
    input_uri: str | None = None,
) -> list[dict[str, Any]]:
    """One dict per selected cluster: cluster, format, input, day, step_s.

    ``source`` other than ``configured`` reads ``input_uri`` in that format (a manual run over
    an exported file); clusters without a metrics source are skipped unless asked for by name.
    """
    from acme.clusters import METRIC_FORMATS, selected_clusters

    planned = []
    for name in selected_clusters(clusters, cluster, source, METRIC_FORMATS, input_uri):
        configured = clusters[name].metrics
        if source != "configured":
            step = configured.step_s if configured else 15
            planned.append(
                {
                    "cluster": name,
                    "format": source,
                    "input": input_uri,
                    "day": day.isoformat(),
                    "step_s": step,
                }
            )
        elif configured is not None:
            planned.append(
                {
                    "cluster": name,
                    "format": configured.format,
                    "input": input_uri or configured.input_for(name, day),
                    "day": day.isoformat(),
                    "step_s": configured.step_s,
                }
            )
        elif cluster != "all":
            raise ConfigError(f"cluster {name!r} has no metrics source in the cluster configuration")
    return planned
