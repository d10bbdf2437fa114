"""A private PostgreSQL server and a private redis-server on loopback that a test may restart.

The machine's shared servers (Postgres on 5432, Redis on 6379) serve other test sessions and must
never be restarted; a test that restarts the metadata DB or the broker of a stack points the stack
at these instead. Each runs the machine's own binaries (Debian's PostgreSQL 15, ``redis-server``)
on a free port of 127.0.0.1 with its data in a temporary folder, and is stopped (and the folder
removed) when its context manager exits, also when the test fails.

PostgreSQL refuses to run as root, so when the test runs as root the server runs as the
``postgres`` user (``runuser``) from a folder that user owns; trust authentication on loopback.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

POSTGRES_BIN = Path(os.environ.get("ACME_TEST_POSTGRES_BIN", "/usr/lib/postgresql/15/bin"))
POSTGRES_OS_USER = "postgres"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _wait_until(check, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    raise TimeoutError(f"timed out after {timeout_s:.0f} s waiting for {what}")


@dataclass
class PrivatePostgres:
    """A PostgreSQL cluster of its own: ``postgres@127.0.0.1:<port>``, trust authentication."""

    folder: Path
    port: int

    @property
    def data(self) -> Path:
        return self.folder / "data"

    @property
    def log(self) -> Path:
        return self.folder / "postgres.log"

    @property
    def address(self) -> str:
        """``user@host:port``, as ``StackSettings.postgres`` takes it."""
        return f"postgres@127.0.0.1:{self.port}"

    def _run(self, *args: str, timeout_s: float = 120) -> subprocess.CompletedProcess:
        command = [str(POSTGRES_BIN / args[0]), *args[1:]]
        if os.geteuid() == 0:
            command = ["runuser", "-u", POSTGRES_OS_USER, "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
        if done.returncode != 0:
            log = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""
            raise RuntimeError(f"{' '.join(args[:2])} failed: {done.stderr[-2000:]}\nserver log: {log}")
        return done

    def init(self) -> None:
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8")

    def start(self) -> None:
        options = f"-c listen_addresses=127.0.0.1 -p {self.port} -c unix_socket_directories={self.folder}"
        self._run(
            "pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", options, "-w", "-t", "60", "start"
        )

    def stop(self, mode: str = "fast") -> None:
        """``fast``: roll back open transactions, close every connection, shut down cleanly."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop")

    def running(self) -> bool:
        return (self.data / "postmaster.pid").exists() and _port_open(self.port)


@contextlib.contextmanager
def private_postgres() -> Iterator[PrivatePostgres]:
    """Start a fresh PostgreSQL cluster; stop it (immediate mode if need be) and remove it on exit."""
    folder = Path(tempfile.mkdtemp(prefix="acme-private-pg-"))
    if os.geteuid() == 0:
        account = pwd.getpwnam(POSTGRES_OS_USER)
        os.chown(folder, account.pw_uid, account.pw_gid)
    server = PrivatePostgres(folder=folder, port=free_port())
    try:
        server.init()
        server.start()
        yield server
    finally:
        if (server.data / "postmaster.pid").exists():
            try:
                server.stop("fast")
            except (RuntimeError, subprocess.TimeoutExpired):
                server.stop("immediate")
        shutil.rmtree(folder, ignore_errors=True)


@dataclass
class PrivateRedis:
    """A ``redis-server`` of its own on 127.0.0.1 that keeps nothing on disk (``--save ''``)."""

    folder: Path
    port: int
    process: subprocess.Popen | None = None

    @property
    def address(self) -> str:
        """``host:port``, as ``StackSettings.redis`` takes it."""
        return f"127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.folder / "redis.log"

    def start(self) -> None:
        command = [
            shutil.which("redis-server") or "redis-server", "--bind", "127.0.0.1", "--port", str(self.port),
            "--save", "", "--appendonly", "no", "--dir", str(self.folder), "--logfile", str(self.log),
        ]  # fmt: skip
        self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, start_new_session=True)
        _wait_until(lambda: _port_open(self.port), 20, f"redis-server on port {self.port}")

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 10 s; everything it held in memory is gone."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@contextlib.contextmanager
def private_redis() -> Iterator[PrivateRedis]:
    """Start an empty redis-server; stop it and remove its folder on exit."""
    folder = Path(tempfile.mkdtemp(prefix="acme-private-redis-"))
    server = PrivateRedis(folder=folder, port=free_port())
    try:
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)
