"""The steps of the ``diagnose_failures`` DAG as plain functions: plan a run, diagnose the jobs without a log
in bulk from their metadata, diagnose the jobs with a log in chunks, summarize. Each returns a small
JSON-ready manifest (XCom carries manifests, the lake carries data).

**Plan** (:func:`plan_run`). The failed jobs of each ``(cluster, day)`` are split by one listing of the log
pattern into jobs *with* a log and jobs *without* one. Jobs already diagnosed are left alone (a re-run or a
retry never diagnoses a job twice) unless the run asks to re-diagnose. The plan itself is written to the
lake (``staging/diagnose_failures/<run>/plan.json``); tasks read their part of it by key.

**Without a log**: all of them in one step (:func:`diagnose_without_logs`), from the scheduler's facts
(``acme.diagnosis.metadata``): one rule evaluation per distinct set of facts, no model, seconds for
thousands.

**With a log**: at most ``ACME_DIAGNOSIS_MAX_JOBS`` per run, in at most ``ACME_DIAGNOSIS_CHUNKS`` chunks
(:func:`diagnose_chunk`, one mapped task each, so one process loads the embedding model at most once per
chunk). Jobs over the cap wait in the cluster's carry-over queue in the lake::

    diagnosis/queue/cluster=<c>/pending.json

Every run takes the oldest waiting jobs first and says how many still wait. An entry leaves the queue
once a record newer than the entry exists; a run *claims* the entries it takes, so a concurrent run does
not take them too, and a retry of the same run takes the same ones again. A claim older than
``ACME_DIAGNOSIS_CLAIM_TTL_S`` (a run that failed for good) is taken over by the next run.
"""

from __future__ import annotations

import re
from collections import Counter
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Any

from acme import lake_keys
from acme.errors import ConfigError

if TYPE_CHECKING:
    from acme.diagnosis.records import DiagnosisRecord
    from acme.lake import Lake

_FLUSH_EVERY = 25  # a chunk stores its records this often, so a retry after a crash redoes little
_JOB_SENTINEL = "ACMEJOBIDPLACEHOLDER"


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


def _jobs(lake: Lake, cluster: str, day: date) -> list[dict[str, Any]]:
    from acme.diagnosis.pipeline import json_safe_job

    key = lake_keys.jobs_partition(cluster, day)
    return [json_safe_job(row) for row in lake.read_parquet(key).to_pylist()] if lake.exists(key) else []


def failed_jobs(lake: Lake, cluster: str, day: date) -> list[dict[str, Any]]:
    """The failed jobs submitted on ``day`` (the lake's jobs partition), JSON-ready, ordered by job id."""
    return sorted(
        (job for job in _jobs(lake, cluster, day) if job.get("state_group") == "failed"),
        key=lambda j: j["job_id"],
    )


def job_ids_with_logs(lake: Lake, cluster: str, day: date) -> set[str]:
    """The job ids that have a log under ``ACME_DIAGNOSIS_LOG_PATTERN`` for jobs submitted on ``day``, from
    one listing of the pattern with ``*`` for the job id (not one lookup per job)."""
    from acme import settings
    from acme.diagnosis.pipeline import find_logs, glob_regex, log_space

    pattern = settings.diagnosis().log_pattern
    if "{job_id}" not in pattern:
        raise ConfigError("ACME_DIAGNOSIS_LOG_PATTERN must contain {job_id}: which log is whose?")
    named = pattern.format(lake=lake.uri, cluster=cluster, job_id=_JOB_SENTINEL, date=day.isoformat())
    source, where = log_space(named, lake)
    parts = where.split(_JOB_SENTINEL)
    matcher = re.compile("^" + "(?P<job>[^/]+)".join(glob_regex(p) for p in parts) + "$")
    found = set()
    for hit in find_logs(source, where.replace(_JOB_SENTINEL, "*")):
        match = matcher.match(hit)
        if match and len({m for m in match.groups()}) == 1:  # {job_id} twice in a pattern must agree
            found.add(match["job"])
    return found


