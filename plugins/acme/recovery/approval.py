"""Approval before a live recovery cordons, drains or restarts: the policy, the form, the log records.

A **dry run** touches no cluster, so nothing is asked. A **live** recovery (``ACME_RECOVERY_DRY_RUN=false``
or the ``dry_run: false`` Param) stops after its verdict and checkpoint choice, before the first cordon,
and asks a person through Airflow's human-in-the-loop form (``recover_training``'s ``approve`` task),
unless the **auto-approve policy** allows it on its own (:func:`policy_decision`):

* the diagnosis was made by a source the policy trusts (``ACME_RECOVERY_AUTO_APPROVE_SOURCES``, default
  ``rule``: a rule of ``include/diagnosis/rules.yaml`` or a learned one; never the LLM agent, whose
  recoveries are dry runs anyway, and never a run started by hand);
* at most ``ACME_RECOVERY_AUTO_APPROVE_MAX_NODES`` nodes (default 1) are to be cordoned;
* the check left no node undecided, and a healthy checkpoint was found;
* ``ACME_RECOVERY_AUTO_APPROVE`` is not ``false`` (it switches the policy off: every live recovery asks).

The form (:func:`approval_form`) shows the diagnosis, its evidence lines, the suspect nodes, the blast
radius and the checkpoint the job would restart from. An **unanswered** question times out after
``ACME_RECOVERY_APPROVAL_TIMEOUT_S`` (default 3600 s): the recovery then ends as a plan (the cordons and
the restart recorded as ``planned``), never as a live action; so does a **rejection**.

Every approval event is a record of the recovery's action log (``acme.recovery.actions``), step
``approval``, idempotency key ``approval``::

    {"step": "approval", "status": "awaiting|approved|auto_approved|rejected|timed_out",
     "by": "<who answered: a user name, 'policy' or 'timeout'>", "reason": "<why>",
     "inputs": {<the plan asked about>}, "result": {...}, "dry_run": false, ...}

No Airflow import here: ``acme_airflow.approval`` adapts this to the HITL operator.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from acme.recovery.actions import utc_now

if TYPE_CHECKING:
    from acme.recovery.actions import ActionLog
    from acme.recovery.request import RecoveryRequest
    from acme.settings import RecoverySettings

APPROVAL_STEP = "approval"
AWAITING, APPROVED, AUTO_APPROVED, REJECTED, TIMED_OUT = (
    "awaiting", "approved", "auto_approved", "rejected", "timed_out",
)  # fmt: skip
APPROVAL_STATUSES = (AWAITING, APPROVED, AUTO_APPROVED, REJECTED, TIMED_OUT)
GRANTED = (APPROVED, AUTO_APPROVED)
APPROVE, REJECT = "Approve", "Reject"
"""The form's two options (the labels of Airflow's ``ApprovalOperator``)."""


@dataclass(frozen=True)
class ApprovalPolicy:
    """When a live recovery may act without asking (module docstring), and how long a question waits."""

    auto_approve: bool = True
    sources: tuple[str, ...] = ("rule",)
    max_nodes: int = 1
    timeout_s: float = 3600.0

    @classmethod
    def from_settings(cls, settings: RecoverySettings) -> ApprovalPolicy:
        return cls(
            auto_approve=settings.auto_approve,
            sources=settings.auto_approve_sources,
            max_nodes=settings.auto_approve_max_nodes,
            timeout_s=settings.approval_timeout_s,
        )


@dataclass(frozen=True)
class PlannedActions:
    """What a live recovery would do once approved: the facts the form shows and the policy reads."""

    to_cordon: tuple[str, ...]
    stragglers: tuple[str, ...]
    undecided: tuple[str, ...]
    job_nodes: int
    blast_radius: str
    blast_radius_allowed: bool
    checkpoint: str | None
    checkpoint_step: int | None
    skip_batches: tuple[tuple[int, int], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (lists, not tuples: the same dict before and after XCom)."""
        data = asdict(self)
        for name in ("to_cordon", "stragglers", "undecided"):
            data[name] = list(data[name])
        data["skip_batches"] = [list(pair) for pair in self.skip_batches]
        return data


@dataclass(frozen=True)
class PolicyDecision:
    """``ask``: a person must answer first; ``auto``: the policy approves; neither: nothing to approve
    (a dry run, or a recovery that stops for a person before any action)."""

    ask: bool
    auto: bool
    why: str


def planned_actions(
    verdict: Mapping[str, Any],
    to_cordon: Sequence[str],
    job_nodes: int,
    blast_radius: Any,
    checkpoint: Mapping[str, Any],
) -> PlannedActions:
    """The plan from the verdict, the blast-radius decision (``CordonDecision``) and the checkpoint choice."""
    return PlannedActions(
        to_cordon=tuple(to_cordon),
        stragglers=tuple(str(node) for node in verdict.get("stragglers") or []),
        undecided=tuple(str(u["node"]) for u in verdict.get("undecided") or []),
        job_nodes=job_nodes,
        blast_radius=blast_radius.reason,
        blast_radius_allowed=bool(blast_radius.allowed),
        checkpoint=checkpoint.get("path"),
        checkpoint_step=checkpoint.get("step"),
        skip_batches=tuple((int(r["first"]), int(r["last"])) for r in checkpoint.get("skip_batches") or []),
    )


