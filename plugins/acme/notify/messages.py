"""The three messages: the owner digest, the on-call page and the late notice. Each is a JSON-ready dict::

    {"id", "kind": "digest" | "page" | "late", "cluster", "date", "recipient", "subject", "text", ...}

``id`` names the content (so composing it again finds the same message: :mod:`acme.notify.outbox`),
``recipient`` is the owner's user (digest) or ``oncall`` (page, late notice): the routing file turns it
into a channel and an address at delivery time.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from acme import lake_keys

if TYPE_CHECKING:
    from acme.lake import Lake

_JOBS_SHOWN = 20
_NODES_SHOWN = 16


def _digest_of(parts: Iterable[str]) -> str:
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:12]


def _hours(value: float) -> str:
    return f"{value:.2f}" if value < 10 else f"{value:.1f}"


def report_link(report_url: str, lake: Lake, cluster: str, day: str) -> str:
    """Where the day's characterization report is: under ``ACME_NOTIFY_REPORT_URL``, else in the lake."""
    page = f"{lake_keys.report(cluster, day, root='')}/index.html"
    if report_url:
        return f"{report_url.rstrip('/')}/{page}"
    return lake.url(f"{lake_keys.REPORTS}/{page}")


# --- owner digest ---------------------------------------------------------------------------------


def owner_digest(
    user: str, cluster: str, day: str, owner_messages: list[dict[str, Any]], report: str
) -> dict[str, Any]:
    """One message for ``user`` about their failed jobs of ``(cluster, day)``, grouped by reason (most GPU-hours
    lost first), each reason with its jobs, GPU-hours lost, one evidence line and the mitigation; from the
    diagnosis's owner messages (``acme.diagnosis.routing.owner_message``)."""
    by_reason: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for message in owner_messages:
        by_reason[message.get("reason") or "Unknown"].append(message)
    total_hours = sum(float(m.get("gpu_hours") or 0.0) for m in owner_messages)
    lines = [
        f"Hello {user or 'job owner'},",
        "",
        f"{len(owner_messages)} of your jobs on {cluster} submitted on {day} failed, "
        f"{_hours(total_hours)} GPU-hours lost. By reason:",
    ]
    groups = sorted(
        by_reason.items(), key=lambda kv: (-sum(float(m.get("gpu_hours") or 0) for m in kv[1]), kv[0])
    )
    for reason, jobs in groups:
        lines += ["", *_reason_block(reason, jobs)]
    lines += ["", f"Report: {report}", "", "-- acme-pipeline (diagnose_failures)"]
    job_ids = sorted(str(m["job_id"]) for m in owner_messages)
    return {
        "id": f"digest-{cluster}-{day}-{lake_keys.safe_name(user)}-{_digest_of(job_ids)}",
        "kind": "digest",
        "cluster": cluster,
        "date": day,
        "recipient": user,
        "subject": f"[acme] {cluster} {day}: {len(owner_messages)} of your jobs failed "
        f"({len(by_reason)} reason{'s' if len(by_reason) != 1 else ''}, {_hours(total_hours)} GPU-hours)",
        "text": "\n".join(lines) + "\n",
        "jobs": job_ids,
        "report": report,
    }


def _reason_block(reason: str, jobs: list[dict[str, Any]]) -> list[str]:
    hours = sum(float(m.get("gpu_hours") or 0.0) for m in jobs)
    ids = sorted(str(m["job_id"]) for m in jobs)
    shown = ", ".join(ids[:_JOBS_SHOWN]) + (
        f" and {len(ids) - _JOBS_SHOWN} more" if len(ids) > _JOBS_SHOWN else ""
    )
    block = [f"{reason} ({jobs[0].get('category') or 'uncategorized'}): {len(jobs)} job(s), {_hours(hours)} GPU-hours lost",
             f"  jobs: {shown}"]  # fmt: skip
    with_evidence = next((m for m in jobs if m.get("evidence")), None)
    if with_evidence is not None:
        first = with_evidence["evidence"][0]
        block.append(
            f"  evidence (job {with_evidence['job_id']}, line {first.get('line')}): {first.get('text')}"
        )
    else:
        block.append("  evidence: (no log lines: diagnosed from the job's metadata)")
    block.append(f"  what to do: {jobs[0].get('mitigation') or 'see the evidence lines.'}")
    return block