def _diagnosed_at(lake: Lake, cluster: str, day: date) -> dict[str, str]:
    """``job_id -> diagnosed_at`` (ISO) of the stored records of one partition."""
    from acme.diagnosis.records import partition_key

    key = partition_key(cluster, day)
    if not lake.exists(key):
        return {}
    table = lake.read_parquet(key).select(["job_id", "diagnosed_at"])
    return {
        row["job_id"]: row["diagnosed_at"].astimezone(UTC).isoformat()
        for row in table.to_pylist()
        if row["diagnosed_at"] is not None
    }


def queue_key(cluster: str) -> str:
    return lake_keys.diagnosis_queue(cluster)


def plan_folder(run_id: str) -> str:
    """The run's staging folder: its plan lives there until the run has published."""
    return lake_keys.staging("diagnose_failures", run_id)


def plan_key(run_id: str) -> str:
    return f"{plan_folder(run_id)}/plan.json"


def _chunked(items: list[Any], chunks: int) -> list[list[Any]]:
    """``items`` in at most ``chunks`` contiguous parts of near-equal size (none empty)."""
    count = min(chunks, len(items))
    if count == 0:
        return []
    size, extra = divmod(len(items), count)
    out, start = [], 0
    for index in range(count):
        end = start + size + (1 if index < extra else 0)
        out.append(items[start:end])
        start = end
    return out


