"""Monitoring ingest: read an input, validate each metric, quarantine what fails, publish partitions.

``ingest_metrics_file(lake, fmt, cluster, input, day)`` is what the command line
(``python -m acme ingest-metrics``) and, task by task, the nightly DAG run:

- ``prometheus``: ``input`` is the server's base URL; every catalog metric with PromQL is fetched
  for the UTC ``day`` (required) at ``step_s``;
- ``exporter-text``: a dcgm-exporter scrape file, or a folder of them (``*.prom``, ``*.txt``,
  ``*.metrics``), see ``acme.metrics.exposition``; ``scrape_time`` (``--scrape-time``) dates the
  samples that carry no timestamp, ``node`` (``--node``) names the host of samples that carry no
  node label;
- ``prometheus-json``: a saved answer of ``/api/v1/query_range`` (matrix) or ``/api/v1/query``
  (instant vector, snapshot mode only), its series routed to catalog metrics by ``__name__``
  (``metric``, ``--metric``, names the metric of series without one, e.g. ``100 * X``);
- ``acmetrace-csv``: a wide CSV, or a folder of them, one metric per file (see
  ``acme.metrics.acmetrace_csv``).

Two modes. **Daily** (the default): an input is a day of telemetry, checked for coverage and
stored as day partitions with rollups. **Snapshot** (``snapshot=True``, ``--snapshot``): one-off
scrapes or instant queries, checked for ranges, NaN and duplicates but not for coverage, and
stored under ``metrics_snapshots/`` (one file per metric, day and input, replaced by a re-run);
a Prometheus snapshot is an instant query at ``scrape_time``.

An input ends one of two ways: something is stored, every sample accounted for (published,
skipped as a metric outside the catalog, or quarantined with its reason), or it is refused with
one line saying what is missing and which flag or setting supplies it. It never succeeds with
nothing stored.

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
from collections.abc import Callable, Iterator
from datetime import date, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from acme import lake_keys
from acme.errors import ConfigError, InputError, InputNotFoundError
from acme.metrics.formats import FORMAT_NAMES, check_cluster_source
from acme.metrics.node_groups import check_node_groups, group_label
from acme.metrics.validate import MetricsThresholdError

if TYPE_CHECKING:
    import pandas as pd

    from acme.clusters import Cluster
    from acme.lake import Lake
    from acme.metrics.catalog import Catalog

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
    snapshot: bool = False,
    scrape_time: str | None = None,
    node: str | None = None,
    metric: str | None = None,
    node_group: tuple[int, int] | None = None,
) -> dict[str, Any]:
    """Ingest one input (see the module doc); returns the run's summary. ``node_group`` ``(g, N)``
    ingests only the nodes of group ``g`` of ``N`` (``acme.metrics.node_groups``)."""
    from acme.metrics.catalog import load_catalog

    if isinstance(day, str):
        day = date.fromisoformat(day)
    catalog = catalog or load_catalog()
    scrape_ms = _checked_options(fmt, input, scrape_time, catalog, metric)
    key = input_key(fmt, input, day) if not snapshot else input_key(f"{fmt}-snapshot", input, day)
    group_key = key if node_group is None else f"{key}.{group_label(node_group)}"
    summary: dict[str, Any] = {
        "input": input, "format": fmt, "cluster": cluster, "day": day.isoformat() if day else None,
        "mode": "snapshot" if snapshot else "daily", "samples": 0, "series": 0, "quarantined": 0,
        "metrics": [], "partitions": [], "bytes": 0, "notes": [], "skipped_metrics": {}, "time_sources": {},
    }  # fmt: skip
    options = {
        "snapshot": snapshot,
        "scrape_ms": scrape_ms,
        "node": node,
        "metric": metric,
        "node_group": node_group,
    }
    reports: dict[str, Any] = {}
    failures: list[str] = []
    for spec_name, samples, rejects in _read_input(
        fmt, input, day, catalog, metrics, step_s, session, client_options, summary, options
    ):
        outcome = _ingest_metric(
            lake, catalog, catalog[spec_name], cluster, group_key, input, samples, day, step_s, rejects,
            (expected_series or {}).get(spec_name), max_quarantine_share, min_coverage, snapshot, node_group,
        )  # fmt: skip
        reports[spec_name] = outcome["report"]
        summary["quarantined"] += outcome["quarantined"]
        if outcome.get("error"):
            failures.append(outcome["error"])
        else:
            _add_outcome(summary, spec_name, outcome, snapshot)
    _write_orphan_rejects(lake, cluster, group_key, day, summary)
    summary["bytes_per_sample"] = (
        round(summary["bytes"] / summary["samples"], 3) if summary["samples"] else None
    )
    summary["validation"] = lake.write_json(
        lake_keys.validation_metrics(cluster, day or _first_day(reports), f"{group_key}.json"),
        {"input": input, "format": fmt, "cluster": cluster, "day": day, "metrics": reports,
         "notes": summary["notes"], "skipped_metrics": summary["skipped_metrics"], "mode": summary["mode"],
         "time_sources": summary["time_sources"]},
    )  # fmt: skip
    if node_group is None:
        _raise_unless_stored(summary, reports, failures, input, day, snapshot)
    elif failures:  # a group may hold no node of the input: the merge checks that some group stored samples
        raise MetricsThresholdError("; ".join(failures))
    summary["input_key"] = key
    return summary


def _checked_options(
    fmt: str, input: str, scrape_time: str | None, catalog: Catalog, metric: str | None
) -> int | None:
    """Refuse an unknown format, scrape time or metric before reading anything; the scrape time in ms."""
    from acme.timestamps import parse_scrape_time

    if fmt not in _READERS:
        raise InputError(input, f"unknown metrics format {fmt!r}; expected one of {', '.join(FORMAT_NAMES)}")
    if metric is not None:
        catalog[metric]  # an unknown name fails here, listing the catalog
    if scrape_time is None:
        return None
    scrape_ms = parse_scrape_time(str(scrape_time))
    if scrape_ms is None:
        raise InputError(input, f"--scrape-time {scrape_time!r} is neither RFC 3339 nor epoch seconds")
    return scrape_ms


def _add_outcome(summary: dict[str, Any], name: str, outcome: dict[str, Any], snapshot: bool) -> None:
    """Count one published metric in the run's summary."""
    if snapshot and not outcome["samples"]:
        summary["notes"].append(f"{name}: no sample to store")
        return
    summary["metrics"].append(name)
    summary["samples"] += outcome["samples"]
    summary["series"] += outcome["series"]
    summary["partitions"].extend(p["path"] for p in outcome["partitions"])
    summary["bytes"] += sum(p["bytes"] for p in outcome["partitions"])
    first = outcome["partitions"][0] if outcome["partitions"] else None
    summary.setdefault("per_metric", {})[name] = {
        "samples": outcome["samples"],
        "bytes_per_sample": first["bytes_per_sample"] if first else None,
    }


