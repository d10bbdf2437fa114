"""The steps of the ``diagnose_failures`` DAG as plain functions: plan the failed jobs, diagnose and route one,
summarize a run. Each returns a small JSON-ready manifest (XCom carries manifests, the lake carries data).
"""

from __future__ import annotations

from collections import Counter
from datetime import date
from typing import TYPE_CHECKING, Any

from acme.errors import ConfigError

if TYPE_CHECKING:
    from acme.lake import Lake


def diagnosis_targets(
    clusters: dict[str, Any],
    cluster: str,
    day: date,
    published: list[dict[str, Any]],
    *,
    manual: bool,
) -> list[tuple[str, date]]:
    """The ``(cluster, submit day)`` pairs a run covers: those the triggering ingest published (from its
    Asset events), else ``day`` for the chosen cluster or all of them. A manual day or job wins."""
    if cluster != "all" and cluster not in clusters:
        raise ConfigError(f"unknown cluster {cluster!r}; configured: {', '.join(sorted(clusters))}")
    pairs = sorted({(e["cluster"], e["day"]) for e in published if e and e.get("cluster") and e.get("day")})
    if pairs and not manual:
        return [(c, date.fromisoformat(d)) for c, d in pairs if cluster in ("all", c)]
    return [(name, day) for name in (sorted(clusters) if cluster == "all" else [cluster])]


def failed_jobs(lake: Lake, cluster: str, day: date) -> list[dict[str, Any]]:
    """The failed jobs submitted on ``day`` (the lake's jobs partition), JSON-ready, ordered by job id."""
    from acme.diagnosis.pipeline import json_safe_job

    key = f"jobs/cluster={cluster}/date={day.isoformat()}/jobs.parquet"
    if not lake.exists(key):
        return []
    rows = lake.read_parquet(key).to_pylist()
    return sorted(
        (json_safe_job(row) for row in rows if row.get("state_group") == "failed"), key=lambda j: j["job_id"]
    )


def plan_diagnoses(
    lake: Lake,
    targets: list[tuple[str, date]],
    *,
    job_id: str | None = None,
    log: str | None = None,
    limit: int | None = None,
) -> dict[str, Any]:
    """What one run diagnoses: the failed jobs of each ``(cluster, day)``, or the one job a manual run names.

    A named job that is not in the lake yet (a crash minutes ago, before the nightly ingest) is diagnosed
    from its log with only its cluster and id as metadata. At most ``limit`` jobs are planned; the rest are
    counted in ``left_out`` (the next run does not pick them up: raise ``ACME_DIAGNOSIS_MAX_JOBS`` instead).
    """
    from acme.diagnosis import settings

    if log and not job_id:
        raise ConfigError("a log location was given without the job_id it belongs to")
    if job_id and len({cluster for cluster, _ in targets}) != 1:
        raise ConfigError("a job_id was given: choose its cluster (not 'all')")
    limit = limit or settings.max_jobs_per_run()
    items: list[dict[str, Any]] = []
    for cluster, day in targets:
        jobs = failed_jobs(lake, cluster, day)
        if job_id:
            known = [j for j in _all_jobs(lake, cluster, day) if j["job_id"] == str(job_id)]
            jobs = known or [{"cluster": cluster, "job_id": str(job_id)}]
        items += [{"cluster": cluster, "day": day.isoformat(), "job": job, "log": log} for job in jobs]
    return {"items": items[:limit], "planned": min(len(items), limit), "left_out": max(len(items) - limit, 0)}


def _all_jobs(lake: Lake, cluster: str, day: date) -> list[dict[str, Any]]:
    from acme.diagnosis.pipeline import json_safe_job

    key = f"jobs/cluster={cluster}/date={day.isoformat()}/jobs.parquet"
    return [json_safe_job(row) for row in lake.read_parquet(key).to_pylist()] if lake.exists(key) else []


def diagnose_and_route(lake: Lake, item: dict[str, Any], agent: Any = None) -> dict[str, Any]:
    """Diagnose one planned job, store its record, write its owner message; return the manifest with the
    recovery conf when the job is to be recovered."""
    from acme.diagnosis.pipeline import CONFIGURED_AGENT, diagnose_job
    from acme.diagnosis.records import write_records
    from acme.diagnosis.routing import OWNER_MESSAGE, route, write_owner_message

    day = date.fromisoformat(item["day"])
    job = item["job"]
    record = diagnose_job(
        lake, item["cluster"], job, item.get("log"), day=day, agent=agent or CONFIGURED_AGENT
    )
    (partition,) = write_records(lake, [record])
    decided = route(record, job)
    message = write_owner_message(lake, record, decided.message) if decided.kind == OWNER_MESSAGE else None
    return {
        "cluster": record.cluster,
        "job_id": record.job_id,
        "date": record.date.isoformat(),
        "reason": record.reason,
        "source": record.source,
        "confidence": record.confidence,
        "route": decided.kind,
        "recovery_conf": decided.recovery_conf,
        "record": partition,
        "message": message,
        "note": record.note,
    }


def summarize(manifests: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts by reason, source and route, the partitions written, and the recovery confs to trigger."""
    return {
        "jobs": len(manifests),
        "reasons": dict(Counter(m["reason"] for m in manifests)),
        "sources": dict(Counter(m["source"] for m in manifests)),
        "routes": dict(Counter(m["route"] for m in manifests)),
        "partitions": sorted({m["record"] for m in manifests}),
        "messages": sorted(m["message"] for m in manifests if m["message"]),
        "recoveries": [m["recovery_conf"] for m in manifests if m["recovery_conf"]],
    }
