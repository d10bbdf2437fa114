"""Airflow's human-in-the-loop operators for the recovery approval and the diagnosis triage.

Both subclass ``airflow.providers.standard.operators.hitl.HITLOperator``: the question is written to
Airflow's HITL table (the UI's "Required Actions", the REST API's
``PATCH /api/v2/dags/{dag}/dagRuns/{run}/taskInstances/{task}/{map_index}/hitlDetails``). On Airflow 3.3
the task then waits in the ``awaiting_input`` state (no worker slot, no triggerer) until an answer arrives
through the api-server, or until ``response_timeout`` passes and the scheduler's timeout sweep resumes it
with a timeout event (no ``defaults`` are set, so a time-out is never taken for an answer); then
``execute_complete`` hands the outcome to the domain (``acme.recovery.approval``, ``acme.diagnosis.triage``).
Neither fails on a rejection or a time-out: both are outcomes, recorded in the lake, and the tasks after
them read those records. ``dag.test()`` never sweeps time-outs: there an answer must come from an
api-server sharing its metadata database.
"""

from __future__ import annotations

from typing import Any

from airflow.providers.standard.operators.hitl import HITLOperator
from airflow.sdk import Param

ANSWER_FIELD = "why"
"""The approval form's free-text field: why the operator approves or rejects (the record's ``reason``)."""


def _who(event: dict[str, Any]) -> str:
    """Who answered, from a HITL resume event (Airflow 3.3: ``responded_by_user`` {id, name})."""
    user = event.get("responded_by_user") or event.get("responded_by") or {}
    if isinstance(user, dict):
        return str(user.get("name") or user.get("id") or "unknown user")
    return str(user or "unknown user")


def _timed_out(event: dict[str, Any]) -> bool:
    return bool(event.get("timedout")) or event.get("error_type") == "timeout"


class RecoveryApprovalOperator(HITLOperator):
    """Asks before a live recovery cordons, drains or restarts (``acme.recovery.approval``).

    ``finished`` is ``decide_and_restart``'s manifest: when it is not ``awaiting_approval`` (a dry run,
    the auto-approve policy, a recovery that stopped for a person) the task is skipped and nothing is
    asked. Otherwise the form shows its subject and body, ``awaiting`` is recorded in the action log, and
    the answer (``approved``/``rejected`` with who and why) or ``timed_out`` is recorded when it comes.
    """

    template_fields = (*HITLOperator.template_fields, "opened", "finished")

    def __init__(self, *, opened: Any, finished: Any, **kwargs: Any) -> None:
        from acme.recovery.approval import APPROVE, REJECT

        # The DAG's own Params arrive here too: HITLOperator keeps only the task's (the form's fields).
        kwargs.pop("params", None)
        params = {}
        # Not "reason": the UI fills a form field from the run's conf of the same name (the failure reason).
        params[ANSWER_FIELD] = Param(
            "", type="string", title="Reason", source="task",
            description="Why you approve or reject (kept in the recovery's action log).",
        )  # fmt: skip
        super().__init__(
            subject="Approve a live recovery?",
            options=[APPROVE, REJECT],
            multiple=False,
            params=params,
            **kwargs,
        )
        self.opened = opened
        self.finished = finished

    def execute(self, context: Any) -> Any:
        from airflow.sdk.exceptions import AirflowSkipException

        from acme.recovery.approval import AWAITING, record_approval
        from acme.recovery.recover import action_log
        from acme.recovery.request import opened_request
        from acme_airflow.tasks import lake_task

        if not self.finished or not self.finished.get("awaiting_approval"):
            why = (self.finished or {}).get("approval", {}).get("why", "nothing to approve")
            raise AirflowSkipException(f"no question asked: {why}")
        approval = self.finished["approval"]
        self.subject, self.body = approval["subject"], approval["body"]
        with lake_task() as lake:
            log = action_log(lake, opened_request(self.opened))
            record_approval(log, AWAITING, "", approval["why"], approval["plan"],
                            {"subject": self.subject, "task": f"{context['dag'].dag_id}.{self.task_id}",
                             "run_id": context["run_id"], "timeout_s": approval["timeout_s"]})  # fmt: skip
        return super().execute(context)

    def execute_complete(self, context: Any, event: dict[str, Any]) -> dict[str, Any]:
        from acme.recovery.approval import TIMED_OUT, answer_status, record_approval
        from acme.recovery.recover import action_log
        from acme.recovery.request import opened_request
        from acme_airflow.tasks import lake_task

        plan = self.finished["approval"]["plan"]
        if _timed_out(event) or "error" in event:
            status, by = TIMED_OUT, "timeout"
            reason = f"no answer within {self.finished['approval']['timeout_s']:.0f} s: the recovery ends as a plan"
            if "error" in event and not _timed_out(event):
                reason = f"no answer ({event.get('error')}): the recovery ends as a plan"
        else:
            answer = super().execute_complete(context, event)
            status = answer_status(answer["chosen_options"], False)
            by = _who(event)
            reason = str((answer.get("params_input") or {}).get(ANSWER_FIELD) or "")
        with lake_task() as lake:
            record_approval(action_log(lake, opened_request(self.opened)), status, by, reason, plan)
        return {"status": status, "by": by, "reason": reason}


