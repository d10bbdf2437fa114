"""The lemon-node score's failure events, read from the lake's history of one cluster.

Four records, each through its own writer's layout (``acme.lake_keys``):

- **jobs** (``jobs/cluster=<c>/date=<d>/jobs.parquet``): failed jobs, their node lists and GPU time; a
  ``NODE_FAIL`` state is an infrastructure failure by itself;
- **diagnoses** (``diagnoses/cluster=<c>/date=<d>/diagnoses.parquet``): the newest record per job; attribution
  ``infrastructure`` makes the job's failure one;
- **recovery localizations** (``recovery/cluster=<c>/job=<j>/<recovery>/actions.jsonl``): a ``decide`` step
  done (not a dry run) names the faulty nodes (blame 1 each) and the stragglers (blame 1/2 each);
- **telemetry** (``metrics/metric=<m>/cluster=<c>/date=<d>/samples.parquet``, the metrics of
  ``ACME_LEMON_TELEMETRY_METRICS``): a gauge (dcgm-exporter's last Xid) counts when it changes to a counted
  code, a counter (ECC errors) when it rises; the GPUs of one node seeing it within 10 minutes are one event.

A job is read from the partitions of the ``ACME_LEMON_LOOKBACK_DAYS`` days up to the day of ``until``
(submit days) and counts when it ended in that window. One failed job is one event per node however many
records name it (its ``sources`` say which).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any

from acme import lake_keys
from acme.errors import InputError
from acme.hostlist import expand_hostlist
from acme.recovery.actions import ActionLog
from acme.recovery.lemon import FailureEvent

if TYPE_CHECKING:
    from acme.lake import Lake
    from acme.settings import LemonSettings

JOB_COLUMNS = ("job_id", "state", "state_group", "node_list", "gpu_time", "start_time", "end_time")
TELEMETRY_BUCKET_S = 600
STRAGGLER_BLAME = 0.5


@dataclass
class Evidence:
    """The events of one cluster, and what was read to find them."""

    cluster: str
    since: datetime
    until: datetime
    events: list[FailureEvent] = field(default_factory=list)
    read: dict[str, int] = field(default_factory=dict)  # partitions or logs read per source
    unattributed: int = 0  # infrastructure failures with no node list and no localization


def collect_events(lake: Lake, cluster: str, until: datetime, settings: LemonSettings) -> Evidence:
    """Every failure event of ``cluster`` in the lookback window ending at ``until`` (module docstring)."""
    since = until - timedelta(days=settings.lookback_days)
    days = {(until - timedelta(days=i)).date().isoformat() for i in range(settings.lookback_days + 1)}
    evidence = Evidence(cluster, since, until)
    jobs = _failed_jobs(lake, cluster, days, evidence)
    infra = _infrastructure_diagnoses(lake, cluster, days, evidence)
    localized = _localizations(lake, cluster, since, until, evidence)
    for job_id in sorted(set(jobs) | set(infra) | set(localized)):
        evidence.events += _job_events(
            job_id, jobs.get(job_id), infra.get(job_id), localized.get(job_id), evidence
        )
    evidence.events = [e for e in evidence.events if since <= e.at <= until]
    for metric in settings.telemetry_metrics:
        evidence.events += _telemetry_events(lake, cluster, metric, sorted(days), settings)
    return evidence


def _partitions(lake: Lake, folder: str, filename: str, days: set[str]) -> list[str]:
    keys = lake.list(folder)
    return [
        k for k in keys if k.endswith(f"/{filename}") and lake_keys.partition_values(k).get("date") in days
    ]


def _failed_jobs(lake: Lake, cluster: str, days: set[str], evidence: Evidence) -> dict[str, dict[str, Any]]:
    from acme.jobs.schema import with_current_columns

    keys = _partitions(lake, lake_keys.jobs_cluster(cluster), lake_keys.JOBS_FILE, days)
    evidence.read["job_partitions"] = len(keys)
    jobs = {}
    for key in keys:
        for row in with_current_columns(lake.read_parquet(key)).select(list(JOB_COLUMNS)).to_pylist():
            if row["state_group"] == "failed":
                jobs[str(row["job_id"])] = row
    return jobs


def _infrastructure_diagnoses(
    lake: Lake, cluster: str, days: set[str], evidence: Evidence
) -> dict[str, dict[str, Any]]:
    """job id -> its newest diagnosis, for the jobs whose newest one attributes the failure to infrastructure."""
    keys = _partitions(lake, lake_keys.diagnoses_cluster(cluster), lake_keys.DIAGNOSES_FILE, days)
    evidence.read["diagnosis_partitions"] = len(keys)
    newest: dict[str, dict[str, Any]] = {}
    for key in keys:
        table = lake.read_parquet(key)
        missing = {"job_id", "attribution", "reason", "diagnosed_at"} - set(table.column_names)
        if missing:
            raise InputError(
                lake.url(key), f"a diagnosis partition without the columns {', '.join(sorted(missing))}"
            )
        for row in table.select(["job_id", "attribution", "reason", "diagnosed_at"]).to_pylist():
            job_id = str(row["job_id"])
            if job_id not in newest or row["diagnosed_at"] >= newest[job_id]["diagnosed_at"]:
                newest[job_id] = row
    return {job_id: row for job_id, row in newest.items() if row["attribution"] == "infrastructure"}


def _localizations(
    lake: Lake, cluster: str, since: datetime, until: datetime, evidence: Evidence
) -> dict[str, dict[str, Any]]:
    """job id -> {faulty, stragglers, at, recovery} of its newest real ``decide`` step in the window."""
    found: dict[str, dict[str, Any]] = {}
    logs = 0
    for key in lake.list(lake_keys.recovery_cluster(cluster)):
        parts = key.split("/")
        if not key.endswith("/actions.jsonl") or len(parts) != 5:
            continue
        job_id = lake_keys.partition_values(key).get("job", "")
        logs += 1
        for record in ActionLog(lake, cluster, job_id, parts[3]).records():
            if record.get("step") != "decide" or record.get("status") != "done" or record.get("dry_run"):
                continue
            at = datetime.fromisoformat(record["ended_at"])
            result = record.get("result") or {}
            blames = result.get("faulty") or result.get("stragglers")
            if blames and since <= at <= until and (job_id not in found or at > found[job_id]["at"]):
                found[job_id] = {"faulty": list(result.get("faulty") or []), "at": at, "recovery": parts[3],
                                 "stragglers": list(result.get("stragglers") or [])}  # fmt: skip
    evidence.read["recovery_logs"] = logs
    return found


def _job_events(
    job_id: str,
    job: dict[str, Any] | None,
    diagnosis: dict[str, Any] | None,
    localized: dict[str, Any] | None,
    evidence: Evidence,
) -> list[FailureEvent]:
    """The events of one failed job: on its localized nodes, else spread over its node list."""
    sources = tuple(
        name
        for name, said in (
            ("diagnosis", diagnosis is not None),
            ("node_fail", job is not None and job["state"] == "NODE_FAIL"),
            ("localization", localized is not None),
        )
        if said
    )
    if not sources:
        return []
    ended = (job or {}).get("end_time") or (job or {}).get("start_time")
    at = ended if ended is not None else (localized or {}).get("at")
    gpu_hours = float((job or {}).get("gpu_time") or 0.0) / 3600
    detail = str((diagnosis or {}).get("reason") or (job or {}).get("state") or "localized")
    if localized:
        blamed = [(n, 1.0) for n in localized["faulty"]] + [
            (n, STRAGGLER_BLAME) for n in localized["stragglers"]
        ]
    else:
        nodes = expand_hostlist((job or {}).get("node_list"))
        blamed = [(n, 1.0 / len(nodes)) for n in nodes]
    if not blamed or at is None:
        evidence.unattributed += 1
        return []
    return [
        FailureEvent(node, at.astimezone(UTC), sources, share, gpu_hours * share, job_id, detail)
        for node, share in blamed
    ]


def _telemetry_events(
    lake: Lake, cluster: str, metric: str, days: list[str], settings: LemonSettings
) -> list[FailureEvent]:
    """A metric's fault events over ``days`` (sorted), the last value of each series carried across days."""
    from acme.metrics.catalog import load_catalog
    from acme.metrics.storage import read_samples

    spec = load_catalog()[metric]
    codes = tuple(settings.xid_codes) if metric == "xid_errors" else None
    last: dict[tuple, float] = {}
    seen: set[tuple[str, int]] = set()
    events = []
    for day in days:
        samples = read_samples(lake, metric, cluster, date.fromisoformat(day))
        if not len(samples):
            continue
        series = samples.series
        keys = list(zip(series["node"], series["gpu"].fillna(-1), series["uuid"], strict=True))
        for index in _fault_samples(samples, [last.get(k, 0.0) for k in keys], spec.kind, codes):
            node = str(keys[samples.series_id[index]][0])
            ts_ms = int(samples.ts_ms[index])
            if (node, ts_ms // (TELEMETRY_BUCKET_S * 1000)) in seen:
                continue
            seen.add((node, ts_ms // (TELEMETRY_BUCKET_S * 1000)))
            at = datetime.fromtimestamp(ts_ms / 1000, UTC)
            detail = f"{metric}={samples.value[index]:g}"
            events.append(FailureEvent(node, at, ("telemetry",), 1.0, 0.0, None, detail))
        _carry_last_values(samples, keys, last)
    return sorted(events, key=lambda e: (e.at, e.node))


def _fault_samples(samples: Any, carried: list[float], kind: str, codes: tuple[int, ...] | None) -> Any:
    """Positions of the samples (sorted by series and time) that are a fault: a counter that rose, or a gauge
    that changed to a counted non-zero code; each series' first sample is compared with ``carried``."""
    import numpy as np

    value = samples.value
    previous = np.empty_like(value)
    previous[1:] = value[:-1]
    starts = np.ones(len(value), dtype=bool)
    starts[1:] = samples.series_id[1:] != samples.series_id[:-1]
    previous[starts] = np.asarray(carried, dtype="float64")[samples.series_id[starts]]
    if kind == "counter":
        fault = value > previous
    else:
        fault = (value != previous) & (value != 0)
        if codes is not None:
            fault &= np.isin(value, np.asarray(codes, dtype="float64"))
    return np.flatnonzero(fault)


def _carry_last_values(samples: Any, keys: list[tuple], last: dict[tuple, float]) -> None:
    import numpy as np

    ends = np.ones(len(samples.value), dtype=bool)
    ends[:-1] = samples.series_id[1:] != samples.series_id[:-1]
    for series, value in zip(samples.series_id[ends], samples.value[ends], strict=True):
        last[keys[series]] = float(value)
