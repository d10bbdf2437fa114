"""One detection pass over a cluster at a moment: running GPU jobs -> their telemetry -> suspects.

``detect_cluster`` reads nothing but the jobs partitions when no GPU job with a node list runs (the
usual case on an idle or AcmeTrace-only cluster); otherwise one read of the window's telemetry for all
running jobs' nodes (Prometheus when the cluster's metrics source is Prometheus, else the metrics lake;
``ACME_DETECT_SOURCE`` forces one), then the detectors per job. The result is one JSON-ready dict:
``{"cluster", "at", "source", "window_minutes", "jobs_running", "jobs_checked", "without_node_list",
"without_telemetry", "suspects": [{"kind", "cluster", "job_id", "job_name", "user", "job_type", "nodes",
"suspect_nodes", "since", "minutes", "evidence", "measures", "submit_time"}], "seconds"}``.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from acme.detection.telemetry import Telemetry
    from acme.lake import Lake
    from acme.settings import DetectionSettings


def choose_source(cluster: str, settings: DetectionSettings) -> tuple[str, str | None, int]:
    """(``lake`` | ``prometheus``, the Prometheus URL, the scrape step) for a cluster."""
    from acme.clusters import load_clusters
    from acme.errors import ConfigError

    clusters = load_clusters()
    if cluster not in clusters:
        raise ConfigError(f"unknown cluster {cluster!r}; configured: {', '.join(sorted(clusters))}")
    metrics = clusters[cluster].metrics
    step = int(metrics.step_s) if metrics is not None else 15
    prometheus = metrics.input if metrics is not None and metrics.format == "prometheus" else None
    if settings.source == "prometheus" and not prometheus:
        raise ConfigError(
            f"ACME_DETECT_SOURCE=prometheus, but cluster {cluster!r} has no Prometheus metrics source"
        )
    if settings.source == "lake" or prometheus is None:
        return "lake", None, step
    return "prometheus", prometheus, step


def detect_cluster(
    lake: Lake,
    cluster: str,
    at: datetime,
    settings: DetectionSettings | None = None,
    window_minutes: float | None = None,
) -> dict[str, Any]:
    from acme import settings as acme_settings
    from acme.detection.running import running_gpu_jobs
    from acme.errors import ConfigError

    began = time.perf_counter()
    settings = settings or acme_settings.detection()
    if at.tzinfo is None:
        raise ConfigError(f"detection time {at.isoformat()} has no time zone")
    at = at.astimezone(UTC)
    window = window_minutes or settings.lookback_minutes
    if window < settings.hang_minutes:
        raise ConfigError(
            f"a {window:g}-minute window is shorter than the hang rule's {settings.hang_minutes:g} minutes"
        )
    source, url, step_s = choose_source(cluster, settings)
    running = running_gpu_jobs(lake, cluster, at, settings.job_lookback_days)
    result: dict[str, Any] = {
        "cluster": cluster, "at": at.isoformat(), "source": source, "window_minutes": window,
        "jobs_running": len(running["jobs"]) + running["without_node_list"], "jobs_checked": 0,
        "without_node_list": running["without_node_list"], "without_telemetry": [], "suspects": [],
    }  # fmt: skip
    if running["jobs"]:
        end_ms = int(at.timestamp() * 1000)
        start_ms = end_ms - int(window * 60_000)
        nodes = sorted({n for job in running["jobs"] for n in job["nodes"]})
        telemetry = _window_telemetry(lake, cluster, url, nodes, (start_ms, end_ms, step_s), settings)
        for job in running["jobs"]:
            _check_job(telemetry, job, settings, result)
    result["seconds"] = round(time.perf_counter() - began, 3)
    return result


def _window_telemetry(
    lake: Lake,
    cluster: str,
    prometheus_url: str | None,
    nodes: list[str],
    grid: tuple[int, int, int],
    settings: DetectionSettings,
) -> Telemetry:
    """The nodes' telemetry of the window ``grid`` = (start ms, end ms, step s), from Prometheus when
    ``prometheus_url`` is given, else from the metrics lake."""
    from acme.detection.telemetry import read_lake_samples, read_prometheus_samples, telemetry_from_samples

    start_ms, end_ms, step_s = grid
    samples = (
        read_prometheus_samples(prometheus_url, start_ms, end_ms, step_s, None, settings.storage_write_promql)
        if prometheus_url
        else read_lake_samples(lake, cluster, start_ms, end_ms)
    )
    return telemetry_from_samples(samples, nodes, start_ms, end_ms, step_s)


def _check_job(telemetry: Telemetry, job: dict[str, Any], settings: DetectionSettings, result: dict) -> None:
    """Run the detectors on one running job's part of the window; add it to ``result``."""
    from acme.detection.detect import detect_job

    view = telemetry.select(job["nodes"])
    view = view.since(int(datetime.fromisoformat(job["start_time"]).timestamp() * 1000))
    if not view.gpus:
        result["without_telemetry"].append(job["job_id"])
        return
    result["jobs_checked"] += 1
    finding = detect_job(view, settings)
    if finding is not None:
        result["suspects"].append(
            {"kind": finding.kind, "cluster": result["cluster"], "job_id": job["job_id"],
             "job_name": job.get("job_name"), "user": job.get("user"), "job_type": job.get("job_type"),
             "submit_time": job.get("submit_time"), "nodes": job["nodes"],
             "suspect_nodes": finding.nodes, "since": finding.since, "minutes": finding.minutes,
             "evidence": finding.evidence, "measures": finding.measures}
        )  # fmt: skip


