"""Which messages a run owes, queued in the lake (:mod:`acme.notify.outbox`):

* :func:`queue_run_messages` (end of ``diagnose_failures``): per ``(cluster, submit day)`` of the run's
  jobs, one **owner digest** per owner over the owner messages the diagnosis wrote
  (``diagnosis/messages/cluster=<c>/date=<d>/<job_id>.json``) for jobs no earlier digest covered; and a
  **page** for each infrastructure failure this run diagnosed of a job with at least the routing file's
  ``oncall.gpu_threshold`` GPUs.
* :func:`queue_recovery_page` (``recover_training``, and the approval step): a page update with the
  recovery's state from its action log, for a job of at least that many GPUs (its nodes ×
  ``ACME_RECOVERY_GPUS_PER_NODE``); each state is paged once.
"""

from __future__ import annotations

import json
from datetime import date, datetime
from typing import TYPE_CHECKING, Any

from acme import lake_keys
from acme.notify import messages as msgs
from acme.notify.outbox import enqueue, known_messages

if TYPE_CHECKING:
    from acme.lake import Lake
    from acme.notify.routing import Routing


def _run_jobs(plan: dict[str, Any]) -> dict[tuple[str, str], dict[str, dict[str, Any]]]:
    """The plan's jobs by ``(cluster, submit day)`` (where their records and owner messages are)."""
    from acme.diagnosis.pipeline import job_submit_day

    items = list(plan.get("without_log") or []) + [i for chunk in plan.get("chunks") or [] for i in chunk]
    grouped: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for item in items:
        day = job_submit_day(item["job"], date.fromisoformat(item["day"])).isoformat()
        grouped.setdefault((item["cluster"], day), {})[str(item["job"]["job_id"])] = item["job"]
    return grouped


def queue_run_messages(lake: Lake, plan: dict[str, Any], routing: Routing, report_url: str) -> dict[str, Any]:
    """Queue the digests and pages a ``diagnose_failures`` run owes (module docstring); returns counts."""
    counts = {"digests": 0, "pages": 0, "owners": 0, "already_queued": 0}
    for (cluster, day), jobs in sorted(_run_jobs(plan).items()):
        known = known_messages(lake, cluster, day)
        digested = {j for m in known if m.get("kind") == "digest" for j in m.get("jobs") or []}
        owner_messages = []
        for job_id in sorted(set(jobs) - digested):
            key = lake_keys.diagnosis_message(cluster, day, job_id)
            if lake.exists(key):
                owner_messages.append(lake.read_json(key))
        link = msgs.report_link(report_url, lake, cluster, day)
        for user, mine in sorted(msgs.owner_messages_by_user(owner_messages).items()):
            counts["owners"] += 1
            queued = enqueue(lake, msgs.owner_digest(user, cluster, day, mine, link))
            counts["digests" if queued else "already_queued"] += 1
        for message in _pages(lake, cluster, day, jobs, plan["created_at"], routing.gpu_threshold):
            queued = enqueue(lake, message)
            counts["pages" if queued else "already_queued"] += 1
    return counts


def _pages(
    lake: Lake, cluster: str, day: str, jobs: dict[str, dict[str, Any]], since: str, threshold: int
) -> list[dict[str, Any]]:
    """Pages for the infrastructure failures diagnosed since ``since`` among ``jobs`` at or above ``threshold``
    GPUs."""
    from acme.diagnosis.records import DiagnosisRecord, partition_key
    from acme.diagnosis.routing import RECOVERY, route

    key = partition_key(cluster, date.fromisoformat(day))
    if not lake.exists(key):
        return []
    pages = []
    for row in lake.read_parquet(key).to_pylist():
        job = jobs.get(row["job_id"])
        if job is None or row.get("category") != "Infrastructure" or row.get("attribution") == "user":
            continue
        if row["diagnosed_at"] is None or row["diagnosed_at"] < datetime.fromisoformat(since):
            continue
        if int(job.get("gpu_num") or 0) < threshold:
            continue
        row = {**row, "evidence": json.loads(row.get("evidence") or "[]"), "date": row["date"].isoformat()}
        record = DiagnosisRecord(**{k: v for k, v in row.items() if k not in ("evidence", "similar_cases", "date")},
                                 date=date.fromisoformat(row["date"]), evidence=row["evidence"])  # fmt: skip
        decided = route(record, job)
        conf = decided.recovery_conf if decided.kind == RECOVERY else None
        log, url = _action_log(lake, conf)
        diagnosis = {**row, "no_recovery_why": decided.why}
        pages.append(msgs.page(diagnosis, {**job, "nodes": (conf or {}).get("nodes")}, conf, log, url))
    return pages


def _action_log(lake: Lake, conf: dict[str, Any] | None) -> tuple[list[dict[str, Any]], str | None]:
    if conf is None:
        return [], None
    from acme.recovery.actions import ActionLog

    log = ActionLog(lake, conf["cluster"], conf["job_id"], conf["recovery_id"])
    return log.records(), lake.url(log.key)


def queue_recovery_page(
    lake: Lake, request: dict[str, Any], routing: Routing, gpus_per_node: int
) -> dict[str, Any] | None:
    """Queue a page with the recovery's current state (``request``: the recovery request's fields, as
    ``acme.recovery.recover.RecoveryRequest.to_dict`` or the DAG's Params give them); None when the job is
    below the GPU threshold. Returns the message (queued now, or already queued or sent before)."""
    nodes = list(request.get("nodes") or [])
    gpus = len(nodes) * gpus_per_node
    if gpus < routing.gpu_threshold:
        return None
    log, url = _action_log(lake, request)
    detected = str(request.get("detected_at") or "")[:10] or datetime.now().date().isoformat()
    diagnosis = {"cluster": request["cluster"], "job_id": request["job_id"], "date": detected,
                 "reason": request.get("reason") or "a crash", "category": "Infrastructure",
                 "confidence": None, "source": "recover_training", "evidence": []}  # fmt: skip
    job = {"job_id": request["job_id"], "gpu_num": gpus, "job_type": request.get("job_type")}
    message = msgs.page(diagnosis, job, request, log, url)
    if message["recovery_state"] == "requested":  # nothing recorded yet: the diagnosis's page said so
        return None
    message["text"] = message["text"].replace(
        "  (no log lines)", "  (in the first page and the diagnosis record)"
    )
    enqueue(lake, message)
    return message
