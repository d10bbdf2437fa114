"""A loopback HTTP proxy in front of an S3 server that injects the faults a test scripts.

Real object stores fail in a few well-known ways: ``500 InternalError`` and ``503 SlowDown`` answers
(with an S3 XML error body, which the clients parse to decide whether to retry), connections reset
without an answer, an answer lost after the request took effect, and slow answers. This proxy forwards
every request to the real (moto) server and, when a rule matches, answers with one of those faults
instead, so the lake's real clients (s3fs and boto3) meet them unmodified. What it did to every request
is recorded in :attr:`S3FaultProxy.events` for the test to count and check.

Faults (``Fault``):

- ``"500"`` / ``"503"``: S3 ``InternalError`` / ``SlowDown`` XML error, request NOT forwarded;
- ``"reset"``: the connection is reset (RST) before forwarding, no answer;
- ``"reset_after"``: the request IS forwarded (it takes effect) and then the connection is reset:
  the answer is lost, the client cannot know the write happened;
- ``"truncate"``: the answer's headers (full ``Content-Length``) and half its body, then a reset;
- ``"delay"``: the answer is forwarded after ``delay_s`` seconds.
"""

from __future__ import annotations

import contextlib
import http.client
import random
import re
import socket
import struct
import threading
import time
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Literal
from urllib.parse import urlsplit

Fault = Literal["500", "503", "reset", "reset_after", "truncate", "delay"]
FAULTS: tuple[str, ...] = ("500", "503", "reset", "reset_after", "truncate", "delay")

_ERRORS = {
    "500": ("InternalError", "We encountered an internal error. Please try again."),
    "503": ("SlowDown", "Please reduce your request rate."),
}
# Headers that describe one hop's connection, not the message: never copied across the proxy.
_HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "proxy-connection",
}


@dataclass
class FaultRule:
    """Fault the next ``times`` requests matching method, path regex and (optionally) a header."""

    fault: Fault
    method: str | None = None
    path: str | None = None
    header: tuple[str, str] | None = None
    times: int = 1
    delay_s: float = 0.0

    def matches(self, method: str, path: str, headers) -> bool:
        if self.times <= 0:
            return False
        if self.method and self.method.upper() != method:
            return False
        if self.path and not re.search(self.path, path):
            return False
        if self.header:
            name, value = self.header
            if headers.get(name) != value:
                return False
        return True


@dataclass(frozen=True)
class ProxyEvent:
    """What the proxy did with one request: ``action`` is ``"forward"`` or a fault name."""

    method: str
    path: str
    action: str
    status: int | None
    at: float


