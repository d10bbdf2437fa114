"""Delivery through the real notifier providers to real receivers on loopback: mail through SmtpNotifier to
an aiosmtpd server, chat through SlackWebhookNotifier to a Slack-webhook receiver, and apprise's MQTT target
to the machine's Mosquitto; exactly once under a SIGKILL between the send and the ledger write; a channel
that is down."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from acme.lake import Lake
from acme.notify import outbox
from acme.notify.routing import parse_routing
from tests.notify_support import (
    free_port,
    mqtt_subscriber,
    slack_webhook_receiver,
    smtp_connection,
    smtp_server,
    wait_for,
)

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def _routing(kind: str, connection: str):
    to = {"to": "oncall@acme.example"} if kind == "smtp" else {}
    return parse_routing(
        {"channels": {"out": {"kind": kind, "connection": connection}},
         "owners": {"channel": "out", "domain": "acme.example", "addresses": {"bob": "bob@lab.example"}},
         "oncall": {"default": {"channel": "out", **to}}},
        "test-notify.yaml",
    )  # fmt: skip


def _digest(user="alice", text="2 of your jobs failed.\n  evidence: CUDA out of memory {{ 7 * 7 }}\n"):
    return {"id": f"digest-seren-2023-07-01-{user}-{uuid.uuid4().hex[:8]}", "kind": "digest", "cluster": "seren",
            "date": "2023-07-01", "recipient": user, "subject": "[acme] seren 2023-07-01: 2 of your jobs failed",
            "text": text}  # fmt: skip


@pytest.fixture
def lake(tmp_path):
    return Lake(str(tmp_path / "lake"))


def test_mail_goes_through_smtp_notifier_once_with_headers_and_masked_body(lake, monkeypatch):
    from acme_airflow.notify import SENDERS

    with smtp_server() as (mailbox, port):
        monkeypatch.setenv("AIRFLOW_CONN_SMTP_H29A", smtp_connection(port))
        message = _digest(text="Evidence: curl -H 'Authorization: Bearer abcdefghijklmnop' {{ 7 * 7 }}\n")
        outbox.enqueue(lake, message)
        routing = _routing("smtp", "smtp_h29a")
        report = outbox.deliver(lake, routing, SENDERS)
        outbox.deliver(lake, routing, SENDERS)  # a re-run
        assert [s["status"] for s in report.sent] == ["sent"]
        assert wait_for(lambda: len(mailbox.messages) == 1)
    (mail,) = mailbox.messages
    assert mail["Subject"] == "[acme] seren 2023-07-01: 2 of your jobs failed"
    assert mail["To"] == "alice@acme.example" and mailbox.recipients == [["alice@acme.example"]]
    assert mail["From"] == "acme-pipeline@acme.example"  # the connection's from_email
    assert mail["Message-ID"] == f"<{message['id']}@acme-pipeline>"
    assert mail["X-Acme-Message-Kind"] == "digest"
    (body,) = mailbox.bodies()
    assert "Bearer [REDACTED]" in body and "abcdefghijklmnop" not in body
    assert "{{ 7 * 7 }}" in body  # a log line is never evaluated as a template


def test_chat_goes_through_slack_webhook_notifier_to_a_slack_webhook_receiver(lake, monkeypatch):
    from acme_airflow.notify import SENDERS

    with slack_webhook_receiver() as (received, port):
        conn = {
            "conn_type": "slackwebhook",
            "host": f"http://127.0.0.1:{port}/services",
            "password": "T0/B0/h29a",
        }
        monkeypatch.setenv("AIRFLOW_CONN_SLACK_H29A", __import__("json").dumps(conn))
        page = {**_digest(), "id": "page-kalos-77-diag-kalos-77-requested", "kind": "page", "recipient": "oncall",
                "cluster": "kalos", "subject": "[acme page] kalos: NCCLTimeout on job 77 (256 GPUs)"}  # fmt: skip
        outbox.enqueue(lake, page)
        report = outbox.deliver(lake, _routing("slack_webhook", "slack_h29a"), SENDERS)
        assert len(report.sent) == 1
    (payload,) = received
    assert payload["path"] == "/services/T0/B0/h29a"
    assert payload["text"].startswith("*[acme page] kalos: NCCLTimeout on job 77 (256 GPUs)*")
    assert "CUDA out of memory" in payload["text"]


def test_apprise_reaches_mqtt_on_the_machines_mosquitto(lake, monkeypatch):
    from acme_airflow.notify import SENDERS

    topic = f"acme/h29a/{uuid.uuid4().hex[:8]}"
    conn = {"conn_type": "apprise", "extra": {"config": {"path": f"mqtt://127.0.0.1:1883/{topic}"}}}
    monkeypatch.setenv("AIRFLOW_CONN_APPRISE_H29A", __import__("json").dumps(conn))
    with mqtt_subscriber(topic) as received:
        outbox.enqueue(lake, _digest())
        report = outbox.deliver(lake, _routing("apprise", "apprise_h29a"), SENDERS)
        assert len(report.sent) == 1
        assert wait_for(lambda: len(received) == 1)
    assert "2 of your jobs failed." in received[0]


def test_a_channel_that_is_down_keeps_the_message_queued_and_the_next_run_sends_it(lake, monkeypatch):
    from acme_airflow.notify import SENDERS

    port = free_port()  # nothing listens there yet
    monkeypatch.setenv("AIRFLOW_CONN_SMTP_H29A", smtp_connection(port))
    routing = _routing("smtp", "smtp_h29a")
    message = _digest()
    outbox.enqueue(lake, message)
    down = outbox.deliver(lake, routing, SENDERS)
    assert down.sent == [] and len(down.failed) == 1
    (waiting,) = outbox.queued(lake)
    assert waiting["waiting"].startswith("send failed: ") and "refused" in waiting["waiting"].lower()
    with smtp_server(port) as (mailbox, _):
        up = outbox.deliver(lake, routing, SENDERS)
        assert len(up.sent) == 1 and wait_for(lambda: len(mailbox.messages) == 1)
        outbox.deliver(lake, routing, SENDERS)
    assert len(mailbox.messages) == 1 and outbox.queued(lake) == []
    assert [a["outcome"] for a in lake.read_json(outbox.ledger_key(message))["attempts"]] == [
        "failed",
        "sent",
    ]


_CHILD = """
import json, os, signal, sys
from acme.lake import Lake
from acme.notify import outbox
from acme.notify.routing import parse_routing
from acme_airflow.notify import send_mail

