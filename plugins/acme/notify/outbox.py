"""The queue and the exactly-once ledger of outgoing messages, in the lake::

    notify/queue/cluster=<c>/date=<d>/<message_id>.json    a message waiting to go out (+ why it waits)
    notify/ledger/cluster=<c>/date=<d>/<message_id>.json   its attempts; when, where and to whom it went

A message id names its content (the owner and jobs of a digest, the job and recovery state of a page), so
composing the same message again (a retried task, a re-run) finds it queued or in the ledger and adds
nothing. Delivery of one message, under a lake lock:

1. the ledger says *sent*: nothing is sent (the queued copy, if any, is removed);
2. the ledger has an attempt without an outcome: a sender died between sending and recording (a SIGKILLed
   worker). The message is *in doubt*: it may have been delivered, so it is **not** resent; it stays
   queued with that reason until an operator releases it (:func:`release_in_doubt`; mail carries the same
   ``Message-ID`` again, so a receiver that removes duplicates by it shows one);
3. otherwise an *attempt* record is written first, then the message is sent, then the outcome is written:
   *sent* (the queued copy is removed) or *failed* with the error (the message stays queued with that
   reason, and the next delivery tries again).

So no message is sent twice by the pipeline; a crash inside the window between step 3's attempt record and
its outcome (a fraction of a second per message) leaves that one message in doubt rather than risking a
second copy. Every text is masked with :func:`acme.secrets.redact` before it is queued.
"""

from __future__ import annotations

import hashlib
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from acme import lake_keys
from acme.secrets import redact

if TYPE_CHECKING:
    from acme.lake import Lake
    from acme.notify.routing import Channel, Destination, Routing

Sender = Callable[["Channel", tuple[str, ...], dict[str, Any]], dict[str, Any]]
"""Sends one message through a channel to the addresses (mail) and returns a receipt; raises when the
channel is down. The Airflow adapter (``acme_airflow.notify``) gives one per channel kind."""

_LOCK_BUCKETS = 16
_ERROR_CHARS = 500


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def masked(message: dict[str, Any]) -> dict[str, Any]:
    """``message`` with every text field masked (tokens, keys, passwords: ``acme.secrets``)."""
    out: dict[str, Any] = {}
    for key, value in message.items():
        if isinstance(value, str):
            out[key] = redact(value)
        elif isinstance(value, list):
            out[key] = [redact(v) if isinstance(v, str) else v for v in value]
        else:
            out[key] = value
    return out


def queue_key(message: dict[str, Any]) -> str:
    return lake_keys.notify_queued(message["cluster"], message["date"], message["id"])


def ledger_key(message: dict[str, Any]) -> str:
    return lake_keys.notify_ledger(message["cluster"], message["date"], message["id"])


def _lock_name(message_id: str) -> str:
    bucket = int(hashlib.sha256(message_id.encode()).hexdigest(), 16) % _LOCK_BUCKETS
    return f"notify-{bucket:02d}"


def enqueue(lake: Lake, message: dict[str, Any]) -> bool:
    """Queue ``message`` (masked) unless it is queued or in the ledger already; True when queued now."""
    message = masked({**message, "queued_at": message.get("queued_at") or _now()})
    with lake.lock(_lock_name(message["id"])):
        if lake.exists(queue_key(message)) or lake.exists(ledger_key(message)):
            return False
        lake.write_json(queue_key(message), message)
    return True


def queued(lake: Lake) -> list[dict[str, Any]]:
    """Every message waiting to go out, oldest first."""
    keys = [k for k in lake.list(lake_keys.NOTIFY_QUEUE) if k.endswith(".json")]
    messages = [lake.read_json(k) for k in keys]
    return sorted((m for m in messages if m), key=lambda m: (m.get("queued_at", ""), m["id"]))


def known_messages(lake: Lake, cluster: str, day: str) -> list[dict[str, Any]]:
    """The messages about ``(cluster, day)`` queued or in the ledger (the ledger keeps each message)."""
    found = []
    for prefix in (
        f"{lake_keys.NOTIFY_QUEUE}/cluster={cluster}/date={day}",
        lake_keys.notify_ledger_day(cluster, day),
    ):
        for key in lake.list(prefix):
            document = lake.read_json(key) or {}
            found.append(document.get("message", document))
    return found


@dataclass
class DeliveryReport:
    """What one delivery pass did: ids sent, failed (with reason), in doubt, waiting for a route."""

    sent: list[dict[str, Any]] = field(default_factory=list)
    failed: list[dict[str, Any]] = field(default_factory=list)
    in_doubt: list[str] = field(default_factory=list)
    unrouted: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "sent": self.sent,
            "failed": self.failed,
            "in_doubt": self.in_doubt,
            "unrouted": self.unrouted,
        }

    def summary(self, lake: Lake) -> str:
        """One line for the task log: where the messages went, and what waits where."""
        where = ", ".join(sorted({f"{s['kind']} via {s['channel']}" for s in self.sent}))
        parts = [f"sent {len(self.sent)} message(s)" + (f" ({where})" if where else "")]
        if self.failed:
            reasons = sorted({f["error"] for f in self.failed})
            parts.append(f"{len(self.failed)} stay queued after a failed send ({'; '.join(reasons)[:300]})")
        if self.in_doubt:
            parts.append(f"{len(self.in_doubt)} in doubt (not resent: {', '.join(self.in_doubt[:5])})")
        if self.unrouted:
            why = "; ".join(f"{n} {reason}" for reason, n in sorted(self.unrouted.items()))
            parts.append(f"queued in the lake at {lake.url(lake_keys.NOTIFY_QUEUE)}/ ({why})")
        return "; ".join(parts)


