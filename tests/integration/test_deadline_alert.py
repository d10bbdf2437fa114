"""The nightly chain's DeadlineAlert fires for real: a scheduler (LocalExecutor, Postgres) finds the missed
deadline of a ``diagnose_failures`` run that is not done (its DAG is paused, so the run stays queued; budget
ACME_NOTIFY_STEP_BUDGET_MINUTES=1), a triggerer runs the late-notice callback, and the notices (one per
cluster) arrive at on-call's mailbox (aiosmtpd). Everything started here is stopped here, by process
group. The hour-based deadline of ``ingest_job_traces`` is checked at parse time in
tests/unit/notify/test_deadlines.py (an hour cannot pass inside a test)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from tests.integration.test_scheduler_backfill import AIRFLOW, ROOT, airflow_json, psql, wait_for
from tests.notify_support import free_port, smtp_connection, smtp_server

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _start(env: dict, logs: Path, name: str, *args: str) -> subprocess.Popen:
    log = (logs / f"{name}.log").open("w")
    return subprocess.Popen(
        [AIRFLOW, *args], env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )


def _stop(processes: list[subprocess.Popen]) -> None:
    for process in processes:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
    deadline = time.monotonic() + 30
    for process in processes:
        try:
            process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def test_a_run_not_done_by_its_deadline_sends_the_late_notice_to_oncall(tmp_path):
    if subprocess.run(["pg_isready", "-h", "127.0.0.1"], capture_output=True).returncode != 0:
        pytest.fail("PostgreSQL is not running on 127.0.0.1:5432")
    database = f"acme_h29a_{uuid.uuid4().hex[:10]}"
    psql(f"CREATE DATABASE {database}")
    routing = tmp_path / "notify.yaml"
    routing.write_text("channels: {mail: {kind: smtp, connection: smtp_h29a_late}}\n"
                       "oncall: {default: {channel: mail, to: oncall@acme.example}}\n")  # fmt: skip
    port = free_port()
    logs = tmp_path / "logs"
    logs.mkdir()
    processes: list[subprocess.Popen] = []
    with smtp_server() as (mailbox, smtp_port):
        env = {**os.environ,
               "AIRFLOW_HOME": str(tmp_path / "airflow"),
               "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"postgresql+psycopg2://postgres@127.0.0.1:5432/{database}",
               "AIRFLOW__CORE__EXECUTOR": "LocalExecutor", "AIRFLOW__CORE__PARALLELISM": "2",
               "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "dags"), "AIRFLOW__CORE__PLUGINS_FOLDER": str(ROOT / "plugins"),
               "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
               "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": "False",
               "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
               "AIRFLOW__API__HOST": "127.0.0.1", "AIRFLOW__API__PORT": str(port),
               "AIRFLOW__API_AUTH__JWT_SECRET": "acme-h29a-test-secret",
               "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5", "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "2",
               "ACME_LAKE_URI": str(tmp_path / "lake"), "ACME_NOTIFY_FILE": str(routing),
               "ACME_NOTIFY_DEADLINE_HOUR": "6", "ACME_NOTIFY_STEP_BUDGET_MINUTES": "1",
               "AIRFLOW_CONN_SMTP_H29A_LATE": smtp_connection(smtp_port)}  # fmt: skip
        try:
            subprocess.run([AIRFLOW, "db", "migrate"], env=env, check=True, capture_output=True, timeout=300)
            processes.append(
                _start(env, logs, "api-server", "api-server", "--host", "127.0.0.1", "--port", str(port))
            )
            processes.append(_start(env, logs, "dag-processor", "dag-processor"))
            processes.append(_start(env, logs, "scheduler", "scheduler", "--skip-serve-logs"))
            processes.append(_start(env, logs, "triggerer", "triggerer", "--skip-serve-logs"))
            wait_for(
                lambda: any(d["dag_id"] == "diagnose_failures" for d in airflow_json(env, "dags", "list")),
                180, "the dag-processor to register diagnose_failures", logs,
            )  # fmt: skip
            # The paused DAG keeps the run queued, unfinished, past its deadline (queued + 1 min).
            triggered = subprocess.run(
                [AIRFLOW, "dags", "trigger", "diagnose_failures", "--run-id", "h29a-late-night",
                 "--conf", '{"cluster": "kalos", "day": "2023-07-01"}'],
                env=env, capture_output=True, text=True, timeout=120,
            )  # fmt: skip
            assert triggered.returncode == 0, triggered.stderr[-2000:]
            wait_for(lambda: len(mailbox.messages) >= 2, 240, "the late notices (one per cluster)", logs)
        finally:
            _stop(processes)
            psql(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
    subjects = sorted(m["Subject"] for m in mailbox.messages)
    assert len(subjects) == 2  # kalos and seren, once each
    assert all(s.startswith("[acme late] diagnose_failures for ") for s in subjects), subjects
    assert all(s.endswith("(1 min after being queued)") for s in subjects), subjects
    assert all(r == ["oncall@acme.example"] for r in mailbox.recipients)
    assert "h29a-late-night" in mailbox.bodies()[0]
