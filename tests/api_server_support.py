"""A real Airflow api-server for the tests that talk to it (trigger forms, human-in-the-loop answers): the
environment of a project-local Airflow home with the simple auth manager, the server on loopback, and a
JWT for the REST API. The server is stopped (its whole process group) when the context ends."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
AIRFLOW = str(Path(sys.executable).with_name("airflow"))


def api_server_env(home: Path, port: int, password: str, **extra: str) -> dict[str, str]:
    """The environment of an Airflow home at ``home`` with this project's DAGs and plugins, one user
    ``admin`` with ``password``, and the API on ``127.0.0.1:port``; ``extra`` adds or overrides variables."""
    (home / "passwords.json").write_text(json.dumps({"admin": password}))
    env = dict(os.environ)
    env.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "dags"),
            "AIRFLOW__CORE__PLUGINS_FOLDER": str(ROOT / "plugins"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__ASSET_MANAGER_CLASS": "acme_airflow.asset_manager.OrderedAssetManager",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(home / "passwords.json"),
            "AIRFLOW__API_AUTH__JWT_SECRET": f"acme-test-secret-{port}",
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(port),
            "ACME_LAKE_URI": str(home / "lake"),
            **extra,
        }
    )
    return env


def stop(process: subprocess.Popen) -> None:
    """SIGTERM to the process group, SIGKILL after 30 s."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


@contextmanager
def running_api_server(env: dict[str, str], home: Path, timeout_s: float = 180) -> Iterator[str]:
    """``airflow api-server`` on the env's host and port, healthy; yields its base URL."""
    base = f"http://127.0.0.1:{env['AIRFLOW__API__PORT']}"
    with (home / "api-server.log").open("w") as log:
        process = subprocess.Popen(
            [AIRFLOW, "api-server", "--host", "127.0.0.1", "--port", env["AIRFLOW__API__PORT"]],
            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + timeout_s
            while not _healthy(base):
                if time.monotonic() > deadline or process.poll() is not None:
                    pytest.fail(f"api-server did not start: {(home / 'api-server.log').read_text()[-3000:]}")
                time.sleep(1)
            yield base
        finally:
            stop(process)


def _healthy(base: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base}/api/v2/monitor/health", timeout=5) as answer:
            return answer.status == 200
    except OSError:
        return False


def token(base: str, password: str) -> str:
    """A JWT of ``admin`` for the REST API."""
    request = urllib.request.Request(
        f"{base}/auth/token",
        data=json.dumps({"username": "admin", "password": password}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.load(answer)["access_token"]