def report_suspects(
    lake: Lake, result: dict[str, Any], settings: DetectionSettings | None = None
) -> list[dict]:
    """Write each suspect's evidence and episode; the ``diagnose_failures`` triggers (one per episode)."""
    from acme import settings as acme_settings
    from acme.detection.evidence import diagnosis_trigger

    settings = settings or acme_settings.detection()
    at = datetime.fromisoformat(result["at"])
    gap = timedelta(minutes=max(10.0, 2 * settings.lookback_minutes))
    return [diagnosis_trigger(lake, suspect, at, gap) for suspect in result["suspects"]]


def plan_detection(
    lake: Lake, cluster: str, at_param: str | None, interval_end: datetime | None, run_after: datetime
) -> list[dict[str, Any]]:
    """The ``detect_hangs`` DAG's first step: ``[{"cluster", "jobs", "at"}]`` for the clusters (``all`` or
    one) where a GPU job runs at the run's moment (:func:`detection_moment`); empty when none does."""
    at = detection_moment(at_param, interval_end, run_after)
    plan = clusters_with_running_jobs(lake, cluster, at)
    print(f"{at.isoformat()}: GPU jobs running on {plan or 'no cluster'}")
    return [{**item, "at": at.isoformat()} for item in plan]


def detect_and_report(lake: Lake, cluster: str, at: str) -> list[dict]:
    """One cluster's detection pass at ``at`` (ISO 8601) with each suspect's evidence written: the
    ``diagnose_failures`` triggers (the DAG's detect step), the pass summarized on stdout."""
    result = detect_cluster(lake, cluster, datetime.fromisoformat(at))
    triggers = report_suspects(lake, result)
    for suspect in result["suspects"]:
        print(f"{suspect['kind']} of job {suspect['job_id']}: {suspect['evidence'][0]}")
    print(
        f"{result['jobs_checked']} of {result['jobs_running']} running jobs checked from the "
        f"{result['source']} in {result['seconds']} s; {len(result['suspects'])} suspects"
    )
    return triggers


def detect_hangs_cli(
    lake_uri: str | None, clusters: list[str] | None, at: str | None, window: float | None
) -> dict:
    """``python -m acme detect-hangs``: one JSON object, the suspects of every chosen cluster (read only)."""
    from acme.clusters import load_clusters
    from acme.lake import open_lake

    lake = open_lake(lake_uri)
    moment = detection_moment(at, None, datetime.now(UTC))
    names = clusters or sorted(load_clusters())
    passes = [detect_cluster(lake, name, moment, window_minutes=window) for name in names]
    return {
        "at": moment.astimezone(UTC).isoformat(),
        "suspects": [s for p in passes for s in p["suspects"]],
        "clusters": {
            p["cluster"]: {k: v for k, v in p.items() if k not in ("suspects", "cluster")} for p in passes
        },
    }


def clusters_with_running_jobs(
    lake: Lake, cluster: str, at: datetime, settings: DetectionSettings | None = None
) -> list[dict[str, Any]]:
    """``[{"cluster", "jobs"}]`` for the clusters (``all`` or one) where a GPU job with a node list runs at
    ``at``: the DAG's short circuit, which reads only the jobs partitions."""
    from acme import settings as acme_settings
    from acme.clusters import load_clusters
    from acme.detection.running import running_gpu_jobs
    from acme.errors import ConfigError

    settings = settings or acme_settings.detection()
    clusters = load_clusters()
    if cluster != "all" and cluster not in clusters:
        raise ConfigError(f"unknown cluster {cluster!r}; configured: {', '.join(sorted(clusters))}")
    plan = []
    for name in sorted(clusters) if cluster == "all" else [cluster]:
        running = running_gpu_jobs(lake, name, at, settings.job_lookback_days)
        if running["jobs"]:
            plan.append({"cluster": name, "jobs": len(running["jobs"])})
    return plan


def detection_moment(at_param: str | None, interval_end: datetime | None, run_after: datetime) -> datetime:
    """The end of a run's window: the ``at`` Param, else the run's data interval end, else when it ran."""
    from acme.errors import InputError

    if at_param:
        try:
            moment = datetime.fromisoformat(at_param)
        except ValueError:
            raise InputError("at", f"{at_param!r} is not an ISO 8601 time") from None
        if moment.tzinfo is None:
            raise InputError("at", f"{at_param!r} has no time zone (write e.g. 2024-03-10T02:10:00+00:00)")
        if not datetime(2000, 1, 2, tzinfo=UTC) <= moment <= datetime(2199, 12, 31, tzinfo=UTC):
            raise InputError("at", f"{at_param!r} is outside 2000-2199: not a moment telemetry exists for")
        return moment.astimezone(UTC)
    return (interval_end or run_after).astimezone(UTC)
