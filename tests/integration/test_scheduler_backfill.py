"""`airflow backfill create` executed by a real scheduler (LocalExecutor) on a Postgres metadata DB.

Starts api-server, dag-processor and scheduler as separate processes on 127.0.0.1 (the
topology of production minus Celery), backfills three sample days with two runs at a time,
and checks that every run succeeded and every job is in the lake exactly once. Everything
started here is stopped here, by process group, also when the test fails.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.integration.conftest import free_port

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
AIRFLOW = str(Path(sys.executable).with_name("airflow"))
DAYS = ["2023-07-01", "2023-07-02", "2023-07-03"]


def psql(sql: str) -> None:
    subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-v", "ON_ERROR_STOP=1", "-c", sql],
                   check=True, capture_output=True)  # fmt: skip


@pytest.fixture
def airflow_env(tmp_path):
    if subprocess.run(["pg_isready", "-h", "127.0.0.1"], capture_output=True).returncode != 0:
        pytest.fail("PostgreSQL is not running on 127.0.0.1:5432")
    database = f"acme_it_{uuid.uuid4().hex[:10]}"
    psql(f"CREATE DATABASE {database}")
    port = free_port()
    env = dict(os.environ)
    env.update(
        {
            "AIRFLOW_HOME": str(tmp_path / "airflow"),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"postgresql+psycopg2://postgres@127.0.0.1:5432/{database}",
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__CORE__PARALLELISM": "4",
            "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "dags"),
            "AIRFLOW__CORE__PLUGINS_FOLDER": str(ROOT / "plugins"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            # Only the DAG under test runs: the others (their Asset-triggered runs after each ingest) and
            # the scheduled run for yesterday would compete with the backfill for the executor's slots.
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
            "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": "False",
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(port),
            "AIRFLOW__API_AUTH__JWT_SECRET": "acme-integration-test-secret",
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
            "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "2",
            "ACME_LAKE_URI": str(tmp_path / "lake"),
        }
    )
    logs = tmp_path / "logs"
    logs.mkdir()
    subprocess.run([AIRFLOW, "db", "migrate"], env=env, check=True, capture_output=True, timeout=300)
    processes = []
    try:
        for name, args in (
            ("api-server", ["api-server", "--host", "127.0.0.1", "--port", str(port)]),
            ("dag-processor", ["dag-processor"]),
            ("scheduler", ["scheduler", "--skip-serve-logs"]),
        ):
            log = (logs / f"{name}.log").open("w")
            processes.append(
                (
                    name,
                    subprocess.Popen(
                        [AIRFLOW, *args],
                        env=env,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    ),
                )  # fmt: skip
            )
        yield {"env": env, "lake": tmp_path / "lake", "logs": logs}
    finally:
        for _, process in processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        for _, process in processes:
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        psql(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")


def airflow_json(env: dict, *args: str):
    done = subprocess.run(
        [AIRFLOW, *args, "-o", "json"], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    # Airflow's CLI may print log lines before the JSON document.
    document = [line for line in done.stdout.splitlines() if line.startswith(("[", "{"))]
    return json.loads(document[-1]) if document else []


def wait_for(predicate, timeout_s: float, what: str, logs: Path):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        result = predicate()
        if result:
            return result
        time.sleep(3)
    tails = {p.name: p.read_text()[-3000:] for p in logs.glob("*.log")}
    pytest.fail(f"timed out waiting for {what}; process logs: {json.dumps(tails, indent=1)}")


def test_backfill_of_three_days_runs_two_at_a_time_and_publishes_each_job_once(airflow_env):
    env, lake = airflow_env["env"], airflow_env["lake"]
    wait_for(
        lambda: any(d["dag_id"] == "ingest_job_traces" for d in airflow_json(env, "dags", "list")),
        180, "the dag-processor to register ingest_job_traces", airflow_env["logs"],
    )  # fmt: skip
    unpaused = subprocess.run(
        [AIRFLOW, "dags", "unpause", "ingest_job_traces"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert unpaused.returncode == 0, unpaused.stderr[-2000:]
    created = subprocess.run(
        [AIRFLOW, "backfill", "create", "--dag-id", "ingest_job_traces", "--from-date", DAYS[0],
         "--to-date", DAYS[-1], "--max-active-runs", "2"],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert created.returncode == 0, created.stderr[-2000:]

    def finished_runs():
        runs = airflow_json(env, "dags", "list-runs", "ingest_job_traces")
        backfill = [r for r in runs if r["run_id"].startswith("backfill__")]
        done = len(backfill) == len(DAYS) and all(r["state"] in ("success", "failed") for r in backfill)
        return backfill if done else None

    runs = wait_for(finished_runs, 420, "the backfill runs to finish", airflow_env["logs"])
    assert sorted(r["state"] for r in runs) == ["success"] * len(DAYS)

    job_ids = []
    for day in DAYS:
        for cluster in ("seren", "kalos"):
            sample = ROOT / "include" / "sample_data" / "jobs" / cluster / f"{day}.csv"
            table = pq.read_table(lake / f"jobs/cluster={cluster}/date={day}/jobs.parquet")
            assert table.num_rows == len(sample.read_text().splitlines()) - 1
            job_ids += [(cluster, job_id) for job_id in table["job_id"].to_pylist()]
    assert len(job_ids) == len(set(job_ids)), "a job is in the lake more than once"
    assert sorted(p.name for p in (lake / "jobs/cluster=seren").iterdir()) == [f"date={d}" for d in DAYS]