def _write_orphan_rejects(
    lake: Lake, cluster: str, key: str, day: date | None, summary: dict[str, Any]
) -> None:
    """Malformed lines of an input without any catalog metric: quarantined on their own."""
    orphans = summary.pop("_orphan_rejects", None)
    if orphans is not None and len(orphans):
        summary["quarantined"] += len(orphans)
        _write_parse_rejects(lake, cluster, key, day, orphans)


def _raise_unless_stored(
    summary: dict[str, Any], reports: dict[str, Any], failures: list[str], input: str, day: date | None,
    snapshot: bool,
) -> None:  # fmt: skip
    """An input that stored nothing, or a metric over its thresholds, fails the run, saying why."""
    if not reports:
        summary["notes"].append(f"{input}: no samples of any catalog metric")
        if day is not None:  # an idle GPU still reports: a day without any sample is an outage
            raise MetricsThresholdError(
                f"{input}: no samples of any catalog metric on {day}; nothing was published "
                "(is the exporter or the scrape down?)"
            )
    if failures:
        raise MetricsThresholdError("; ".join(failures))
    if not summary["partitions"]:
        raise InputError(input, _nothing_stored(summary, day, snapshot))


def _nothing_stored(summary: dict[str, Any], day: date | None, snapshot: bool) -> str:
    """The one line saying why an input stored nothing and what supplies the missing part."""
    if summary["skipped_metrics"] and not summary["metrics"]:
        return _no_catalog_metric(summary["skipped_metrics"])
    if day is not None and not snapshot:
        return f"no sample of a catalog metric falls on {day}; nothing was stored"
    return "no sample of a catalog metric to store; nothing was stored"


