"""Cluster configuration (``include/config/clusters.yaml``): where each cluster's jobs come from."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date
from functools import lru_cache
from pathlib import Path

from acme import settings
from acme.errors import ConfigError

_CLUSTER_NAME = re.compile(r"[a-z][a-z0-9_-]{0,62}")


def is_cluster_name(name: object) -> bool:
    """Whether ``name`` is a valid cluster name: it becomes a lake path component (``cluster=<name>``)."""
    return isinstance(name, str) and _CLUSTER_NAME.fullmatch(name) is not None


@dataclass(frozen=True)
class JobSource:
    format: str
    input: str | None = None  # path/URL pattern with {ds}, {cluster}, {include}
    command: tuple[str, ...] | None = None  # live sacct: the command to prefix the sacct arguments with
    fields: tuple[str, ...] | None = None
    timezone: str = "UTC"
    delimiter: str = "|"  # sacct --delimiter of the exported files

    def input_for(self, cluster: str, day: date) -> str:
        if self.input is None:
            raise ConfigError(f"cluster {cluster}: jobs.input is not set")
        return self.input.format(ds=day.isoformat(), cluster=cluster, include=settings.project().include_dir)


METRIC_SETTINGS = ("format", "input", "step_s", "snapshot", "scrape_time", "node", "node_groups")


@dataclass(frozen=True)
class MetricSource:
    """A cluster's ``metrics`` settings; each has a flag of ``python -m acme ingest-metrics`` and a
    manual-run Param of ``ingest_metrics`` (``scrape_time`` is ``--scrape-time``), but ``node_groups``,
    a Param only (it splits the DAG's work into tasks)."""

    format: str
    input: str  # Prometheus base URL, or a path/URL pattern with {ds}, {cluster}, {include}
    step_s: int = 15
    snapshot: bool = False  # one-off scrapes / instant queries: no daily coverage check
    scrape_time: str | None = None  # time of samples without a timestamp (RFC 3339 or epoch s), may use {ds}
    node: str | None = None  # host of samples without a node label (a scrape taken at one exporter)
    node_groups: int = 1  # tasks a day is split into by node (acme.metrics.node_groups); 1 = one task

    def input_for(self, cluster: str, day: date) -> str:
        return self.input.format(ds=day.isoformat(), cluster=cluster, include=settings.project().include_dir)


@dataclass(frozen=True)
class Cluster:
    name: str
    jobs: JobSource
    metrics: MetricSource | None = None  # None: this cluster's telemetry is not ingested
    # Where this cluster's training jobs keep their checkpoints, with {lake}, {cluster}, {job_id}; None:
    # ACME_CHECKPOINT_URI_PATTERN (acme.recovery.checkpoint_location).
    checkpoint_uri_pattern: str | None = None
    # Where this cluster's hung training jobs write their Flight Recorder dumps, same placeholders; None:
    # ACME_FLIGHT_RECORDER_URI_PATTERN (acme.recovery.checkpoint_location.flight_recorder_location).
    flight_recorder_uri_pattern: str | None = None
    # The configuration file it comes from: the areas' errors about its settings name it.
    source_file: str = ""

    @property
    def where(self) -> str:
        return f"{self.source_file}: cluster {self.name!r}"


def selected_clusters(
    clusters: dict[str, Cluster], cluster: str, source: str, formats: tuple[str, ...], input_uri: str | None
) -> list[str]:
    """The cluster names a run covers, after checking its Params (``all`` or one name; a
    ``source`` other than ``configured`` must be one of ``formats`` and come with an input)."""
    if cluster != "all" and cluster not in clusters:
        raise ConfigError(f"unknown cluster {cluster!r}; configured: {', '.join(sorted(clusters))}")
    if source != "configured" and source not in formats:
        raise ConfigError(f"unknown source {source!r}; expected configured or one of {', '.join(formats)}")
    if source != "configured" and not input_uri:
        raise ConfigError(f"source {source!r} was asked for: give the input location too")
    return sorted(clusters) if cluster == "all" else [cluster]


def load_clusters(path: Path | None = None) -> dict[str, Cluster]:
    """All configured clusters, validated (a clear ConfigError for any mistake)."""
    return dict(_load(str(path or settings.project().clusters_file)))


@lru_cache(maxsize=4)
def _load(path: str) -> tuple[tuple[str, Cluster], ...]:
    import yaml

    try:
        document = yaml.safe_load(Path(path).read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"cluster configuration {path}: cannot read: {exc}") from exc
    clusters = document.get("clusters")
    if not isinstance(clusters, dict) or not clusters:
        raise ConfigError(f"cluster configuration {path}: 'clusters' must map names to settings")
    loaded = []
    for name, entry in clusters.items():
        where = f"{path}: cluster {name!r}"
        if not is_cluster_name(name):
            raise ConfigError(f"{where}: names are lower-case letters, digits, '-' and '_'")
        jobs = (entry or {}).get("jobs")
        if not isinstance(jobs, dict):
            raise ConfigError(f"{where}: 'jobs' settings are missing")
        metrics = (entry or {}).get("metrics")
        patterns = {
            key: settings.checked_checkpoint_pattern(value, f"{where}: {key}")
            for key in ("checkpoint_uri_pattern", "flight_recorder_uri_pattern")
            if (value := (entry or {}).get(key)) is not None
        }
        cluster = Cluster(
            name, _job_source(jobs, where), _metric_source(metrics, where), **patterns, source_file=path
        )
        loaded.append((name, cluster))
    return tuple(loaded)


def _metric_source(metrics: dict | None, where: str) -> MetricSource | None:
    if metrics is None:
        return None
    if not isinstance(metrics, dict):
        raise ConfigError(f"{where}: 'metrics' must be a mapping")
    unknown = set(metrics) - set(METRIC_SETTINGS)
    if unknown:
        raise ConfigError(
            f"{where}: unknown metrics settings {sorted(unknown)}; known: {', '.join(METRIC_SETTINGS)}"
        )
    fmt = _format_name(metrics.get("format"), f"{where}: metrics.format")
    if not isinstance(metrics.get("input"), str) or not metrics["input"]:
        raise ConfigError(f"{where}: metrics.input is missing")
    step = metrics.get("step_s", 15)
    if not isinstance(step, int) or isinstance(step, bool) or step <= 0:
        raise ConfigError(f"{where}: metrics.step_s must be a positive number of seconds, got {step!r}")
    snapshot = metrics.get("snapshot", False)
    if not isinstance(snapshot, bool):
        raise ConfigError(f"{where}: metrics.snapshot must be true or false, got {snapshot!r}")
    scrape_time = metrics.get("scrape_time")
    if scrape_time is not None:
        scrape_time = check_scrape_time(scrape_time, f"{where}: metrics.scrape_time")
    node = metrics.get("node")
    if node is not None and (not isinstance(node, str) or not node.strip()):
        raise ConfigError(f"{where}: metrics.node must be a host name, got {node!r}")
    return MetricSource(
        fmt, metrics["input"], step, snapshot, scrape_time, node, _node_groups(metrics, where)
    )


def _node_groups(metrics: dict, where: str) -> int:
    groups = metrics.get("node_groups", 1)
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
        raise ConfigError(
            f"{where}: metrics.node_groups must be a positive integer (1 = one task), got {groups!r}"
        )
    return groups


def check_scrape_time(value: object, where: str) -> str:
    """``value`` as a scrape time setting: RFC 3339 or epoch seconds, where ``{ds}`` stands for the
    run's UTC day (``"{ds}T23:59:45Z"``); a ConfigError naming ``where`` otherwise."""
    from acme.timestamps import parse_scrape_time

    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    if hasattr(value, "isoformat"):  # YAML reads an unquoted RFC 3339 time as a datetime
        value = value.isoformat()  # type: ignore[union-attr]
    if not isinstance(value, str) or parse_scrape_time(value.replace("{ds}", "1970-01-01")) is None:
        raise ConfigError(
            f"{where}: {value!r} is neither an RFC 3339 time (2023-07-01T12:00:00Z, "
            "{ds}T12:00:00Z) nor epoch seconds"
        )
    return value


def _job_source(jobs: dict, where: str) -> JobSource:
    unknown = set(jobs) - {"format", "input", "command", "fields", "timezone", "delimiter"}
    if unknown:
        raise ConfigError(f"{where}: unknown jobs settings {sorted(unknown)}")
    fmt = _format_name(jobs.get("format"), f"{where}: jobs.format")
    has_input, has_command = jobs.get("input") is not None, jobs.get("command") is not None
    if has_input == has_command:
        raise ConfigError(f"{where}: set exactly one of jobs.input and jobs.command")
    command = jobs.get("command")
    if has_command and (not isinstance(command, list) or not all(isinstance(part, str) for part in command)):
        raise ConfigError(f"{where}: jobs.command must be a list of strings (no shell)")
    delimiter = jobs.get("delimiter", "|")
    if not isinstance(delimiter, str) or not delimiter:
        raise ConfigError(f"{where}: jobs.delimiter must be a non-empty string, got {delimiter!r}")
    fields = jobs.get("fields")
    if isinstance(fields, str):
        fields = [f.strip() for f in fields.split(",") if f.strip()]
    return JobSource(
        format=fmt,
        input=jobs.get("input"),
        command=tuple(command) if command else None,
        fields=tuple(fields) if fields else None,
        timezone=jobs.get("timezone", "UTC"),
        delimiter=delimiter,
    )


def _format_name(value: object, where: str) -> str:
    """A format's name as written; which names exist is the area's to say (``acme.jobs.formats``,
    ``acme.metrics.formats``: they check a cluster's source when they plan its inputs), so this
    configuration imports no area."""
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where} must name a format, got {value!r}")
    return value.strip()