class TriageEntryOperator(HITLOperator):
    """Asks an operator for the reason of one failure (``acme.diagnosis.triage``); mapped, one per question.

    The answer becomes a labelled case and a candidate rule (``apply_answer``); a time-out expires the
    question (nothing learned, never asked again).
    """

    template_fields = (*HITLOperator.template_fields, "question")

    def __init__(self, *, question: str, **kwargs: Any) -> None:
        kwargs.setdefault("multiple", False)
        kwargs.pop("params", None)  # the DAG's Params; the form has its own
        params = {}
        params["note"] = Param(
            "", type="string", title="Note", source="task",
            description="What you saw (kept with the answer in the lake).",
        )  # fmt: skip
        kwargs["params"] = params
        super().__init__(**kwargs)
        self.question = question

    def execute_complete(self, context: Any, event: dict[str, Any]) -> dict[str, Any]:
        from acme.diagnosis.triage import apply_answer, expire_question
        from acme_airflow.tasks import lake_task

        with lake_task() as lake:
            if _timed_out(event) or "error" in event:
                return {
                    "question": self.question,
                    "status": "expired",
                    **expire_question(lake, self.question),
                }
            answer = super().execute_complete(context, event)
            reason = answer["chosen_options"][0]
            note = str((answer.get("params_input") or {}).get("note") or "")
            outcome = apply_answer(lake, self.question, reason, _who(event), note)
        print(f"triage answer {reason} by {_who(event)}: {outcome}")
        return {"question": self.question, "status": "answered", "reason": reason, **outcome}


def triage_forms(context: Any) -> list[dict[str, Any]]:
    """``plan_triage``'s body: the open triage questions claimed for this run, as the keyword arguments of
    one ``TriageEntryOperator`` each (the largest jobs first, at most ``ACME_TRIAGE_MAX_QUESTIONS``).

    A manual run (a crash's own diagnosis) claims none: it must not wait for a person, so its questions
    wait for the next nightly run."""
    from acme import settings
    from acme.diagnosis.triage import claim_questions, triage_form
    from acme_airflow.tasks import lake_task

    params = context["params"]
    wanted = settings.diagnosis()
    if params.get("job_id") or not wanted.triage:
        return []
    with lake_task() as lake:
        claimed = claim_questions(lake, context["run_id"], wanted.triage_max_questions)
    forms = []
    for question in claimed:
        subject, body = triage_form(question)
        forms.append(
            {"question": question.key, "subject": subject, "body": body, "options": list(question.options)}
        )
    print(
        f"{len(forms)} triage question(s) for an operator (ACME_TRIAGE_MAX_QUESTIONS={wanted.triage_max_questions})"
    )
    return forms


def triage_after(published: Any) -> Any:
    """The triage of a ``diagnose_failures`` run, after ``published`` (so a question never delays a
    recovery): ``plan_triage`` claims the open questions, and one mapped ``triage`` form asks each, deferred
    (no worker slot) until answered or ``ACME_TRIAGE_TIMEOUT_S``. Returns the mapped forms."""
    from datetime import timedelta

    from airflow.sdk import get_current_context, task

    from acme import settings

    @task
    def plan_triage() -> list[dict]:
        """Claim the open triage questions for this run's forms (acme.diagnosis.triage; none in a manual run)."""
        return triage_forms(get_current_context())

    questions = plan_triage()
    published >> questions
    return TriageEntryOperator.partial(
        task_id="triage", map_index_template="{{ task.question }}",
        response_timeout=timedelta(seconds=settings.diagnosis().triage_timeout_s),
    ).expand_kwargs(questions)  # fmt: skip