routing = parse_routing(json.loads(os.environ["H29A_ROUTING"]), "test-notify.yaml")

def send_then_die(channel, to, message):
    send_mail(channel, to, message)  # the mail is out ...
    os.kill(os.getpid(), signal.SIGKILL)  # ... and the worker dies before the ledger says so

outbox.deliver(Lake(sys.argv[1]), routing, {"smtp": send_then_die})
"""


def test_exactly_once_under_a_sigkill_between_the_send_and_the_ledger_write(lake, monkeypatch):
    from acme_airflow.notify import SENDERS

    routing_doc = {"channels": {"out": {"kind": "smtp", "connection": "smtp_h29a"}},
                   "owners": {"channel": "out", "domain": "acme.example"}}  # fmt: skip
    routing = parse_routing(routing_doc, "test-notify.yaml")
    message = _digest()
    outbox.enqueue(lake, message)
    with smtp_server() as (mailbox, port):
        env = {**os.environ, "AIRFLOW_CONN_SMTP_H29A": smtp_connection(port),
               "H29A_ROUTING": __import__("json").dumps(routing_doc),
               "PYTHONPATH": f"{ROOT / 'plugins'}:{ROOT}"}  # fmt: skip
        child = subprocess.run([sys.executable, "-c", textwrap.dedent(_CHILD), lake.uri], env=env,
                               capture_output=True, text=True, timeout=120)  # fmt: skip
        assert child.returncode == -signal.SIGKILL, child.stderr[-2000:]
        assert wait_for(lambda: len(mailbox.messages) == 1)
        monkeypatch.setenv("AIRFLOW_CONN_SMTP_H29A", smtp_connection(port))
        rerun = outbox.deliver(lake, routing, SENDERS)  # the retry / the next run
        rerun_again = outbox.deliver(lake, routing, SENDERS)
    assert len(mailbox.messages) == 1  # the receiver has one message
    assert rerun.sent == [] and rerun.in_doubt == [message["id"]] and rerun_again.in_doubt == [message["id"]]
    (waiting,) = outbox.queued(lake)
    assert waiting["waiting"].startswith("in doubt: the sender")
    (attempt,) = lake.read_json(outbox.ledger_key(message))["attempts"]
    assert attempt["outcome"] is None and attempt["to"] == ["alice@acme.example"]


def test_an_apprise_service_that_is_down_is_not_counted_as_sent(lake, monkeypatch):
    from acme_airflow.notify import SENDERS

    conn = {
        "conn_type": "apprise",
        "extra": {"config": {"path": f"mqtt://127.0.0.1:{free_port()}/acme/h29a/down"}},
    }
    monkeypatch.setenv("AIRFLOW_CONN_APPRISE_H29A_DOWN", __import__("json").dumps(conn))
    outbox.enqueue(lake, _digest())
    report = outbox.deliver(lake, _routing("apprise", "apprise_h29a_down"), SENDERS)
    assert report.sent == [] and len(report.failed) == 1
    (waiting,) = outbox.queued(lake)
    assert waiting["waiting"] == (
        "send failed: ChannelDownError: apprise connection apprise_h29a_down: no service took the message"
    )
