"""A small client of the stack's REST API v2 (JWT from ``POST /auth/token``) for benchmarks and tests:
trigger a run, wait for it, read its task instances, unpause a DAG, and the per-task timeline of a run.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from datetime import datetime
from typing import Any

from stack.stack import STACK_USER, StackSettings, stack_env

FINISHED = ("success", "failed")


class StackApi:
    def __init__(self, settings: StackSettings):
        self.base = stack_env(settings)["AIRFLOW__API__BASE_URL"]
        self.token = None
        body = self.call("POST", "/auth/token", {"username": STACK_USER, "password": settings.password})
        self.token = body["access_token"]

    def call(self, method: str, path: str, body: dict | None = None) -> dict[str, Any]:
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as error:
            raise RuntimeError(f"{method} {path}: HTTP {error.code}: {error.read()[:500]!r}") from error

    def unpause(self, dag_id: str, timeout_s: float = 300) -> None:
        """Unpause ``dag_id`` once the dag-processor has parsed it."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self.call("PATCH", f"/api/v2/dags/{dag_id}", {"is_paused": False})
                return
            except (OSError, RuntimeError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(1)

    def trigger(self, dag_id: str, conf: dict[str, Any], run_id: str | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"logical_date": None, "conf": conf}
        if run_id:
            body["dag_run_id"] = run_id
        return self.call("POST", f"/api/v2/dags/{dag_id}/dagRuns", body)

    def runs(self, dag_id: str) -> list[dict[str, Any]]:
        return self.call("GET", f"/api/v2/dags/{dag_id}/dagRuns?limit=100&order_by=-run_after")["dag_runs"]

    def run(self, dag_id: str, run_id: str) -> dict[str, Any] | None:
        try:
            return self.call("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}")
        except RuntimeError as error:
            if "HTTP 404" in str(error):
                return None
            raise

    def wait_run(
        self, dag_id: str, run_id: str, timeout_s: float = 600, poll_s: float = 0.5
    ) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            found = self.run(dag_id, run_id)
            if found and found["state"] in FINISHED:
                return found
            time.sleep(poll_s)
        raise TimeoutError(f"{dag_id} run {run_id} did not finish within {timeout_s:.0f} s")

    def task_instances(self, dag_id: str, run_id: str) -> list[dict[str, Any]]:
        return self.call("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances?limit=500")[
            "task_instances"
        ]


def _at(text: str | None) -> float | None:
    return datetime.fromisoformat(text).timestamp() if text else None


def timeline(api: StackApi, dag_id: str, run_id: str, origin: float) -> list[dict[str, Any]]:
    """The run's task instances in start order with times in seconds after ``origin`` (epoch seconds):
    when queued, started and ended, and how long each waited queued and ran."""
    rows = []
    for ti in api.task_instances(dag_id, run_id):
        queued, start, end = _at(ti.get("queued_when")), _at(ti.get("start_date")), _at(ti.get("end_date"))
        rows.append(
            {
                "dag": dag_id,
                "task": ti["task_id"] + (f"[{ti['map_index']}]" if ti.get("map_index", -1) >= 0 else ""),
                "state": ti["state"],
                "queued_at_s": None if queued is None else round(queued - origin, 2),
                "start_s": None if start is None else round(start - origin, 2),
                "end_s": None if end is None else round(end - origin, 2),
                "queued_s": None if None in (queued, start) else round(start - queued, 2),
                "running_s": None if None in (start, end) else round(end - start, 2),
            }
        )
    return sorted(rows, key=lambda r: (r["start_s"] is None, r["start_s"] or 0))