class S3FaultProxy:
    """Threaded proxy on 127.0.0.1 to ``upstream`` (``http://host:port``); use as a context manager."""

    def __init__(self, upstream: str):
        parts = urlsplit(upstream)
        self.upstream_host, self.upstream_port = parts.hostname, parts.port or 80
        self.events: list[ProxyEvent] = []
        self._rules: list[FaultRule] = []
        self._random: tuple[float, random.Random, tuple[str, ...], float, str | None] | None = None
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="s3-fault-proxy", daemon=True)

    # --- lifecycle ----------------------------------------------------------------------
    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> S3FaultProxy:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> S3FaultProxy:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # --- the script ---------------------------------------------------------------------
    def fail(
        self,
        fault: Fault,
        *,
        method: str | None = None,
        path: str | None = None,
        header: tuple[str, str] | None = None,
        times: int = 1,
        delay_s: float = 0.0,
    ) -> FaultRule:
        """Fault the next ``times`` matching requests (rules are tried in the order they were added)."""
        if fault not in FAULTS:
            raise ValueError(f"unknown fault {fault!r}; expected one of {FAULTS}")
        rule = FaultRule(fault, method, path, header, times, delay_s)
        with self._lock:
            self._rules.append(rule)
        return rule

    def fail_randomly(
        self,
        rate: float,
        seed: int,
        faults: tuple[str, ...] = ("500", "503", "reset"),
        delay_s: float = 0.0,
        path: str | None = None,
    ) -> None:
        """Fault each request (whose path matches ``path``) with probability ``rate``, seeded."""
        unknown = set(faults) - set(FAULTS)
        if unknown or not 0.0 <= rate <= 1.0:
            raise ValueError(f"bad random fault script: rate={rate}, faults={faults}")
        with self._lock:
            self._random = (rate, random.Random(seed), tuple(faults), delay_s, path)

    def clear(self) -> None:
        """No more faults: every request is forwarded (events are kept)."""
        with self._lock:
            self._rules.clear()
            self._random = None

    def counts(self) -> dict[str, int]:
        """How many requests each action was applied to."""
        with self._lock:
            events = list(self.events)
        result: dict[str, int] = {}
        for event in events:
            result[event.action] = result.get(event.action, 0) + 1
        return result

    def _decide(self, method: str, path: str, headers) -> tuple[str, float]:
        with self._lock:
            for rule in self._rules:
                if rule.matches(method, path, headers):
                    rule.times -= 1
                    return rule.fault, rule.delay_s
            if self._random is not None:
                rate, rng, faults, delay_s, pattern = self._random
                if (pattern is None or re.search(pattern, path)) and rng.random() < rate:
                    return rng.choice(faults), delay_s
        return "forward", 0.0

    def _record(self, method: str, path: str, action: str, status: int | None) -> None:
        with self._lock:
            self.events.append(ProxyEvent(method, path, action, status, time.time()))

    # --- the HTTP side ------------------------------------------------------------------
    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive and ``Expect: 100-continue``, as S3 clients expect

            def log_message(self, format, *args):
                return

            def _handle(self) -> None:
                method, path = self.command, self.path
                action, delay_s = proxy._decide(method, path, self.headers)
                if action == "reset":
                    proxy._record(method, path, action, None)
                    self._reset()
                    return
                body = self._read_body()
                if action in _ERRORS:
                    status = int(action)
                    proxy._record(method, path, action, status)
                    self._send_error(status, *_ERRORS[action], path)
                    return
                if action == "delay":
                    time.sleep(delay_s)
                status, headers, payload = self._forward(method, path, body)
                # Recorded before the client sees the answer, so a test reading the events after its
                # request returned always finds this one.
                proxy._record(method, path, action, status)
                if action == "reset_after":
                    self._reset()
                    return
                self.send_response(status)
                for name, value in headers:
                    if name.lower() not in _HOP_BY_HOP and name.lower() != "content-length":
                        self.send_header(name, value)
                self.send_header(
                    "Content-Length", str(len(payload)) if method != "HEAD" else _length(headers)
                )
                self.end_headers()
                if action == "truncate":
                    self.wfile.write(payload[: len(payload) // 2])
                    self._reset()
                    return
                if method != "HEAD":
                    self.wfile.write(payload)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle

            def _read_body(self) -> bytes:
                if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                    chunks = []
                    while True:
                        size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                        if size == 0:
                            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                                pass  # trailers
                            return b"".join(chunks)
                        chunks.append(self.rfile.read(size))
                        self.rfile.readline()
                length = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(length) if length else b""

            def _forward(self, method: str, path: str, body: bytes):
                upstream = http.client.HTTPConnection(proxy.upstream_host, proxy.upstream_port, timeout=60)
                try:
                    headers = {
                        name: value
                        for name, value in self.headers.items()
                        if name.lower() not in _HOP_BY_HOP
                        and name.lower() not in ("expect", "content-length")
                    }
                    if body or method in ("PUT", "POST"):
                        headers["Content-Length"] = str(len(body))
                    upstream.request(method, path, body=body or None, headers=headers)
                    response = upstream.getresponse()
                    payload = response.read()
                    return response.status, response.getheaders(), payload
                finally:
                    upstream.close()

            def _send_error(self, status: int, code: str, message: str, path: str) -> None:
                request_id = uuid.uuid4().hex[:16].upper()
                resource = path.split("?", 1)[0]
                xml = (
                    '<?xml version="1.0" encoding="UTF-8"?>\n'
                    f"<Error><Code>{code}</Code><Message>{message}</Message>"
                    f"<Resource>{resource}</Resource><RequestId>{request_id}</RequestId></Error>"
                ).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(xml)))
                self.send_header("x-amz-request-id", request_id)
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(xml)

            def _reset(self) -> None:
                """Close with RST (SO_LINGER 0): the client sees ECONNRESET, not a clean EOF."""
                self.close_connection = True
                with contextlib.suppress(OSError):
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    self.connection.close()

        return Handler


def _length(headers: list[tuple[str, str]]) -> str:
    return next((value for name, value in headers if name.lower() == "content-length"), "0")