def _no_catalog_metric(skipped: dict[str, int]) -> str:
    names = sorted(skipped, key=lambda n: (-skipped[n], n))
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    return (
        f"none of its {sum(skipped.values())} sample(s) is of a catalog metric (its metrics: {shown}); "
        "nothing was stored. The catalog (include/metrics/metrics.yaml, or ACME_METRICS_CATALOG) names "
        "the exporter metrics it stores under `exporter:`"
    )


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
    snapshot=False,
    node_group=None,
) -> dict[str, Any]:
    from acme import lake_keys
    from acme.metrics.storage import publish_snapshot, split_by_day
    from acme.metrics.validate import check_thresholds, validate_samples

    outcome = validate_samples(
        samples, spec, catalog, day=None if snapshot else day, step_s=step_s, expected_series=expected
    )
    report = outcome.report
    if snapshot:
        report["mode"] = "snapshot"  # coverage is not checked: a snapshot is not a day of scrapes
    quarantined = outcome.quarantined
    if parse_rejects is not None and len(parse_rejects) and "node" not in parse_rejects:
        quarantined = _concat(quarantined, _rejects_as_quarantine(parse_rejects, spec.name))
        report["parse_rejects"] = len(parse_rejects)
    report["quarantine"] = _write_quarantine(
        lake, cluster, key, day or _first_day({spec.name: report}), spec.name, quarantined
    )
    result: dict[str, Any] = {
        "report": report, "quarantined": len(quarantined), "samples": 0, "series": 0, "partitions": []
    }  # fmt: skip
    try:
        check_thresholds(report, source, max_share, 0.0 if snapshot else min_cov)
    except MetricsThresholdError as exc:
        result["error"] = str(exc) + _snapshot_hint(samples, report)
        return result
    by_day = split_by_day(outcome.accepted)
    if day is not None:
        by_day = {d: s for d, s in by_day.items() if d == day}
    for part_day, part in sorted(by_day.items()):
        if snapshot:
            result["partitions"].append(publish_snapshot(lake, spec, cluster, part_day, part, key, source))
        else:
            result["partitions"].append(_publish(lake, spec, cluster, part_day, part, source, node_group))
    if snapshot:  # a re-run with another --scrape-time replaces the snapshot it dated elsewhere
        written = {lake_keys.metric_snapshot(spec.name, cluster, d, key) for d in by_day}
        for stale in lake.list(lake_keys.metric_snapshots(spec.name, cluster)):
            if stale.endswith(f"/{key}.parquet") and stale not in written:
                lake.remove(stale)
    result["samples"] = sum(p["samples"] for p in result["partitions"]) if snapshot else len(outcome.accepted)
    result["series"] = report["series"]
    return result


