"""The DAGs on the production topology: ``stack/stack.py`` with the CeleryExecutor over Redis,
Postgres as metadata DB and result backend, and the lake on a loopback S3 server (moto).

One stack serves the module (starting it costs about 30 s): its own Postgres database, Redis DB
number, ports and AIRFLOW_HOME, so it never meets another test session's. Runs are triggered
through the REST API with a JWT, backfilled with ``airflow backfill create``, and survive a
Celery worker killed with SIGKILL in the middle of a task. The fixture stops every process the
stack started, by PID, and drops its database, also when a test fails.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from stack.stack import (
    StackSettings,
    claim_free_redis_db,
    down,
    group_pids,
    lake_client,
    service_pid,
    stack_env,
    stop_service,
    up,
)

from tests import waiting

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
AIRFLOW = str(Path(sys.executable).with_name("airflow"))
DAG_ID = "ingest_job_traces"
PASSWORD = "stack-test-password"
BACKFILL_DAYS = ["2023-07-01", "2023-07-02", "2023-07-03"]


def sample_job_ids(cluster: str, day: str) -> list[str]:
    lines = (ROOT / "include/sample_data/jobs" / cluster / f"{day}.csv").read_text().splitlines()
    return [line.split(",", 1)[0] for line in lines[1:]]


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    settings = StackSettings(
        home=tmp_path_factory.mktemp("stack"),
        password=PASSWORD,
        database=f"acme_stack_it_{uuid.uuid4().hex[:8]}",
        redis_db=claim_free_redis_db("test_stack"),
        parallelism=4,
        worker_concurrency=2,
        # A killed worker's task is found by its missing heartbeat and retried: seconds, not minutes.
        retry_delay_s=3,
        extra_env={
            # Only the runs the tests make: other DAGs stay paused, and the scheduler creates no
            # scheduled (cron or Asset-triggered) runs of its own.
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
            "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": "False",
            "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": "20",
            "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL": "5",
        },
    )
    try:
        up(settings)
        yield settings
    finally:
        groups = [json.loads(p.read_text())["pid"] for p in settings.pids.glob("*.json")]
        down(settings, purge=True)
        assert [g for g in groups if group_pids(g)] == [], "a process the stack started is still running"


class Api:
    """The stack's REST API v2 with a JWT from ``POST /auth/token``."""

    def __init__(self, base: str, token: str | None):
        self.base, self.token = base, token

    @classmethod
    def login(cls, settings: StackSettings) -> Api:
        base = stack_env(settings)["AIRFLOW__API__BASE_URL"]
        status, body = cls(base, None).call(
            "POST", "/auth/token", {"username": "admin", "password": PASSWORD}
        )
        assert status == 201, body
        return cls(base, body["access_token"])

    def call(self, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
        request = urllib.request.Request(
            self.base + path,
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Content-Type": "application/json"}
            | ({"Authorization": f"Bearer {self.token}"} if self.token else {}),
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"{}")

    def get(self, path: str) -> dict:
        status, body = self.call("GET", path)
        assert status == 200, (path, status, body)
        return body


def wait_for(predicate, timeout_s: float, what: str, settings: StackSettings, poll_s: float = 2):
    def stack_logs() -> str:
        tails = {p.name: p.read_text(errors="replace")[-2500:] for p in settings.logs.glob("*.log")}
        return f"; stack logs: {json.dumps(tails, indent=1)}"

    return waiting.wait_for(predicate, timeout_s, what, stack_logs, poll_s)


@pytest.fixture(scope="module")
def api(stack) -> Api:
    client = Api.login(stack)
    wait_for(lambda: client.call("GET", f"/api/v2/dags/{DAG_ID}")[0] == 200, 180,
             "the dag-processor to register the nightly DAG", stack)  # fmt: skip
    status, body = client.call("PATCH", f"/api/v2/dags/{DAG_ID}", {"is_paused": False})
    assert status == 200 and body["is_paused"] is False, body
    return client


def trigger(api: Api, conf: dict) -> str:
    run_id = f"manual__stack_test_{uuid.uuid4().hex[:8]}"
    status, body = api.call(
        "POST", f"/api/v2/dags/{DAG_ID}/dagRuns", {"dag_run_id": run_id, "logical_date": None, "conf": conf}
    )
    assert status == 200, body
    return run_id


def wait_for_run(
    api: Api, stack: StackSettings, run_id: str, timeout_s: float = 300, dag_id: str = DAG_ID
) -> str:
    def finished():
        state = api.get(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}")["state"]
        return state if state in ("success", "failed") else None

    return wait_for(finished, timeout_s, f"run {run_id} to finish", stack)


def lake_keys(stack: StackSettings) -> list[str]:
    pages = lake_client(stack).get_paginator("list_objects_v2").paginate(Bucket=stack.bucket, Prefix="lake/")
    return [item["Key"] for page in pages for item in page.get("Contents", [])]


def published_job_ids(stack: StackSettings, cluster: str, day: str) -> list[str]:
    key = f"lake/jobs/cluster={cluster}/date={day}/jobs.parquet"
    body = lake_client(stack).get_object(Bucket=stack.bucket, Key=key)["Body"].read()
    return pq.read_table(io.BytesIO(body))["job_id"].to_pylist()


def assert_day_published_exactly_once(stack: StackSettings, day: str) -> None:
    for cluster in ("seren", "kalos"):
        published = published_job_ids(stack, cluster, day)
        assert len(published) == len(set(published)), f"{cluster} {day}: a job is in the lake twice"
        assert sorted(published) == sorted(sample_job_ids(cluster, day)), f"{cluster} {day}: jobs differ"


def assert_nothing_partial(stack: StackSettings) -> None:
    """No staging area, lock or temporary object left behind by an interrupted or finished run."""
    leftovers = [
        k for k in lake_keys(stack) if k.startswith(("lake/staging/", "lake/_locks/")) or ".tmp" in k
    ]
    assert leftovers == []


def test_the_api_refuses_requests_without_a_token(stack, api):
    status, _ = Api(api.base, None).call("GET", f"/api/v2/dags/{DAG_ID}")
    assert status == 401
    status, _ = Api(api.base, None).call("POST", "/auth/token", {"username": "admin", "password": "wrong"})
    assert status == 401


CRASH_LOG = """\
2023-07-01 10:02:11 [rank0] step 1200 loss 2.113 lr 3.0e-4 tokens/s 81234
2023-07-01 10:02:14 [rank0] step 1201 loss 2.108 lr 3.0e-4 tokens/s 81190
Traceback (most recent call last):
  File "/workspace/train.py", line 412, in <module>
    loss.backward()
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.50 GiB. GPU 3 has a total capacity of 79.15 GiB
"""


def test_diagnosis_dag_triggered_by_hand_after_a_crash(stack, api):
    """Unpausing the Asset-scheduled DAG starts only this manual run (the stack creates no scheduled runs)."""
    dag_id, job_id = "diagnose_failures", "crash-7"
    log_key = f"lake/logs/cluster=seren/job={job_id}/rank0.log"
    lake_client(stack).put_object(Bucket=stack.bucket, Key=log_key, Body=CRASH_LOG.encode())
    for conf, complaint in (({"job_id": 42}, "is not of type"), ({"day": "July 1st"}, "is not a 'date'")):
        status, body = api.call(
            "POST", f"/api/v2/dags/{dag_id}/dagRuns", {"logical_date": None, "conf": conf}
        )
        assert status == 400 and complaint in body["detail"], body
    wait_for(lambda: api.call("GET", f"/api/v2/dags/{dag_id}")[0] == 200, 120, f"{dag_id} to register", stack)
    assert api.call("PATCH", f"/api/v2/dags/{dag_id}", {"is_paused": False})[0] == 200
    try:
        run_id = f"manual__crash_{uuid.uuid4().hex[:8]}"
        conf = {"cluster": "seren", "job_id": job_id, "day": "2023-07-01"}
        status, body = api.call(
            "POST",
            f"/api/v2/dags/{dag_id}/dagRuns",
            {"dag_run_id": run_id, "logical_date": None, "conf": conf},
        )
        assert status == 200, body
        assert wait_for_run(api, stack, run_id, dag_id=dag_id) == "success"
    finally:
        api.call("PATCH", f"/api/v2/dags/{dag_id}", {"is_paused": True})
    key = "lake/diagnoses/cluster=seren/date=2023-07-01/diagnoses.parquet"
    body = lake_client(stack).get_object(Bucket=stack.bucket, Key=key)["Body"].read()
    records = pq.read_table(io.BytesIO(body)).to_pylist()
    assert [(r["job_id"], r["reason"]) for r in records] == [(job_id, "OutOfMemoryError")]


def test_rest_triggered_nightly_run_publishes_to_the_s3_lake(stack, api):
    run_id = trigger(api, {"day": "2023-07-01"})
    assert wait_for_run(api, stack, run_id) == "success"
    tasks = api.get(f"/api/v2/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances")["task_instances"]
    # One ingest task per configured cluster, on the Celery worker.
    assert sorted((t["task_id"], t["rendered_map_index"], t["state"]) for t in tasks) == [
        ("ingest", "kalos", "success"),
        ("ingest", "seren", "success"),
    ]
    assert {t["hostname"] for t in tasks} != {""}
    assert_day_published_exactly_once(stack, "2023-07-01")
    assert_nothing_partial(stack)


@pytest.mark.parametrize(
    ("conf", "complaint"),
    [
        ({"source": "parquet"}, "is not one of"),
        ({"cluster": "nowhere"}, "is not one of"),  # a dropdown of the configured clusters
        ({"day": "yesterday"}, "is not a 'date'"),
    ],
)
def test_invalid_params_are_refused_with_http_400(stack, api, conf, complaint):
    before = api.get(f"/api/v2/dags/{DAG_ID}/dagRuns")["total_entries"]
    status, body = api.call("POST", f"/api/v2/dags/{DAG_ID}/dagRuns", {"logical_date": None, "conf": conf})
    assert status == 400
    assert complaint in body["detail"]
    assert api.get(f"/api/v2/dags/{DAG_ID}/dagRuns")["total_entries"] == before


def test_cli_backfill_of_three_days_runs_two_at_a_time_and_publishes_each_job_once(stack, api):
    created = subprocess.run(
        [AIRFLOW, "backfill", "create", "--dag-id", DAG_ID, "--from-date", BACKFILL_DAYS[0],
         "--to-date", BACKFILL_DAYS[-1], "--max-active-runs", "2", "--reprocess-behavior", "completed"],
        env={**os.environ, **stack_env(stack)},
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert created.returncode == 0, created.stderr[-2000:]
    most_running = 0

    def finished_runs():
        nonlocal most_running
        runs = api.get(f"/api/v2/dags/{DAG_ID}/dagRuns?run_type=backfill")["dag_runs"]
        most_running = max(most_running, sum(r["state"] == "running" for r in runs))
        done = len(runs) == len(BACKFILL_DAYS) and all(r["state"] in ("success", "failed") for r in runs)
        return runs if done else None

    runs = wait_for(finished_runs, 480, "the backfill runs to finish", stack, poll_s=0.5)
    assert sorted(r["logical_date"][:10] for r in runs) == BACKFILL_DAYS, runs
    assert sorted(r["state"] for r in runs) == ["success"] * len(BACKFILL_DAYS)
    assert 1 <= most_running <= 2
    for day in BACKFILL_DAYS:
        assert_day_published_exactly_once(stack, day)
    assert_nothing_partial(stack)


def _freeze_worker_mid_ingest(stack, api, day: str) -> tuple[str, set[int]]:
    """Trigger a run of ``day``, wait until an ``ingest`` task runs, then SIGSTOP the worker: the map indexes
    of the ingest attempts still running once it is frozen (none when they all finished in between: the
    task is about a second long, so a fast machine can win that race; then the worker is resumed)."""
    run_id = trigger(api, {"day": day, "cluster": "seren"})

    def ingest_running():
        tasks = api.get(f"/api/v2/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances")["task_instances"]
        return [t for t in tasks if t["task_id"] == "ingest" and t["state"] == "running"]

    wait_for(ingest_running, 240, "the ingest task to run", stack, poll_s=0.2)
    os.killpg(service_pid(stack, "worker"), signal.SIGSTOP)  # a frozen attempt can no longer finish
    frozen = {t["map_index"] for t in ingest_running()}
    if not frozen:
        os.killpg(service_pid(stack, "worker"), signal.SIGCONT)
        wait_for_run(api, stack, run_id, timeout_s=360)
    return run_id, frozen


def test_run_survives_a_worker_killed_mid_task(stack, api):
    # The worker is frozen first and killed only while an attempt is provably unfinished (an attempt
    # seen running by one poll may have finished before a plain SIGKILL landed: then nothing was retried).
    for day in ("2023-07-02", "2023-07-03", "2023-07-01"):
        run_id, killed_attempts = _freeze_worker_mid_ingest(stack, api, day)
        if killed_attempts:
            break
    else:
        pytest.fail("in three runs every ingest attempt finished before the worker could be frozen")
    killed_worker = service_pid(stack, "worker")
    assert stop_service(stack, "worker", signal.SIGKILL)
    assert service_pid(stack, "worker") is None
    up(stack)  # starts only what is missing: a new worker
    assert service_pid(stack, "worker") not in (None, killed_worker)

    assert wait_for_run(api, stack, run_id, timeout_s=360) == "success"
    tasks = api.get(f"/api/v2/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances")["task_instances"]
    killed = [t for t in tasks if t["task_id"] == "ingest" and t["map_index"] in killed_attempts]
    assert killed and all(t["try_number"] >= 2 for t in killed), (
        "the killed attempts should have been retried"
    )
    published = published_job_ids(stack, "seren", day)
    assert sorted(published) == sorted(sample_job_ids("seren", day))
    assert len(published) == len(set(published))
    assert_nothing_partial(stack)


def test_down_never_signals_a_process_whose_pid_was_reused(tmp_path):
    """A PID record whose process is gone names someone else's process now: it is left alone."""
    settings = StackSettings(home=tmp_path, password=PASSWORD)
    settings.pids.mkdir(parents=True)
    stranger = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        record = {"pid": stranger.pid, "start_ticks": 1, "argv": ["moto_server"], "log_offset": 0}
        (settings.pids / "s3.json").write_text(json.dumps(record))
        assert service_pid(settings, "s3") is None
        assert stop_service(settings, "s3") is False
        assert stranger.poll() is None
        assert not (settings.pids / "s3.json").exists()
    finally:
        stranger.kill()
        stranger.wait()


def test_stop_service_ends_the_whole_process_group(tmp_path):
    settings = StackSettings(home=tmp_path, password=PASSWORD)
    settings.pids.mkdir(parents=True)
    settings.logs.mkdir(parents=True)
    # A service whose leader starts a child in its group, as Celery and the api-server do.
    child_script = "import subprocess, time; subprocess.Popen(['sleep', '60']); time.sleep(60)"
    process = subprocess.Popen([sys.executable, "-c", child_script], start_new_session=True)
    try:
        ticks = int(Path(f"/proc/{process.pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
        record = {"pid": process.pid, "start_ticks": ticks, "argv": [], "log_offset": 0}
        (settings.pids / "s3.json").write_text(json.dumps(record))
        deadline = time.monotonic() + 10
        while len(group_pids(process.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(group_pids(process.pid)) == 2
        assert stop_service(settings, "s3", grace_s=5) is True
        assert group_pids(process.pid) == []
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
