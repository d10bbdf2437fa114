"""Delivery of ``acme.notify``'s messages through Airflow's notifier providers: the SMTP provider's
``SmtpNotifier`` (mail), the apprise provider's ``AppriseNotifier`` (one connection reaches Slack,
Mattermost, Teams, MQTT, ...) and the Slack provider's ``SlackWebhookNotifier``. Channels are Airflow
connections named in the routing file (``include/config/notify.yaml``).

The notifiers are called through ``notify()``, not as callbacks: a callback renders its fields as Jinja
templates first, and a message quotes log lines, which must never be evaluated as templates.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from acme.lake import Lake
    from acme.notify.outbox import DeliveryReport, Sender
    from acme.notify.routing import Channel

MAIL_DOMAIN = "acme-pipeline"
"""Right-hand side of the ``Message-ID`` header: ``<message id@acme-pipeline>``, the same for every try."""


class ChannelDownError(RuntimeError):
    """A channel did not take a message (the notifier's service refused it or was unreachable)."""


def message_id_header(message: dict[str, Any]) -> str:
    return f"<{message['id']}@{MAIL_DOMAIN}>"


def send_mail(channel: Channel, to: tuple[str, ...], message: dict[str, Any]) -> dict[str, Any]:
    """One mail through ``SmtpNotifier`` (the text as preformatted HTML; a stable ``Message-ID``)."""
    from airflow.providers.smtp.notifications.smtp import SmtpNotifier
    from airflow.sdk import BaseHook

    sender = channel.sender or BaseHook.get_connection(channel.connection).extra_dejson.get("from_email")
    notifier = SmtpNotifier(
        to=list(to),
        from_email=sender or f"acme-pipeline@{MAIL_DOMAIN}.invalid",
        subject=message["subject"],
        html_content=f"<pre>{html.escape(message['text'])}</pre>",
        custom_headers={"Message-ID": message_id_header(message), "X-Acme-Message-Kind": message["kind"]},
        smtp_conn_id=channel.connection,
    )
    notifier.notify({})
    return {"message_id": message_id_header(message), "to": list(to)}


def send_apprise(channel: Channel, to: tuple[str, ...], message: dict[str, Any]) -> dict[str, Any]:
    """One notification through ``AppriseNotifier``'s hook and the connection's services. The hook drops
    apprise's answer (False when no service took the message), so it is checked here: a service that is
    down must leave the message queued, not count as sent."""
    import apprise
    from airflow.providers.apprise.notifications.apprise import AppriseNotifier

    notifier = AppriseNotifier(
        body=message["text"], title=message["subject"], apprise_conn_id=channel.connection
    )
    services = apprise.Apprise()
    hook = notifier.hook
    hook.set_config_from_conn(conn=hook.get_connection(channel.connection), apprise_obj=services)
    if not services.notify(body=notifier.body, title=notifier.title, notify_type=_notify_type(message)):
        raise ChannelDownError(f"apprise connection {channel.connection}: no service took the message")
    return {"services": len(services)}


def _notify_type(message: dict[str, Any]) -> Any:
    from apprise import NotifyType

    return NotifyType.FAILURE if message["kind"] in ("page", "late") else NotifyType.INFO


def send_slack_webhook(channel: Channel, to: tuple[str, ...], message: dict[str, Any]) -> dict[str, Any]:
    """One message through ``SlackWebhookNotifier`` (the hook raises unless the webhook answers 200)."""
    from airflow.providers.slack.notifications.slack_webhook import SlackWebhookNotifier

    text = f"*{message['subject']}*\n```\n{message['text']}```"
    SlackWebhookNotifier(slack_webhook_conn_id=channel.connection, text=text).notify({})
    return {"webhook": channel.connection}


SENDERS: dict[str, Sender] = {"smtp": send_mail, "apprise": send_apprise, "slack_webhook": send_slack_webhook}


def deliver_queued(lake: Lake) -> DeliveryReport:
    """Send what waits in the lake's queue through the routing file's channels, and log one line that says
    where the messages went (or that they stay queued in the lake, and why)."""
    from acme.notify.outbox import deliver
    from acme.notify.routing import load_routing

    routing = load_routing()
    report = deliver(lake, routing, SENDERS)
    line = report.summary(lake)
    print(f"notifications: {line}")
    return report


def notify_run_in_task(context: Any) -> dict[str, Any]:
    """``diagnose_failures``' ``notify`` task: queue the run's owner digests and on-call pages
    (``acme.notify.compose.queue_run_messages``), then deliver everything that waits."""
    from acme import settings
    from acme.diagnosis.nightly import plan_key
    from acme.notify.compose import queue_run_messages
    from acme.notify.routing import load_routing
    from acme_airflow.tasks import lake_task

    with lake_task() as lake:
        plan = lake.read_json(plan_key(context["run_id"]))
        counts = queue_run_messages(lake, plan, load_routing(), settings.notify().report_url)
        report = deliver_queued(lake)
    return {**counts, "sent": len(report.sent), "failed": len(report.failed), "in_doubt": len(report.in_doubt),
            "queued_unrouted": sum(report.unrouted.values())}  # fmt: skip


def page_recovery_in_task(context: Any, opened: dict[str, Any] | None) -> dict[str, Any]:
    """Page on-call with the recovery's state from its action log (``acme.notify.compose.queue_recovery_page``)
    and deliver. ``opened``: ``open_recovery``'s XCom (its checked request), None when the recovery never
    opened (then the run's Params). The approval step calls it too once it has written ``awaiting``."""
    from acme import settings
    from acme.notify.compose import queue_recovery_page
    from acme.notify.routing import load_routing
    from acme.recovery.actions import recovery_id_from_run
    from acme_airflow.tasks import lake_task

    request = dict((opened or {}).get("request") or context["params"])
    request["recovery_id"] = request.get("recovery_id") or recovery_id_from_run(context["run_id"])
    with lake_task() as lake:
        message = queue_recovery_page(lake, request, load_routing(), settings.recovery().gpus_per_node)
        report = deliver_queued(lake)
    return {"page": (message or {}).get("id"), "state": (message or {}).get("recovery_state"),
            "sent": len(report.sent)}  # fmt: skip


# --- deadline alerts of the nightly chain ------------------------------------------------------------


def nightly_deadline(dag_id: str, *, scheduled: bool) -> Any:
    """The ``DeadlineAlert`` of a DAG of the nightly chain (None with ``ACME_NOTIFY_DEADLINE_HOUR=off``).

    ``scheduled`` (``ingest_job_traces``): the run's logical date + the interval to the deadline hour in the
    clusters' time zone. Otherwise (``diagnose_failures``, ``characterize``, started by Asset events: their
    runs have no logical date) the run's queue time + ``ACME_NOTIFY_STEP_BUDGET_MINUTES``. The callback
    (:func:`late_notice`) runs in the triggerer once the deadline passes with the run unfinished."""
    from datetime import timedelta

    from airflow.sdk.definitions.callback import AsyncCallback
    from airflow.sdk.definitions.deadline import DeadlineAlert, DeadlineReference

    from acme import settings
    from acme.notify.deadlines import interval_to_hour

    notify = settings.notify()
    if notify.deadline_hour is None:
        return None
    if scheduled:
        reference = DeadlineReference.DAGRUN_LOGICAL_DATE
        interval = interval_to_hour(
            notify.deadline_hour, notify.deadline_timezone, settings.project().start_date
        )
        rule = f"{notify.deadline_hour:02d}:00 {notify.deadline_timezone} after the night"
    else:
        reference = DeadlineReference.DAGRUN_QUEUED_AT
        interval = timedelta(minutes=notify.step_budget_minutes)
        rule = f"{notify.step_budget_minutes} min after being queued"
    callback = AsyncCallback(late_notice, kwargs={"dag_id": dag_id, "rule": rule})
    return DeadlineAlert(reference=reference, interval=interval, callback=callback, name=f"{dag_id} late")


async def late_notice(dag_id: str, rule: str, context: dict[str, Any] | None = None) -> dict[str, Any]:
    """The deadline callback (in the triggerer): a late notice per configured cluster, queued and delivered
    through the on-call channels like a page (blocking work in a thread, off the triggerer's loop)."""
    import asyncio

    return await asyncio.to_thread(send_late_notices, dag_id, rule, context or {})


def send_late_notices(dag_id: str, rule: str, context: dict[str, Any]) -> dict[str, Any]:
    from acme.clusters import load_clusters
    from acme.notify.messages import late_notice as compose
    from acme.notify.outbox import enqueue
    from acme_airflow.lake import task_lake

    run = context.get("dag_run") or {}
    run_id = str(run.get("dag_run_id") or run.get("run_id") or "unknown-run")
    start = run.get("data_interval_start") or run.get("logical_date") or run.get("run_after") or ""
    day = str(start)[:10] or "undated"
    deadline = str((context.get("deadline") or {}).get("deadline_time") or "")
    if _created_after(run, deadline):  # a backfill or catch-up of an old night: not late, just old
        print(f"late notice skipped: {dag_id} run {run_id} was created after its deadline {deadline}")
        return {"sent": 0, "queued": 0, "skipped": "created after its deadline"}
    lake = task_lake()
    for cluster in sorted(load_clusters()):
        enqueue(
            lake,
            compose(
                dag_id, run_id, cluster, day, f"{deadline} ({rule})", str(run.get("state") or "unfinished")
            ),
        )
    report = deliver_queued(lake)
    return {"sent": len(report.sent), "queued": sum(report.unrouted.values()) + len(report.failed)}


def _created_after(run: dict[str, Any], deadline: str) -> bool:
    from datetime import datetime

    created = run.get("queued_at") or run.get("run_after")
    try:
        return bool(created and deadline) and datetime.fromisoformat(str(created)) > datetime.fromisoformat(
            deadline
        )
    except ValueError:
        return False
