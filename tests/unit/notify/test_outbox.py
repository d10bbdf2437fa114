"""The queue and the exactly-once ledger with a fake sender (a list in memory); the real channels are in
tests/integration/test_notify_channels.py."""

from __future__ import annotations

import pytest

from acme.lake import Lake
from acme.notify import outbox
from acme.notify.routing import parse_routing

ROUTED = parse_routing(
    {"channels": {"mail": {"kind": "smtp", "connection": "smtp_h29a"}},
     "owners": {"channel": "mail", "domain": "acme.example"},
     "oncall": {"default": {"channel": "mail", "to": "oncall@acme.example"}}},
    "test.yaml",
)  # fmt: skip
UNROUTED = parse_routing({}, "notify.yaml")


def _message(**extra):
    return {"id": "digest-seren-2023-07-01-alice-abc", "kind": "digest", "cluster": "seren",
            "date": "2023-07-01", "recipient": "alice", "subject": "s", "text": "t", **extra}  # fmt: skip


class FakeSender:
    def __init__(self, fail: Exception | None = None):
        self.sent: list[tuple[str, tuple[str, ...], str]] = []
        self.fail = fail

    def __call__(self, channel, to, message):
        if self.fail is not None:
            raise self.fail
        self.sent.append((channel.name, to, message["id"]))
        return {"ok": True}


@pytest.fixture
def lake(tmp_path):
    return Lake(str(tmp_path / "lake"))


def test_fake_sender_a_message_is_queued_once_and_masked(lake):
    assert outbox.enqueue(lake, _message(text="run --password hunter2 --token=abc12345"))
    assert not outbox.enqueue(lake, _message(text="composed again by a retry"))
    (queued,) = outbox.queued(lake)
    assert "hunter2" not in queued["text"] and "abc12345" not in queued["text"]
    assert "[REDACTED]" in queued["text"]


def test_fake_sender_sends_once_however_often_delivery_runs(lake):
    send = FakeSender()
    outbox.enqueue(lake, _message())
    first = outbox.deliver(lake, ROUTED, {"smtp": send})
    again = outbox.deliver(lake, ROUTED, {"smtp": send})
    assert [s["id"] for s in first.sent] == ["digest-seren-2023-07-01-alice-abc"] and not again.sent
    assert send.sent == [("mail", ("alice@acme.example",), "digest-seren-2023-07-01-alice-abc")]
    assert outbox.queued(lake) == []
    assert not outbox.enqueue(lake, _message())  # in the ledger: composing it again queues nothing
    ledger = lake.read_json(outbox.ledger_key(_message()))
    assert ledger["sent_at"] and [a["outcome"] for a in ledger["attempts"]] == ["sent"]


def test_fake_sender_a_channel_that_is_down_keeps_the_message_queued_with_its_reason(lake):
    outbox.enqueue(lake, _message())
    down = outbox.deliver(lake, ROUTED, {"smtp": FakeSender(ConnectionRefusedError("[Errno 111] refused"))})
    assert [f["error"] for f in down.failed] == ["ConnectionRefusedError: [Errno 111] refused"]
    (waiting,) = outbox.queued(lake)
    assert waiting["waiting"] == "send failed: ConnectionRefusedError: [Errno 111] refused"
    assert "stay queued after a failed send" in down.summary(lake)
    send = FakeSender()
    assert len(outbox.deliver(lake, ROUTED, {"smtp": send}).sent) == 1
    assert len(send.sent) == 1 and outbox.queued(lake) == []
    outcomes = [a["outcome"] for a in lake.read_json(outbox.ledger_key(_message()))["attempts"]]
    assert outcomes == ["failed", "sent"]


def test_fake_sender_an_attempt_without_outcome_is_in_doubt_and_not_resent(lake):
    message = _message()
    outbox.enqueue(lake, message)
    # What a sender SIGKILLed between its send and its ledger write leaves: an attempt without an outcome.
    lake.write_json(outbox.ledger_key(message),
                    {"id": message["id"], "message": message,
                     "attempts": [{"at": "2026-12-02T03:00:00+00:00", "by": "host:1", "outcome": None}]})  # fmt: skip
    send = FakeSender()
    report = outbox.deliver(lake, ROUTED, {"smtp": send})
    assert report.in_doubt == [message["id"]] and send.sent == []
    assert outbox.queued(lake)[0]["waiting"].startswith("in doubt: the sender (host:1) died")
    assert outbox.release_in_doubt(lake, message, by="operator")
    assert len(outbox.deliver(lake, ROUTED, {"smtp": send}).sent) == 1 and len(send.sent) == 1


def test_with_nothing_configured_messages_stay_in_the_lake_and_one_line_says_where(lake):
    outbox.enqueue(lake, _message())
    outbox.enqueue(lake, _message(id="page-seren-1-x-requested", kind="page", recipient="oncall"))
    report = outbox.deliver(lake, UNROUTED, {})
    assert report.sent == [] and sum(report.unrouted.values()) == 2
    line = report.summary(lake)
    assert "\n" not in line
    assert f"queued in the lake at {lake.url('notify/queue')}/" in line
    assert "(2 no channel configured in notify.yaml)" in line
    assert len(outbox.queued(lake)) == 2
    oncall_only = parse_routing({"channels": {"c": {"kind": "apprise", "connection": "x"}},
                                 "oncall": {"clusters": {"kalos": "c"}}}, "notify.yaml")  # fmt: skip
    line = outbox.deliver(lake, oncall_only, {}).summary(lake)
    assert "1 no owner channel in notify.yaml" in line and "1 no on-call channel for seren" in line


def test_notify_status_prints_where_the_messages_went(lake, capsys):
    from acme.cli import main

    outbox.enqueue(lake, _message())
    outbox.enqueue(lake, _message(id="page-seren-1-x-requested", kind="page", recipient="oncall"))
    outbox.deliver(lake, parse_routing({"channels": {"mail": {"kind": "smtp", "connection": "c"}},
                                        "owners": {"channel": "mail", "domain": "acme.example"}}, "t.yaml"),
                   {"smtp": FakeSender()})  # fmt: skip
    assert main(["notify-status", "--lake", lake.uri]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "  sent: 1 digest via mail to alice@acme.example",
        f"  waiting in the lake ({lake.url('notify/queue')}/): 1 page: no channel configured "
        "(include/config/notify.yaml)",
    ]


def test_notify_release_resends_an_in_doubt_message_once(lake, capsys):
    from acme.cli import main

    message = _message()
    outbox.enqueue(lake, message)
    lake.write_json(outbox.ledger_key(message),
                    {"id": message["id"], "message": message, "attempts": [{"at": "t", "by": "h:1", "outcome": None}]})  # fmt: skip
    assert main(["notify-release", message["id"], "--by", "ops-anna", "--lake", lake.uri]) == 0
    assert '"released": true' in capsys.readouterr().out
    send = FakeSender()
    assert len(outbox.deliver(lake, ROUTED, {"smtp": send}).sent) == 1 and len(send.sent) == 1
    assert lake.read_json(outbox.ledger_key(message))["attempts"][0]["released_by"] == "ops-anna"
    assert main(["notify-release", "nope", "--by", "x", "--lake", lake.uri]) == 2
