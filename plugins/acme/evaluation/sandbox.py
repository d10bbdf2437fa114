"""Run a generated program against its unit tests, contained: HumanEval-style code execution.

Model-written code is untrusted. Each program runs in its own process:

- in a fresh temporary directory (its working directory, removed afterwards), with an empty
  environment except ``PATH``, ``HOME`` and ``TMPDIR`` pointing into that directory;
- ``python -I -S`` (isolated mode: no user site, no ``PYTHON*`` variables, no current dir on path);
- resource limits set in the child before ``exec``: CPU seconds (timeout + 1), address space
  (``memory_mb``), file size (16 MB), open files (64), no core dumps;
- its own session, killed as a process group when the wall-clock ``timeout_s`` passes;
- **no network**: inside a new, empty network namespace (``unshare -rn``: only a down loopback)
  when the host allows unprivileged user namespaces; otherwise (``network="guard"``) a
  ``sitecustomize``-free prelude replaces ``socket.socket`` with one that refuses to connect —
  weaker, and reported as such in ``SandboxResult.network``.

``passed`` is True only when the program exits 0 within the limits.
"""

from __future__ import annotations

import contextlib
import functools
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

NETWORK_GUARD = """
import socket as _socket
class _NoNetwork(_socket.socket):
    def connect(self, *args, **kwargs):
        raise OSError("network disabled in the evaluation sandbox")
    connect_ex = connect
_socket.socket = _NoNetwork
_socket.create_connection = lambda *a, **k: (_ for _ in ()).throw(OSError("network disabled"))
del _socket, _NoNetwork
"""


@dataclass(frozen=True)
class SandboxResult:
    passed: bool
    status: str  # passed | failed | timeout
    returncode: int | None
    seconds: float
    network: str  # namespace | guard
    stderr_tail: str


@functools.cache
def network_isolation() -> str:
    """``namespace`` if ``unshare -rn`` works on this host, else ``guard``."""
    unshare = shutil.which("unshare")
    if not unshare:
        return "guard"
    try:
        done = subprocess.run([unshare, "-rn", "true"], capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return "guard"
    return "namespace" if done.returncode == 0 else "guard"


def _limits(cpu_s: int, memory_mb: int):
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s))
        resource.setrlimit(resource.RLIMIT_AS, (memory_mb << 20, memory_mb << 20))
        resource.setrlimit(resource.RLIMIT_FSIZE, (16 << 20, 16 << 20))
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    return apply


def run_program(program: str, timeout_s: float = 10.0, memory_mb: int = 1024) -> SandboxResult:
    """Execute ``program`` (source text) in the sandbox; see the module doc for the limits."""
    network = network_isolation()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="acme-sandbox-") as workdir:
        script = os.path.join(workdir, "program.py")
        with open(script, "w", encoding="utf-8") as handle:
            if network == "guard":
                handle.write(NETWORK_GUARD)
            handle.write(program)
        command = [sys.executable, "-I", "-S", script]
        if network == "namespace":
            command = [shutil.which("unshare") or "unshare", "-rn", *command]
        env = {"PATH": "/usr/bin:/bin", "HOME": workdir, "TMPDIR": workdir, "LANG": "C.UTF-8"}
        process = subprocess.Popen(
            command,
            cwd=workdir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=_limits(int(timeout_s) + 1, memory_mb),  # the child only sets its limits
        )
        try:
            _, stderr = process.communicate(timeout=timeout_s)
            status = "passed" if process.returncode == 0 else "failed"
        except subprocess.TimeoutExpired:
            with_group_killed(process)
            _, stderr = process.communicate()
            status = "timeout"
    tail = (stderr or b"").decode("utf-8", "replace")[-500:]
    return SandboxResult(
        status == "passed", status, process.returncode, time.perf_counter() - started, network, tail
    )


def with_group_killed(process: subprocess.Popen) -> None:
    """Kill the program and anything it forked (its own session's process group)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


def humaneval_program(prompt: str, completion: str, test: str, entry_point: str) -> str:
    """HumanEval's check program: prompt + completion, the test's ``check``, then the call."""
    return f"{prompt}{completion}\n\n{test}\n\ncheck({entry_point})\n"