def _snapshot_hint(samples, report) -> str:
    """For a coverage failure of a handful of scrapes: say that snapshot mode stores them."""
    import numpy as np

    times = len(np.unique(samples.ts_ms)) if len(samples) else 0
    expected = report["coverage"]["expected_per_series"]
    if 0 < times <= max(1, expected // 100):
        return (
            f" (the input holds {times} scrape time(s), not a day of scrapes: a one-off scrape is "
            "stored with --snapshot)"
        )
    return ""


def _publish(lake, spec, cluster, day, samples, source, node_group=None):
    from acme.metrics.node_groups import publish_group_day
    from acme.metrics.storage import publish_day

    if node_group is not None:
        return publish_group_day(lake, spec, cluster, day, samples, source, node_group)
    return publish_day(lake, spec, cluster, day, samples, source)


def _read_input(fmt, uri, day, catalog, metrics, step_s, session, client_options, summary, options):
    """Yield (metric, samples, parse rejects) one metric at a time (of the node group's nodes only, when
    one is given: the wide-CSV reader reads only their columns, the others are filtered here)."""
    fetch = {"step_s": step_s, "session": session, "client_options": client_options}
    readings = _READERS[fmt](uri, day, catalog, metrics, summary, options=options, fetch=fetch)
    group = options["node_group"]
    if group is None:
        yield from readings
        return
    from acme.metrics.node_groups import select_node_group

    for name, samples, rejects in readings:
        if fmt != "acmetrace-csv":  # file-level rejects are quarantined once, by the first group
            samples, rejects = select_node_group(samples, group), rejects if group[0] == 0 else None
        if len(samples) or (rejects is not None and len(rejects)):
            yield name, samples, rejects
        else:
            summary["notes"].append(f"{name}: no sample of node group {group[0]} of {group[1]}")


def _read_server(uri, day, catalog, metrics, summary, *, options, fetch):
    for name, samples, rejects in _read_prometheus(
        uri, day, catalog, metrics, fetch["step_s"], fetch["session"], fetch["client_options"], options
    ):
        sources = summary["time_sources"]
        sources["sample timestamp"] = sources.get("sample timestamp", 0) + len(samples)
        yield name, samples, rejects


def _read_prometheus(uri, day, catalog, metrics, step_s, session, client_options, options):
    from datetime import UTC, datetime

    from acme.metrics.prometheus import PrometheusClient, matrix_to_samples, render_query, vector_to_matrix

    chosen = [catalog[m] for m in metrics] if metrics else [s for s in catalog if s.promql]
    client = PrometheusClient(uri, session=session, **(client_options or {}))
    if options["snapshot"]:
        if options["scrape_ms"] is None:
            raise InputError(uri, "a Prometheus snapshot needs the time to query: give it with --scrape-time")
        at = options["scrape_ms"] / 1000
        for spec in chosen:
            result = client.query_instant(render_query(spec.promql, None), at)
            yield spec.name, matrix_to_samples(vector_to_matrix(result), spec, options["node"]), None
        return
    if day is None:
        raise InputError(uri, "a Prometheus ingest needs the UTC day to fetch (--day), or --snapshot")
    start = datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp()
    for spec in chosen:
        result = client.fetch(spec, start, start + 86400, step_s)
        yield spec.name, matrix_to_samples(result, spec, options["node"]), None


def _read_saved_answer(uri, day, catalog, metrics, summary, *, options, **_unused):
    """A saved ``/api/v1/query_range`` or ``/api/v1/query`` answer: its series per catalog metric."""
    from acme.metrics.prometheus import matrix_to_samples

    groups = _series_by_metric(uri, _saved_series(uri, options), catalog, summary, options)
    _check_node_labels(uri, groups, catalog, options)
    for name in sorted(groups):
        if metrics and name not in metrics:
            continue
        spec = catalog[name]
        samples = matrix_to_samples(groups[name], spec, options["node"])
        if not options["metric"]:
            samples.value = samples.value * spec.scale  # raw exporter values, as in a scrape
        sources = summary["time_sources"]
        sources["sample timestamp"] = sources.get("sample timestamp", 0) + len(samples)
        yield name, samples, None


def _saved_series(uri: str, options: dict[str, Any]) -> list[dict]:
    """The series of a saved answer, after checking that it is a usable one (status, result type)."""
    import json

    from acme.metrics.prometheus import check_answer, vector_to_matrix

    path = Path(uri)
    if not path.exists():
        raise InputNotFoundError(uri, "no such file (not arrived yet?)")
    try:
        body = json.loads(path.read_text(errors="replace"))
    except ValueError as exc:
        raise InputError(uri, f"not a Prometheus API answer: not JSON ({exc})") from None
    if not isinstance(body, dict) or "status" not in body:
        raise InputError(uri, 'not a Prometheus API answer: no "status" field')
    if body["status"] != "success":
        raise InputError(
            uri,
            f"the saved answer is an error, nothing to store: status {body['status']!r} "
            f"({body.get('errorType')}): {body.get('error')}",
        )
    data = body.get("data") or {}
    kind = data.get("resultType") if isinstance(data, dict) else None
    if kind == "vector" and not options["snapshot"]:
        raise InputError(uri, "an instant vector is one point in time, not a day: store it with --snapshot")
    if kind not in ("matrix", "vector"):
        raise InputError(uri, f"result type {kind!r} holds no series; only matrix or vector answers do")
    problem = check_answer(data, None, kind, None, 0)
    if problem:
        raise InputError(uri, f"not a usable Prometheus answer: {problem}")
    result = data.get("result") or []
    if not result:
        raise InputError(uri, "the answer holds no series (its query matched nothing); nothing to store")
    return result if kind == "matrix" else vector_to_matrix(result)


def _series_by_metric(uri, series, catalog, summary, options) -> dict[str, list[dict]]:
    """The series routed to catalog metrics by ``__name__`` (or ``--metric``); others skipped and counted."""
    by_exporter = catalog.by_exporter_name()
    chosen = catalog[options["metric"]] if options["metric"] else None
    groups: dict[str, list[dict]] = {}
    unnamed = 0
    for item in series:
        name = item["metric"].get("__name__")
        points = len(item.get("values") or [])
        summary["samples_in"] = summary.get("samples_in", 0) + points
        spec = by_exporter.get(name) if name is not None else chosen
        if name is None and chosen is None:
            unnamed += 1
        elif spec is None or (chosen is not None and spec.name != chosen.name):
            summary["skipped_metrics"][name] = summary["skipped_metrics"].get(name, 0) + points
        else:
            groups.setdefault(spec.name, []).append(item)
    if unnamed:
        raise InputError(
            uri,
            f"{unnamed} series carry no __name__ (an expression such as 100 * X drops it): "
            "name their catalog metric with --metric",
        )
    if not groups:
        raise InputError(uri, _no_catalog_metric(summary["skipped_metrics"]))
    return groups


def _check_node_labels(uri, groups, catalog, options) -> None:
    from acme.metrics.exposition import series_key

    for name, items in groups.items():
        spec = catalog[name]
        nodeless = sum(series_key(i["metric"], spec, options["node"]) is None for i in items)
        if nodeless:
            raise InputError(
                uri,
                f"{nodeless} series of {spec.exporter or spec.name} carry no node label "
                f"({', '.join(spec.labels['node'])}): give the host with --node",
            )


def _read_exporter_text(uri, day, catalog, metrics, summary, *, options, **_unused):
    from acme.metrics.exposition import read_exposition_files
    from acme.metrics.storage import concat_samples

    results = read_exposition_files(
        _scrape_files(uri), catalog, scrape_time_ms=options["scrape_ms"], default_node=options["node"]
    )
    rejects = _concat_all([r.rejects for r in results])
    _count_scrapes(results, summary)
    _refuse_nodeless(uri, rejects)
    names = sorted({m for r in results for m in r.samples})
    if not names and summary["skipped_metrics"]:
        raise InputError(uri, _no_catalog_metric(summary["skipped_metrics"]))
    if day is not None and names:
        _refuse_other_days(
            uri, day, [r.samples[m].ts_ms for r in results for m in r.samples], summary, options
        )
    if metrics:
        names = [m for m in names if m in metrics]
    for i, name in enumerate(names):
        parts = [r.samples[name] for r in results if name in r.samples]
        # parse rejects belong to the file, not to a metric: reported once, with the first metric
        yield name, concat_samples(parts), rejects if i == 0 else None
    if not names and rejects is not None and len(rejects):
        summary["notes"].append(f"{uri}: {len(rejects)} malformed line(s) and no sample of a catalog metric")
        summary["_orphan_rejects"] = rejects


def _scrape_files(uri: str) -> list[Path]:
    path = Path(uri)
    if not path.exists():
        raise InputNotFoundError(uri, "no such file or folder (not arrived yet?)")
    files = sorted(p for p in path.iterdir() if p.suffix in SCRAPE_SUFFIXES) if path.is_dir() else [path]
    if not files:
        raise InputError(uri, f"no scrape files ({', '.join(SCRAPE_SUFFIXES)}) in the folder")
    return files


def _count_scrapes(results, summary) -> None:
    """Samples read, metrics skipped (outside the catalog) and where the samples' times came from."""
    summary["samples_in"] = sum(r.samples_in for r in results)
    for result in results:
        for name, count in result.summed.items():  # parts of a stored sample (the PSUs of a node)
            summary.setdefault("summed_samples", {})
            summary["summed_samples"][name] = summary["summed_samples"].get(name, 0) + count
        for name, count in result.skipped_metrics.items():
            summary["skipped_metrics"][name] = summary["skipped_metrics"].get(name, 0) + count
        for source, count in result.time_sources.items():
            summary["time_sources"][source] = summary["time_sources"].get(source, 0) + count


def _refuse_nodeless(uri, rejects) -> None:
    """Samples without a node label refuse the input, naming --node."""
    from acme.metrics.exposition import NO_NODE

    if rejects is None or not len(rejects):
        return
    nodeless = rejects["reason"].str.startswith(NO_NODE)
    if nodeless.any():
        first = rejects[nodeless].iloc[0]
        raise InputError(
            uri,
            f"{int(nodeless.sum())} sample(s) of catalog metrics carry no node label (first at "
            f"{first['source_file']}:{first['source_line']}): a scrape taken at one host's exporter "
            "needs that host's name, give it with --node",
        )


def _refuse_other_days(uri, day, arrays, summary, options) -> None:
    """An ingest for ``day`` whose samples all fall on other days says where their times came from."""
    import numpy as np

    from acme.metrics.storage import DAY_MS

    start = (day - date(1970, 1, 1)).days * DAY_MS
    if any(np.any((ts >= start) & (ts < start + DAY_MS)) for ts in arrays):
        return
    first = date(1970, 1, 1) + timedelta(milliseconds=min(int(ts.min()) for ts in arrays))
    last = date(1970, 1, 1) + timedelta(milliseconds=max(int(ts.max()) for ts in arrays))
    found = str(first) if first == last else f"{first} to {last}"
    sources = ", ".join(f"{k}: {v}" for k, v in summary["time_sources"].items())
    raise InputError(
        uri,
        f"no sample falls on {day}: the samples' times ({sources}) fall on {found}; "
        "give the time the scrape was taken with --scrape-time"
        + ("" if options["snapshot"] else ", or store a one-off scrape with --snapshot"),
    )


def _read_wide_csv(uri, day, catalog, metrics, summary, *, options, **_unused):
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
        parsed = parse_wide_csv(file, spec, source_file=str(file), day=day, node_group=options["node_group"])
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

    target = lake_keys.quarantine_metrics(cluster, day, f"{key}-{metric}.parquet")
    if quarantined is None or not len(quarantined):
        lake.remove(target)
        return None
    frame = quarantined.reset_index(drop=True).astype(
        {"node": "object", "uuid": "object", "record": "object"}
    )
    return lake.write_parquet(target, pa.Table.from_pandas(frame, preserve_index=False))


def _write_parse_rejects(lake, cluster, key, day, rejects) -> str:
    import pyarrow as pa

    target = lake_keys.quarantine_metrics(cluster, day, f"{key}-_parse.parquet")
    return lake.write_parquet(
        target, pa.Table.from_pandas(rejects.reset_index(drop=True), preserve_index=False)
    )


def _first_day(reports: dict[str, Any]) -> str | None:
    days = sorted(d for r in reports.values() for d in r.get("days", []))
    return days[0] if days else None


def ingest_planned_input(lake: Lake, planned: dict[str, Any]) -> dict[str, Any]:
    """Ingest one input of :func:`plan_metric_inputs`'s plan; returns the run's manifest (cluster, day,
    mode, samples, series, quarantined, metrics, partitions), what the DAG's Asset event carries."""
    group = planned.get("node_group")
    summary = ingest_metrics_file(
        lake, planned["format"], planned["cluster"], planned["input"], planned["day"],
        step_s=planned["step_s"], snapshot=planned["snapshot"], scrape_time=planned["scrape_time"],
        node=planned["node"], node_group=None if group is None else (int(group[0]), int(group[1])),
    )  # fmt: skip
    keys = ("cluster", "day", "mode", "samples", "series", "quarantined", "metrics", "partitions")
    manifest = {key: summary[key] for key in keys}
    if group is not None:  # what the merge of the groups (acme.metrics.node_groups) needs
        manifest |= {"node_group": list(group), "input_key": summary["input_key"], "bytes": summary["bytes"]}
    return manifest


def plan_metric_inputs(
    clusters: dict[str, Cluster],
    day: date,
    cluster: str = "all",
    source: str = "configured",
    input_uri: str | None = None,
    *,
    snapshot: bool | None = None,
    scrape_time: str | None = None,
    node: str | None = None,
    node_groups: int | None = None,
) -> list[dict[str, Any]]:
    """One dict per selected cluster: cluster, format, input, day, step_s, snapshot, scrape_time, node
    (and, with ``node_groups`` N > 1, the Param or else the cluster's ``metrics.node_groups``, N dicts
    per cluster, each with its ``node_group`` ``[g, N]``: see ``acme.metrics.node_groups``).

    ``source`` other than ``configured`` reads ``input_uri`` in that format (a manual run over
    an exported file); clusters without a metrics source are skipped unless asked for by name.
    ``snapshot``, ``scrape_time`` and ``node`` (the manual-run Params, named as the CLI's flags
    ``--snapshot``, ``--scrape-time``, ``--node``) override the cluster's settings when not None
    (a manual ``source`` takes only these, not the cluster's); ``{ds}`` in a scrape time is the
    run's UTC day.
    """
    from acme.clusters import MetricSource, check_scrape_time, selected_clusters

    if scrape_time is not None:
        scrape_time = check_scrape_time(scrape_time, "Param scrape_time (--scrape-time)")
    if node is not None and not str(node).strip():
        node = None
    planned = []
    for name in selected_clusters(clusters, cluster, source, FORMAT_NAMES, input_uri):
        configured = clusters[name].metrics
        check_cluster_source(clusters[name])
        if source != "configured":
            settings = MetricSource(source, str(input_uri), configured.step_s if configured else 15)
        elif configured is not None:
            settings = configured
        elif cluster != "all":
            raise ConfigError(f"cluster {name!r} has no metrics source in the cluster configuration")
        else:
            continue
        chosen_time = scrape_time if scrape_time is not None else settings.scrape_time
        groups = check_node_groups(node_groups, "Param node_groups") if node_groups else settings.node_groups
        planned += _per_node_group(
            {
                "cluster": name,
                "format": settings.format,
                "input": input_uri or settings.input_for(name, day),
                "day": day.isoformat(),
                "step_s": settings.step_s,
                "snapshot": settings.snapshot if snapshot is None else bool(snapshot),
                "scrape_time": None if chosen_time is None else chosen_time.format(ds=day.isoformat()),
                "node": node if node is not None else settings.node,
            },
            groups,
        )
    return planned


def _per_node_group(planned: dict[str, Any], groups: int) -> list[dict[str, Any]]:
    """The planned input as one task, or as one task per node group (a snapshot is never split)."""
    if groups == 1 or planned["snapshot"]:
        return [planned]
    return [{**planned, "node_group": [index, groups]} for index in range(groups)]


# The reader of each format of ``acme.metrics.formats`` (a test keeps the two tables the same).
_READERS: dict[str, Callable[..., Iterator[tuple[str, Any, Any]]]] = {
    "prometheus": _read_server,
    "prometheus-json": _read_saved_answer,
    "exporter-text": _read_exporter_text,
    "acmetrace-csv": _read_wide_csv,
}
