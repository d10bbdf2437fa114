"""Where a diagnosis goes: a recovery request for broken infrastructure under a training job, a message to
the job's owner for failures of their own making, nothing otherwise.

* Infrastructure failures of ``Pretrain`` / ``SFT`` jobs -> a recovery request
  (``acme.recovery.request.RecoveryRequest``, always a dry run when only the LLM agent says so), sent as
  the conf of the ``recover_training`` DAG (``Route.recovery_conf``: the request's ``to_conf()``, its
  Params; ``checkpoint_uri`` is the job record's, or "": recover_training then takes
  ``ACME_CHECKPOINT_URI_PATTERN``; the hung job's Flight Recorder dumps likewise, by
  ``ACME_FLIGHT_RECORDER_URI_PATTERN``). Without a node list there is nothing to localize, so
  no recovery. Evaluation and debug jobs are cheap to resubmit, so they are not recovered automatically.
* User-attributed failures -> an owner message (job, reason, evidence, mitigation) written to
  ``diagnosis/messages/cluster=<c>/date=<d>/<job_id>.json`` (rewritten, never appended, on a re-run).
* ``Unknown`` and anything else -> no route; the record itself is the report.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from acme.hostlist import expand_hostlist

if TYPE_CHECKING:
    from acme.diagnosis.records import DiagnosisRecord
    from acme.lake import Lake
    from acme.recovery.request import RecoveryRequest

RECOVERY = "recovery"
OWNER_MESSAGE = "owner_message"
NO_ROUTE = "none"
TRAINING_JOB_TYPES = ("Pretrain", "SFT")


@dataclass(frozen=True)
class Route:
    kind: str
    why: str
    recovery: RecoveryRequest | None = None
    message: dict[str, Any] | None = None

    @property
    def recovery_conf(self) -> dict[str, Any] | None:
        """The ``recover_training`` run conf of the recovery request (None without one)."""
        return None if self.recovery is None else self.recovery.to_conf()

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "why": self.why,
            "recovery_conf": self.recovery_conf,
            "message": self.message,
        }


def recovery_dry_run() -> bool:
    """Whether the recovery requests of the diagnosis are dry runs: the one setting recovery's own default
    follows too (``ACME_RECOVERY_DRY_RUN``: ``acme.settings.RecoverySettings.dry_run``)."""
    from acme import settings

    return settings.recovery().dry_run


def route(record: DiagnosisRecord, job: dict[str, Any] | None) -> Route:
    """Decide what happens after ``record`` (see the module docstring)."""
    job = job or {}
    job_type = job.get("job_type")
    if record.reason == "Unknown" or record.category is None:
        return Route(NO_ROUTE, "root cause unknown: nothing to trigger")
    if record.category == "Infrastructure" and record.attribution != "user":
        if job_type not in TRAINING_JOB_TYPES:
            return Route(NO_ROUTE, f"infrastructure failure of a {job_type or 'untyped'} job: not recovered")
        nodes = expand_hostlist(job.get("node_list"))
        if not nodes:  # recover_training localizes faults among the job's nodes: it cannot start without them
            return Route(NO_ROUTE, f"{record.reason} under a {job_type} job, but its node list is unknown")
        request = recovery_request(record, job, nodes)
        return Route(RECOVERY, f"{record.reason} under a {job_type} job", recovery=request)
    if record.attribution == "user":
        return Route(OWNER_MESSAGE, f"{record.reason} is the job's own", message=owner_message(record, job))
    return Route(NO_ROUTE, f"{record.reason} ({record.category}, {record.attribution}) has no route")


def recovery_request(record: DiagnosisRecord, job: dict[str, Any], nodes: list[str]) -> RecoveryRequest:
    """The recovery request for an infrastructure failure of a training job on ``nodes``."""
    from acme.recovery.request import DIAGNOSIS_SOURCES, MAX_EVIDENCE_LINES, RecoveryRequest

    return RecoveryRequest(
        cluster=record.cluster,
        job_id=record.job_id,
        nodes=tuple(nodes),
        # From the job record when it says; else recover_training finds it (ACME_CHECKPOINT_URI_PATTERN).
        checkpoint_uri=job.get("checkpoint_uri") or "",
        # One recovery per job and failure, however often the diagnosis is re-run.
        recovery_id=re.sub(r"[^A-Za-z0-9._-]", "-", f"diag-{record.cluster}-{record.job_id}")[:128],
        # The LLM's answer is untrusted (a log can carry a prompt injection): a diagnosis that only the
        # agent made plans a recovery but never cordons or restarts; a rule, a past case or an operator
        # has to agree first.
        dry_run=recovery_dry_run() or record.source == "llm",
        reason=record.reason,
        detected_at=str(job["end_time"]) if job.get("end_time") else None,
        # What the approval form shows and the auto-approve policy reads (acme.recovery.approval).
        diagnosis_source=record.source if record.source in DIAGNOSIS_SOURCES else "manual",
        confidence=round(float(record.confidence), 4),
        evidence=tuple(str(e.get("text", ""))[:500] for e in record.evidence[:MAX_EVIDENCE_LINES]),
    )


def owner_message(record: DiagnosisRecord, job: dict[str, Any]) -> dict[str, Any]:
    """The message for the job's owner: what failed, the evidence lines, what to do."""
    evidence = "\n".join(f"  line {e['line']}: {e['text']}" for e in record.evidence) or "  (no log lines)"
    name = f" ({job['job_name']})" if job.get("job_name") else ""
    text = (
        f"Your job {record.job_id}{name} on {record.cluster} failed: {record.reason} "
        f"({record.category}; confidence {record.confidence:.2f}, found by {record.source}).\n"
        f"Evidence:\n{evidence}\n"
        f"What to do: {record.mitigation or 'see the evidence lines.'}\n"
    )
    return {
        "to": job.get("user"),
        "cluster": record.cluster,
        "job_id": record.job_id,
        "job_name": job.get("job_name"),
        "date": record.date.isoformat(),
        "subject": f"Job {record.job_id} failed: {record.reason}",
        "text": text,
        "reason": record.reason,
        "category": record.category,
        "evidence": record.evidence,
        "mitigation": record.mitigation,
        # For the owner digest (acme.notify): whose job, how large, the GPU-hours it used before failing.
        "user": job.get("user"),
        "job_type": job.get("job_type"),
        "gpus": job.get("gpu_num"),
        "gpu_hours": round(float(job.get("gpu_time") or 0.0) / 3600.0, 3),
    }


def message_key(record: DiagnosisRecord) -> str:
    from acme import lake_keys

    return lake_keys.diagnosis_message(record.cluster, record.date, record.job_id)


def write_owner_message(lake: Lake, record: DiagnosisRecord, message: dict[str, Any]) -> str:
    """Publish the owner message (one object per job: a re-run overwrites it)."""
    return lake.write_json(message_key(record), message)