def destination(routing: Routing, message: dict[str, Any]) -> Destination:
    if message["kind"] == "digest":
        return routing.owner(message.get("recipient"))
    return routing.oncall(message["cluster"])


def deliver(lake: Lake, routing: Routing, senders: dict[str, Sender]) -> DeliveryReport:
    """Send every queued message that has a route (see the module docstring); the others stay queued."""
    report = DeliveryReport()
    if not routing.configured:  # nothing can go anywhere: count the queue from one listing, read nothing
        waiting = sum(1 for key in lake.list(lake_keys.NOTIFY_QUEUE) if key.endswith(".json"))
        if waiting:
            report.unrouted[f"no channel configured in {routing.source}"] = waiting
        return report
    for message in queued(lake):
        where = destination(routing, message)
        if where.channel is None:
            report.unrouted[where.why] = report.unrouted.get(where.why, 0) + 1
            continue
        outcome = deliver_one(lake, message, where, senders[where.channel.kind])
        if outcome["status"] == "sent":
            report.sent.append(outcome)
        elif outcome["status"] == "failed":
            report.failed.append(outcome)
        elif outcome["status"] == "in_doubt":
            report.in_doubt.append(message["id"])
    return report


def deliver_one(lake: Lake, message: dict[str, Any], where: Destination, send: Sender) -> dict[str, Any]:
    """Deliver one message exactly once (module docstring); returns its outcome."""
    assert where.channel is not None
    channel = where.channel
    base = {"id": message["id"], "kind": message["kind"], "channel": channel.name, "to": list(where.to)}
    with lake.lock(_lock_name(message["id"])):
        ledger = lake.read_json(ledger_key(message)) or {
            "id": message["id"],
            "message": message,
            "attempts": [],
        }
        if ledger.get("sent_at"):
            lake.remove(queue_key(message))
            return {**base, "status": "already_sent"}
        open_attempts = [a for a in ledger["attempts"] if a.get("outcome") is None]
        if open_attempts:
            reason = (
                f"in doubt: the sender ({open_attempts[-1]['by']}) died at {open_attempts[-1]['at']} between "
                "sending and recording; it may have been delivered, so it is not resent (python -m acme notify-release)"
            )
            if message.get("waiting") != reason:
                lake.write_json(queue_key(message), {**message, "waiting": reason})
            return {**base, "status": "in_doubt"}
        attempt = {"at": _now(), "by": f"{socket.gethostname()}:{os.getpid()}", "channel": channel.name,
                   "kind": channel.kind, "to": list(where.to), "outcome": None}  # fmt: skip
        ledger["attempts"].append(attempt)
        lake.write_json(ledger_key(message), ledger)
        try:
            receipt = send(channel, where.to, message)
        except Exception as exc:  # a channel that is down: the message waits for the next delivery
            error = redact(f"{type(exc).__name__}: {exc}")[:_ERROR_CHARS]
            attempt.update(outcome="failed", error=error, ended_at=_now())
            lake.write_json(ledger_key(message), ledger)
            lake.write_json(
                queue_key(message),
                {**message, "waiting": f"send failed: {error}", "last_attempt": attempt["at"]},
            )
            return {**base, "status": "failed", "error": error}
        attempt.update(outcome="sent", ended_at=_now())
        ledger.update(
            sent_at=attempt["ended_at"], channel=channel.name, to=list(where.to), receipt=receipt or {}
        )
        lake.write_json(ledger_key(message), ledger)
        lake.remove(queue_key(message))
    return {**base, "status": "sent"}


def release_in_doubt(lake: Lake, message: dict[str, Any], by: str) -> bool:
    """An operator's decision that an in-doubt message was not delivered: its open attempt is closed as
    ``released`` (with who released it), so the next delivery sends it. False when nothing was in doubt."""
    with lake.lock(_lock_name(message["id"])):
        ledger = lake.read_json(ledger_key(message))
        open_attempts = [a for a in (ledger or {}).get("attempts", []) if a.get("outcome") is None]
        if not open_attempts:
            return False
        for attempt in open_attempts:
            attempt.update(outcome="released", released_by=by, ended_at=_now())
        lake.write_json(ledger_key(message), ledger)
    return True


def status(lake: Lake) -> dict[str, Any]:
    """Where the messages went: those sent (by kind and channel, from the ledger) and those waiting in the
    queue (by kind and reason), with the two folders."""
    from collections import Counter

    sent: Counter[str] = Counter()
    for key in lake.list(lake_keys.NOTIFY_LEDGER):
        entry = lake.read_json(key) or {}
        if entry.get("sent_at"):
            to = ", ".join(entry.get("to") or []) or "the channel's targets"
            sent[f"{entry['message']['kind']} via {entry.get('channel')} to {to}"] += 1
    waiting: Counter[str] = Counter()
    for message in queued(lake):
        waiting[
            f"{message['kind']}: {message.get('waiting') or 'no channel configured (include/config/notify.yaml)'}"
        ] += 1
    return {
        "queue": lake.url(lake_keys.NOTIFY_QUEUE),
        "ledger": lake.url(lake_keys.NOTIFY_LEDGER),
        "sent": dict(sorted(sent.items())),
        "waiting": dict(sorted(waiting.items())),
    }