def policy_decision(request: RecoveryRequest, plan: PlannedActions, policy: ApprovalPolicy) -> PolicyDecision:
    """Whether to ask, approve on the policy's authority, or neither (see the module docstring)."""
    if request.dry_run:
        return PolicyDecision(False, False, "a dry run touches no cluster: nothing to approve")
    if not plan.blast_radius_allowed:
        return PolicyDecision(False, False, f"stops for a person before any action: {plan.blast_radius}")
    if not policy.auto_approve:
        return PolicyDecision(True, False, "ACME_RECOVERY_AUTO_APPROVE=false: every live recovery asks")
    refusals = []
    if request.diagnosis_source not in policy.sources:
        refusals.append(
            f"diagnosed by {request.diagnosis_source}, not by {' or '.join(policy.sources) or 'a trusted source'}"
        )
    if len(plan.to_cordon) > policy.max_nodes:
        refusals.append(f"{len(plan.to_cordon)} nodes to cordon, more than {policy.max_nodes}")
    if plan.undecided:
        refusals.append(f"{len(plan.undecided)} node(s) undecided")
    if not plan.checkpoint:
        refusals.append("no healthy checkpoint")
    if refusals:
        return PolicyDecision(True, False, "the auto-approve policy does not apply: " + "; ".join(refusals))
    return PolicyDecision(
        False,
        True,
        f"the auto-approve policy applies: {request.reason or 'the failure'} decided by "
        f"{request.diagnosis_source}, {len(plan.to_cordon)} node(s) to cordon (at most {policy.max_nodes}), "
        "a healthy checkpoint",
    )


def approval_form(request: RecoveryRequest, plan: PlannedActions, timeout_s: float) -> tuple[str, str]:
    """The question's subject and Markdown body: diagnosis, evidence, suspect nodes, blast radius, checkpoint."""
    subject = (
        f"Approve live recovery of job {request.job_id} on {request.cluster}: "
        f"cordon {', '.join(plan.to_cordon) or 'no node'} and restart?"
    )
    confidence = f", confidence {request.confidence:.2f}" if request.confidence is not None else ""
    evidence = (
        "\n".join(f"    {line}" for line in request.evidence) or "    (no evidence lines: started by hand)"
    )
    checkpoint = (
        f"`{plan.checkpoint}` (step {plan.checkpoint_step})"
        if plan.checkpoint
        else "none healthy: no restart"
    )
    skips = ", ".join(f"{a}-{b}" for a, b in plan.skip_batches) or "none"
    body = "\n".join(
        [
            f"**Diagnosis**: {request.reason or 'not given'} (by {request.diagnosis_source}{confidence})",
            "",
            "**Evidence lines**:",
            "",
            evidence,
            "",
            f"**Suspect nodes** (failed the all-gather check twice): {', '.join(plan.to_cordon) or 'none'}",
            f"**Stragglers** (reported, not cordoned): {', '.join(plan.stragglers) or 'none'}",
            f"**Undecided**: {', '.join(plan.undecided) or 'none'}",
            f"**Blast radius**: {len(plan.to_cordon)} of {plan.job_nodes} nodes: {plan.blast_radius}",
            f"**Restart from**: {checkpoint}; batches skipped: {skips}",
            "",
            f"Recovery `{request.recovery_id}`. **Approve** cordons the suspect nodes and restarts the job; "
            f"**Reject** (give a reason) ends the recovery as a plan. Unanswered after {timeout_s:.0f} s, it "
            "ends as a plan too: nothing is cordoned or restarted without an answer.",
        ]
    )
    return subject, body


def record_approval(
    log: ActionLog,
    status: str,
    by: str,
    reason: str,
    plan: PlannedActions | Mapping[str, Any],
    result: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Append one approval event to the recovery's action log (module docstring); returns the record."""
    if status not in APPROVAL_STATUSES:
        raise ValueError(f"approval status {status!r} is not one of {', '.join(APPROVAL_STATUSES)}")
    now = utc_now()
    inputs = plan.to_dict() if isinstance(plan, PlannedActions) else dict(plan)
    return log.append(
        {"step": APPROVAL_STEP, "idempotency_key": APPROVAL_STEP, "dry_run": False, "inputs": inputs,
         "started_at": now, "ended_at": now, "seconds": 0.0, "status": status, "by": by, "reason": reason,
         "result": dict(result or {})}
    )  # fmt: skip


def approval_outcome(log: ActionLog) -> dict[str, Any] | None:
    """The last answered approval event of the recovery (approved, auto-approved, rejected, timed out)."""
    answered = [
        r for r in log.records() if r.get("step") == APPROVAL_STEP and r.get("status") not in (None, AWAITING)
    ]
    return answered[-1] if answered else None


def answer_status(chosen: Sequence[str], timed_out: bool) -> str:
    """The approval status of a HITL answer: only an explicit ``Approve`` approves."""
    if timed_out:
        return TIMED_OUT
    return APPROVED if list(chosen) == [APPROVE] else REJECTED


def form_of_recovery(records: Sequence[Mapping[str, Any]], timeout_s: float) -> tuple[str, str] | None:
    """The approval question of a recorded live recovery, as an operator is (or would have been) asked it:
    the request from its ``open`` record, the plan from its last approval event. None before a plan exists
    (a dry run, or a recovery that stopped for a person before any action)."""
    from acme.recovery.request import RecoveryRequest

    opened = next((r for r in records if r.get("step") == "open"), None)
    events = [r for r in records if r.get("step") == APPROVAL_STEP]
    if opened is None or not events:
        return None
    request = RecoveryRequest.from_dict(opened["inputs"]["request"])
    planned = dict(events[-1]["inputs"])
    for name in ("to_cordon", "stragglers", "undecided"):
        planned[name] = tuple(planned[name])
    planned["skip_batches"] = tuple(tuple(pair) for pair in planned.get("skip_batches") or ())
    return approval_form(request, PlannedActions(**planned), timeout_s)