def owner_messages_by_user(messages: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The diagnosis's owner messages grouped by the job's user (``""`` for jobs without one)."""
    grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for message in messages:
        grouped[str(message.get("user") or message.get("to") or "")].append(message)
    return dict(grouped)


# --- on-call page ---------------------------------------------------------------------------------


def recovery_state(records: list[dict[str, Any]]) -> tuple[str, str]:
    """The recovery's state from its action log (``acme.recovery.actions``): ``(state, detail)``, state one of
    requested, in progress, awaiting approval, approved, rejected, approval timed out, planned, restarted,
    needs a person, failed."""
    if not records:
        return "requested", "recover_training has not written its action log yet"
    for record in reversed(records):
        state = _state_of(record)
        if state is not None:
            return state
    last = records[-1]
    return "in progress", f"last step {last.get('step')}: {last.get('status')}"


_APPROVAL_STATES = {
    "awaiting": "awaiting approval",
    "approved": "approved",
    "rejected": "rejected",
    "timed_out": "approval timed out",
}


def _state_of(record: dict[str, Any]) -> tuple[str, str] | None:
    step, status = record.get("step"), record.get("status")
    result = record.get("result") or {}
    if step == "approval" and status in _APPROVAL_STATES:
        who = result.get("by") or result.get("responded_by")
        why = result.get("reason") or result.get("comment")
        detail = ", ".join(p for p in (f"by {who}" if who else "", why or "") if p) or status
        return _APPROVAL_STATES[status], detail
    if status == "needs-person":
        return "needs a person", str(record.get("error") or "")
    if status == "failed":
        return "failed", f"step {step}: {record.get('error') or ''}"
    if step == "restart" and status == "planned":
        return "planned", str(result.get("planned") or "dry run")
    if step == "restart" and status == "done":
        return (
            "restarted",
            f"at {result.get('restarted_at')}, {result.get('detection_to_restart_s')} s after detection",
        )
    return None


def suspect_nodes(records: list[dict[str, Any]], job_nodes: list[str]) -> str:
    """The nodes the recovery's checks blamed, else the job's nodes (none decided yet)."""
    for record in reversed(records):
        if record.get("step") == "decide" and not record.get("dry_run"):
            result = record.get("result") or {}
            faulty = list(result.get("faulty") or [])
            stragglers = list(result.get("stragglers") or [])
            if faulty or stragglers:
                return ", ".join(faulty) + (f" (stragglers: {', '.join(stragglers)})" if stragglers else "")
            return "none: every node passed the checks"
    shown = ", ".join(job_nodes[:_NODES_SHOWN]) + (
        f" … ({len(job_nodes)} in all)" if len(job_nodes) > _NODES_SHOWN else ""
    )
    return f"not localized yet; the job's nodes: {shown or 'unknown'}"


def page(
    diagnosis: dict[str, Any],
    job: dict[str, Any],
    recovery: dict[str, Any] | None,
    action_log: list[dict[str, Any]],
    action_log_url: str | None,
) -> dict[str, Any]:
    """The on-call page of an infrastructure failure: the job, the diagnosis and its evidence, the suspect
    nodes, the recovery's state and where its action log is. ``diagnosis``: reason, category, confidence,
    source, evidence, mitigation, cluster, job_id, date; ``recovery``: the recovery request (None: no
    recovery, the page says why)."""
    cluster, job_id = diagnosis["cluster"], str(diagnosis["job_id"])
    nodes = list((recovery or {}).get("nodes") or job.get("nodes") or [])
    if recovery is None:
        state, detail = (
            "no recovery",
            str(diagnosis.get("no_recovery_why") or "not a training job with a node list"),
        )
    else:
        state, detail = recovery_state(action_log)
    evidence = (
        "\n".join(f"  line {e.get('line')}: {e.get('text')}" for e in diagnosis.get("evidence") or [])
        or "  (no log lines)"
    )
    gpus = job.get("gpu_num")
    confidence = diagnosis.get("confidence")
    found = (
        f"confidence {float(confidence):.2f}, " if confidence is not None else ""
    ) + f"found by {diagnosis.get('source')}"
    lines = [
        f"Job {job_id}{' (' + str(job['job_name']) + ')' if job.get('job_name') else ''} on {cluster} failed: "
        f"{diagnosis['reason']} ({diagnosis.get('category')}; {found}).",
        f"Job: {job.get('job_type') or 'untyped'}, {gpus if gpus is not None else '?'} GPUs, user {job.get('user') or '?'}.",
        f"Evidence:\n{evidence}",
        f"Suspect nodes: {suspect_nodes(action_log, nodes)}",
        f"Recovery: {state} ({detail})" + (" [dry run]" if (recovery or {}).get("dry_run") else ""),
    ]
    if action_log_url:
        lines.append(f"Action log: {action_log_url}")
    if diagnosis.get("mitigation"):
        lines.append(f"What to do: {diagnosis['mitigation']}")
    recovery_id = (recovery or {}).get("recovery_id") or "none"
    return {
        "id": f"page-{cluster}-{lake_keys.safe_name(job_id)}-{lake_keys.safe_name(recovery_id)}-{state.replace(' ', '_')}",
        "kind": "page",
        "cluster": cluster,
        "date": str(diagnosis["date"]),
        "recipient": "oncall",
        "subject": f"[acme page] {cluster}: {diagnosis['reason']} on job {job_id} "
        f"({gpus if gpus is not None else '?'} GPUs) - recovery {state}",
        "text": "\n".join(lines) + "\n",
        "jobs": [job_id],
        "recovery_state": state,
        "action_log": action_log_url,
    }


# --- late notice ----------------------------------------------------------------------------------


def late_notice(
    dag_id: str, run_id: str, cluster: str, day: str, deadline: str, state: str
) -> dict[str, Any]:
    """The notice that a nightly DAG run missed its deadline (``ACME_NOTIFY_DEADLINE_HOUR``)."""
    return {
        "id": f"late-{lake_keys.safe_name(dag_id)}-{lake_keys.safe_name(run_id)}-{cluster}",
        "kind": "late",
        "cluster": cluster,
        "date": day,
        "recipient": "oncall",
        "subject": f"[acme late] {dag_id} for {day} is not done by {deadline}",
        "text": (
            f"The nightly chain is late: {dag_id} run {run_id} (data of {day}) was still {state} at its "
            f"deadline {deadline}. The owner digests and the day's reports wait for it.\n"
            "Look at the run in the Airflow UI (Browse > DAG Runs) and at its failed or queued tasks.\n"
        ),
        "jobs": [],
    }
