"""A fake OpenAI-compatible chat server on 127.0.0.1 that a test scripts, for the real ``openai`` client.

It speaks just enough of the protocol (``POST /v1/chat/completions`` and ``GET /v1/models``) for the
client to work unmodified. A test queues the responses it wants -- a good JSON answer, malformed text, a
429 with ``Retry-After``, a 500, a reply slower than the client's timeout -- and afterwards reads
:attr:`FakeOpenAIServer.requests` to check what actually left the machine (no secret, boundary markers
present). Nothing here is a language model: the answers are whatever the test scripted.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class ScriptedResponse:
    """One HTTP response: status, JSON body, headers, and how long to wait before sending it."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0


@dataclass
class RecordedRequest:
    """A request the server received: lower-cased headers, raw body (what crossed the wire), arrival time."""

    method: str
    path: str
    headers: dict[str, str]
    raw_body: bytes
    received_at: float

    @property
    def json(self) -> Any:
        return json.loads(self.raw_body) if self.raw_body else None

    @property
    def text(self) -> str:
        """All message contents of a chat request, joined (decoded, so JSON escapes do not hide text)."""
        body = self.json or {}
        return "\n".join(str(m.get("content", "")) for m in body.get("messages", []))


def chat_reply(content: str, *, model: str = "fake-model", finish_reason: str = "stop") -> ScriptedResponse:
    """A 200 chat completion whose first choice's message is ``content``."""
    return ScriptedResponse(
        body={
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": finish_reason,
                }
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
    )


def json_reply(payload: Any) -> ScriptedResponse:
    """A chat completion whose content is ``payload`` serialised as JSON."""
    return chat_reply(json.dumps(payload))


def error_reply(
    status: int, message: str = "fake error", headers: dict[str, str] | None = None
) -> ScriptedResponse:
    """An OpenAI-style error response."""
    return ScriptedResponse(
        status=status,
        body={"error": {"message": message, "type": "fake_error", "code": status}},
        headers=dict(headers or {}),
    )


def rate_limited(retry_after_s: float) -> ScriptedResponse:
    """HTTP 429 with a ``Retry-After`` header in seconds."""
    return error_reply(429, "rate limited", {"Retry-After": f"{retry_after_s:g}"})


def slow_reply(delay_s: float, then: ScriptedResponse | None = None) -> ScriptedResponse:
    """``then`` (a 200 with ``{}`` by default) sent only after ``delay_s`` seconds."""
    response = then or chat_reply("{}")
    return ScriptedResponse(response.status, response.body, response.headers, delay_s)


class FakeOpenAIServer:
    """Threaded HTTP server on a free loopback port. Use as a context manager or call start()/stop()."""

    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self.unscripted = 0
        self.responder: Callable[[RecordedRequest], ScriptedResponse] | None = None
        self._queue: deque[ScriptedResponse] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- scripting --------------------------------------------------------------------------------------
    def script(self, *responses: ScriptedResponse) -> None:
        """Queue responses, served in order, one per chat request."""
        with self._lock:
            self._queue.extend(responses)

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    def _next_response(self, request: RecordedRequest) -> ScriptedResponse:
        with self._lock:
            if self._queue:
                return self._queue.popleft()
        if self.responder is not None:
            return self.responder(request)
        with self._lock:
            self.unscripted += 1
        return error_reply(500, "fake server: no scripted response left")

    # -- lifecycle --------------------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("the fake OpenAI server is not started")
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def start(self) -> FakeOpenAIServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
                return

            def setup(self) -> None:
                super().setup()
                # headers and body are written separately: without this, Nagle + delayed ACK add ~40 ms
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def _record(self, method: str) -> RecordedRequest:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                headers = {name.lower(): value for name, value in self.headers.items()}
                request = RecordedRequest(method, self.path, headers, raw, time.monotonic())
                with server._lock:
                    server.requests.append(request)
                return request

            def _send(self, response: ScriptedResponse) -> None:
                if response.delay_s and server._stopping.wait(response.delay_s):
                    return
                payload = json.dumps(response.body if response.body is not None else {}).encode()
                try:
                    self.send_response(response.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    for name, value in response.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout) before the delayed answer

            def do_POST(self) -> None:
                request = self._record("POST")
                if not self.path.endswith("/chat/completions"):
                    self._send(error_reply(404, f"fake server: no route {self.path}"))
                    return
                self._send(server._next_response(request))

            def do_GET(self) -> None:
                self._record("GET")
                if self.path.endswith("/models"):
                    self._send(ScriptedResponse(body={"object": "list", "data": [{"id": "fake-model"}]}))
                else:
                    self._send(error_reply(404, f"fake server: no route {self.path}"))

        httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        httpd.daemon_threads = True
        httpd.block_on_close = False
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-openai", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # releases handlers sleeping on a delayed reply
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
