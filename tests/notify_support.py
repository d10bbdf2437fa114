"""Real receivers on loopback for the notification tests, each started and stopped by the test: an SMTP
server (aiosmtpd), an HTTP receiver speaking the Slack incoming-webhook protocol, and an MQTT subscriber on
the Mosquitto broker of the machine (127.0.0.1:1883); plus the Airflow connections that point at them."""

from __future__ import annotations

import contextlib
import email
import email.policy
import json
import socket
import threading
import time
from collections.abc import Iterator
from email.message import EmailMessage
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Mailbox:
    """What the SMTP server received: parsed messages with their envelope recipients."""

    def __init__(self) -> None:
        self.messages: list[EmailMessage] = []
        self.recipients: list[list[str]] = []
        self.arrived: list[float] = []  # time.time() of each message's end of DATA

    async def handle_DATA(self, server, session, envelope):
        parsed = email.message_from_bytes(
            envelope.original_content or envelope.content, policy=email.policy.default
        )
        self.messages.append(parsed)  # type: ignore[arg-type]
        self.recipients.append(list(envelope.rcpt_tos))
        self.arrived.append(time.time())
        return "250 Message accepted for delivery"

    def bodies(self) -> list[str]:
        out = []
        for message in self.messages:
            part = message.get_body(preferencelist=("html", "plain"))
            out.append(part.get_content() if part is not None else "")
        return out


@contextlib.contextmanager
def smtp_server(port: int | None = None) -> Iterator[tuple[Mailbox, int]]:
    """A real SMTP server (aiosmtpd) on 127.0.0.1; yields its mailbox and port, stopped on exit."""
    from aiosmtpd.controller import Controller

    mailbox = Mailbox()
    port = port or free_port()
    controller = Controller(mailbox, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield mailbox, port
    finally:
        controller.stop()


def smtp_connection(port: int) -> str:
    """An ``AIRFLOW_CONN_*`` value for the loopback server (plain SMTP: no SSL, no STARTTLS)."""
    return json.dumps({"conn_type": "smtp", "host": "127.0.0.1", "port": port,
                       "extra": {"disable_ssl": True, "disable_tls": True, "retry_limit": 1, "timeout": 5,
                                 "from_email": "acme-pipeline@acme.example"}})  # fmt: skip


@contextlib.contextmanager
def slack_webhook_receiver() -> Iterator[tuple[list[dict[str, Any]], int]]:
    """An HTTP server that answers as Slack's incoming webhooks do (POST JSON with ``text`` -> 200 ``ok``; a
    body without ``text`` or ``blocks`` -> 400 ``no_text``); yields the received payloads and its port."""
    received: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            length = int(self.headers.get("Content-Length") or 0)
            payload = json.loads(self.rfile.read(length) or b"{}")
            ok = self.path.startswith("/services/") and (payload.get("text") or payload.get("blocks"))
            if ok:
                received.append({"path": self.path, **payload})
            body = b"ok" if ok else b"no_text"
            self.send_response(200 if ok else 400)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield received, server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def mqtt_subscriber(topic: str, host: str = "127.0.0.1", port: int = 1883) -> Iterator[list[str]]:
    """A paho-mqtt client subscribed to ``topic`` on the machine's Mosquitto; yields the payloads received."""
    import paho.mqtt.client as mqtt

    received: list[str] = []
    subscribed = threading.Event()
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"h29a-test-{time.monotonic_ns()}")
    client.on_message = lambda c, u, message: received.append(message.payload.decode())
    client.on_subscribe = lambda *args: subscribed.set()
    client.connect(host, port)
    client.loop_start()
    client.subscribe(topic, qos=1)
    if not subscribed.wait(10):
        raise RuntimeError(f"no SUBACK from the MQTT broker {host}:{port} for {topic}")
    try:
        yield received
    finally:
        client.loop_stop()
        client.disconnect()


def wait_for(predicate, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()