def plan_run(
    lake: Lake,
    targets: list[tuple[str, date]],
    *,
    run_id: str,
    job_id: str | None = None,
    log: str | None = None,
    rediagnose: bool = False,
    limit: int | None = None,
    chunks: int | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """Plan one run (see the module docstring) and store the plan in the lake; returns its manifest.

    A named job (a manual run right after a crash) is always diagnosed, by the log given, its log by the
    pattern, or its metadata; it does not go through the queue. A named job not in the lake yet is
    diagnosed with only its cluster and id as metadata.
    """
    from acme import settings

    if log and not job_id:
        raise ConfigError("a log location was given without the job_id it belongs to")
    if job_id and len({cluster for cluster, _ in targets}) != 1:
        raise ConfigError("a job_id was given: choose its cluster (not 'all')")
    limit = limit or settings.diagnosis().max_jobs_per_run
    chunks = chunks or settings.diagnosis().chunks
    now = now or datetime.now(UTC)
    stamp = now.isoformat()
    without_log: list[dict[str, Any]] = []
    with_log: list[dict[str, Any]] = []
    waiting = skipped = 0
    if job_id:
        from acme.diagnosis.pipeline import safe_job_id

        job_id = safe_job_id(job_id)
        (cluster, day), *_ = targets
        known = [j for j in _jobs(lake, cluster, day) if j["job_id"] == str(job_id)]
        item: dict[str, Any] = {
            "cluster": cluster, "day": day.isoformat(), "job": (known or [{"job_id": str(job_id)}])[0]
        }  # fmt: skip
        has_log = bool(log) or str(job_id) in job_ids_with_logs(lake, cluster, day)
        (with_log if has_log else without_log).append({**item, "log": log})
    else:
        for cluster in sorted({c for c, _ in targets}):
            fresh: list[dict[str, Any]] = []
            for target_cluster, day in targets:
                if target_cluster != cluster:
                    continue
                done = {} if rediagnose else _diagnosed_at(lake, cluster, day)
                failed = [j for j in failed_jobs(lake, cluster, day) if j["job_id"] not in done]
                skipped += len(done)
                logged = job_ids_with_logs(lake, cluster, day) if failed else set()
                for job in failed:
                    item = {
                        "cluster": cluster,
                        "day": day.isoformat(),
                        "job": job,
                        "log": None,
                    }
                    (fresh if job["job_id"] in logged else without_log).append(item)
            taken, left = _take_from_queue(lake, cluster, fresh, run_id, limit - len(with_log), stamp)
            with_log += taken
            waiting += left
    plan: dict[str, Any] = {
        "run_id": run_id,
        "created_at": stamp,
        "without_log": without_log,
        "chunks": _chunked(with_log, chunks),
        "waiting": waiting,
        "manual": bool(job_id),
        "targets": [{"cluster": c, "day": d.isoformat()} for c, d in targets],
    }
    key = plan_key(run_id)
    lake.write_json(key, plan)
    return {
        "plan": key,
        "without_log": len(without_log),
        "with_log": len(with_log),
        "waiting": waiting,
        "already_diagnosed": skipped,
        "manual": bool(job_id),
        "chunks": [{"plan": key, "chunk": i, "jobs": len(c)} for i, c in enumerate(plan["chunks"])],
        # The DAG's mapped steps: the bulk step only when there are jobs without a log (a crash's own
        # diagnosis then takes one worker slot, not two), then one per chunk.
        "steps": ([{"plan": key, "kind": "without a log", "jobs": len(without_log)}] if without_log else [])
        + [
            {"plan": key, "kind": "with a log", "chunk": i, "jobs": len(c)}
            for i, c in enumerate(plan["chunks"])
        ],
    }


def _take_from_queue(
    lake: Lake, cluster: str, fresh: list[dict[str, Any]], run_id: str, room: int, stamp: str
) -> tuple[list[dict[str, Any]], int]:
    """Add ``fresh`` jobs to the cluster's queue, drop the diagnosed ones, claim up to ``room`` (oldest
    first) for ``run_id``; returns the claimed items and how many others wait."""
    from acme import settings

    ttl_s = settings.diagnosis().claim_ttl_s
    key = queue_key(cluster)
    with lake.lock(f"diagnosis-queue-{cluster}"):
        entries = (lake.read_json(key, default=None) or {}).get("jobs", [])
        before = [dict(e) for e in entries]
        days = {e["day"] for e in entries} | {item["day"] for item in fresh}
        records = {d: _diagnosed_at(lake, cluster, date.fromisoformat(d)) for d in days}

        def done(entry: dict[str, Any]) -> bool:
            return records[entry["day"]].get(entry["job"]["job_id"], "") >= entry["queued_at"]

        seen = {(e["day"], e["job"]["job_id"]): e for e in entries}
        for item in fresh:  # not diagnosed yet, or to be diagnosed again
            entry = seen.get((item["day"], item["job"]["job_id"]))
            if entry is None:
                entries.append({**item, "queued_at": stamp, "claimed_by": None, "claimed_at": None})
            elif done(entry):  # its earlier turn is over: queued anew
                entry.update(queued_at=stamp, claimed_by=None, claimed_at=None)
        pending = [e for e in entries if not done(e)]
        taken: list[dict[str, Any]] = []
        for entry in pending:
            if len(taken) >= max(room, 0):
                break
            claim = entry.get("claimed_at")
            stale = (
                claim is not None
                and (datetime.fromisoformat(stamp) - datetime.fromisoformat(claim)).total_seconds() > ttl_s
            )
            if entry.get("claimed_by") in (None, run_id) or stale:
                entry["claimed_by"], entry["claimed_at"] = run_id, stamp
                taken.append(
                    {k: entry[k] for k in ("cluster", "day", "job", "log")}
                    | {"queued_at": entry["queued_at"]}
                )
        if pending != before:
            lake.write_json(key, {"cluster": cluster, "updated_at": stamp, "jobs": pending})
    return taken, len(pending) - len(taken)


# ------------------------------------------------------------------------------------------ diagnosing
def _done_since(lake: Lake, items: list[dict[str, Any]], since: str) -> set[tuple[str, str]]:
    """``(cluster, job_id)`` of the items whose stored record is at least as new as ``since`` (a retry)."""
    from acme.diagnosis.pipeline import job_submit_day

    done = set()
    for cluster, day in {
        (i["cluster"], job_submit_day(i["job"], date.fromisoformat(i["day"]))) for i in items
    }:
        stamps = _diagnosed_at(lake, cluster, day)
        done |= {(cluster, job_id) for job_id, at in stamps.items() if at >= since}
    return done


def _route_one(lake: Lake, record: DiagnosisRecord, job: dict[str, Any]) -> dict[str, Any]:
    from acme.diagnosis.routing import OWNER_MESSAGE, route, write_owner_message

    decided = route(record, job)
    owner = decided.message if decided.kind == OWNER_MESSAGE else None
    message = write_owner_message(lake, record, owner) if owner is not None else None
    return {
        "reason": record.reason,
        "source": record.source,
        "route": decided.kind,
        "recovery_conf": decided.recovery_conf,
        "message": message,
    }


def _step_summary(
    routed: list[dict[str, Any]], partitions: list[str], skipped: int, errors: list[str]
) -> dict[str, Any]:
    return {
        "jobs": len(routed),
        "reasons": dict(Counter(r["reason"] for r in routed)),
        "sources": dict(Counter(r["source"] for r in routed)),
        "routes": dict(Counter(r["route"] for r in routed)),
        "partitions": sorted(set(partitions)),
        "messages": sum(1 for r in routed if r["message"]),
        "recoveries": [r["recovery_conf"] for r in routed if r["recovery_conf"]],
        "skipped": skipped,
        "errors": errors,
    }


def diagnose_without_logs(lake: Lake, key: str) -> dict[str, Any]:
    """Diagnose the plan's jobs without a log from their metadata, all at once (no model), store and route
    them; jobs this run already stored (a retry) are skipped."""
    from acme import settings
    from acme.diagnosis.learning import rules_with_learned
    from acme.diagnosis.metadata import diagnose_from_metadata
    from acme.diagnosis.pipeline import job_submit_day
    from acme.diagnosis.records import DiagnosisRecord, write_records
    from acme.diagnosis.rules import UNKNOWN

    plan = lake.read_json(key)
    items = plan["without_log"]
    done = _done_since(lake, items, plan["created_at"])
    items = [i for i in items if (i["cluster"], str(i["job"]["job_id"])) not in done]
    diagnoses = diagnose_from_metadata([i["job"] for i in items], rules_with_learned(lake))
    pattern = settings.diagnosis().log_pattern
    records = []
    for item, found in zip(items, diagnoses, strict=True):
        job, day = item["job"], date.fromisoformat(item["day"])
        submit_day = job_submit_day(job, day)
        where = pattern.format(lake=lake.uri, cluster=item["cluster"], job_id=job["job_id"], date=submit_day)
        known = found.reason != UNKNOWN
        records.append(
            DiagnosisRecord(
                cluster=item["cluster"], job_id=str(job["job_id"]), date=submit_day,
                reason=found.reason, category=found.category if known else None,
                attribution=found.attribution if known else None, confidence=float(found.confidence),
                source="rule" if known else "none", mitigation=found.mitigation, rule_id=found.rule_id,
                rule_version=found.rule_version, evidence=found.evidence,
                note=f"no log found at {where}: diagnosed from the job metadata alone",
            )
        )  # fmt: skip
    partitions = write_records(lake, records) if records else []
    routed = [_route_one(lake, r, i["job"]) for r, i in zip(records, items, strict=True)]
    return _step_summary(routed, partitions, len(done), [])


def diagnose_chunk(lake: Lake, key: str, index: int, agent: Any = None) -> dict[str, Any]:
    """Diagnose chunk ``index`` of the plan's jobs with a log, one after another in this process (the
    embedding model, when needed, loads once), storing records every few jobs; jobs this run already
    stored (a retry) are skipped. A manual run's chunk (a crash's own diagnosis) defers the cases of
    rule-decided diagnoses, so it loads no model (``acme.diagnosis.deferred_cases``); a nightly chunk
    stores its cases at once and then the deferred ones.

    Each job's log is compared with the last good run of its family (``acme.diagnosis.baseline``): the lines
    new since then rank first in the evidence and in the agent's prompt; the run's chunks read each good
    run's log once (its templates are kept in the run's staging folder).

    A nightly job whose log cannot be read gets an ``Unknown`` record that says why, and the chunk goes
    on; a log location given by hand that is wrong fails the task (the operator is waiting for it).
    """
    from acme.diagnosis.baseline_lookup import BaselineFinder
    from acme.diagnosis.pipeline import CONFIGURED_AGENT, diagnose_job
    from acme.diagnosis.records import DiagnosisRecord, write_records
    from acme.errors import InputError

    plan = lake.read_json(key)
    items = plan["chunks"][index]
    # The families' last good runs: each one's log read once a night (its templates kept in the run's folder).
    baselines = BaselineFinder(lake, cache_folder=plan_folder(plan["run_id"]))
    done = _done_since(lake, items, plan["created_at"])
    pending: list[DiagnosisRecord] = []
    partitions: list[str] = []
    routed, errors = [], []
    todo = [i for i in items if (i["cluster"], str(i["job"]["job_id"])) not in done]
    for item in todo:
        day = date.fromisoformat(item["day"])
        try:
            record = diagnose_job(
                lake, item["cluster"], item["job"], item.get("log"), day=day, agent=agent or CONFIGURED_AGENT,
                defer_case=bool(plan.get("manual")), baselines=baselines,
            )  # fmt: skip
        except InputError as exc:
            if item.get("log"):
                raise
            errors.append(f"{item['cluster']}/{item['job']['job_id']}: {exc}")
            record = DiagnosisRecord(
                cluster=item["cluster"], job_id=str(item["job"]["job_id"]), date=day, reason="Unknown",
                category=None, attribution=None, confidence=0.0, source="none",
                note=f"cannot diagnose: {exc}",
            )  # fmt: skip
        pending.append(record)
        routed.append(_route_one(lake, record, item["job"]))
        if len(pending) >= _FLUSH_EVERY:
            partitions += write_records(lake, pending)
            pending = []
    if pending:
        partitions += write_records(lake, pending)
    if not plan.get("manual"):  # a crash's own diagnosis does not wait for the model; a nightly run does
        from acme.diagnosis.deferred_cases import flush_deferred_cases

        flush_deferred_cases(lake)
    return _step_summary(routed, partitions, len(items) - len(todo), errors)


def diagnose_step(lake: Lake, step: dict[str, Any], agent: Any = None) -> dict[str, Any]:
    """One planned step (``plan_run``'s ``steps``): the jobs without a log in bulk, or one chunk of those with
    a log (``agent``: the LLM agent, or an ``acme.diagnosis.pipeline.AgentOnDemand``)."""
    if "chunk" not in step:
        return diagnose_without_logs(lake, step["plan"])
    return diagnose_chunk(lake, step["plan"], step["chunk"], agent=agent)


def summarize(steps: list[dict[str, Any]], waiting: int = 0) -> dict[str, Any]:
    """One run's counts by reason, source and route, the partitions written, the recovery confs to
    trigger and how many jobs wait in the carry-over queue, from its steps' summaries."""
    steps = [s for s in steps if s]
    total: dict[str, Counter] = {name: Counter() for name in ("reasons", "sources", "routes")}
    for step in steps:
        for name, counts in total.items():
            counts.update(step[name])
    return {
        "jobs": sum(s["jobs"] for s in steps),
        **{name: dict(counts) for name, counts in total.items()},
        "partitions": sorted({p for s in steps for p in s["partitions"]}),
        "messages": sum(s["messages"] for s in steps),
        "recoveries": [conf for s in steps for conf in s["recoveries"]],
        "skipped": sum(s["skipped"] for s in steps),
        "errors": [e for s in steps for e in s["errors"]],
        "waiting": waiting,
    }
