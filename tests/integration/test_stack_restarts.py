"""The production stack survives a restart of its metadata DB (Postgres) or its broker (Redis) mid-run.

The stack (``stack/stack.py``: CeleryExecutor, api-server, scheduler, dag-processor, triggerer, one
worker, the lake on a loopback S3 server) runs against a private PostgreSQL and a private
redis-server (``tests/fakes/private_servers.py``), never the machine's shared ones, so restarting
them disturbs no other test. Each test triggers the nightly job DAG for a day through the REST
API, stops one server for a few seconds while a task runs and another waits in the broker, starts
it again, and expects the run to succeed (retried or re-queued where needed) and the lake to equal
a clean run's: the same objects, the same rows, each job once, no staging or lock leftovers.

After the restart the test does what the deployment's supervisor does (``restart: unless-stopped``
in docker-compose.yaml): ``up`` starts again whatever of the stack exited (on a Postgres restart,
the scheduler, dag-processor and triggerer exit). What each component did is printed and attached
to the test's report (``record_property``).
"""

from __future__ import annotations

import io
import json
import os
import re
import signal
import time
import uuid

import pyarrow.parquet as pq
import pytest
from stack.stack import SERVICES, StackSettings, down, group_pids, lake_client, service_pid, up

from tests.fakes.private_servers import private_postgres, private_redis
from tests.integration.test_stack import DAG_ID, PASSWORD, Api, wait_for, wait_for_run

pytestmark = pytest.mark.integration

DAY = "2023-07-01"
OUTAGE_S = 5  # how long a server stays down
# What a restart may cost: the stuck-task checks below, a retry or two, and the runs themselves.
RUN_TIMEOUT_S = 200


@pytest.fixture(scope="module")
def postgres():
    with private_postgres() as server:
        yield server


@pytest.fixture(scope="module")
def redis_server():
    with private_redis() as server:
        yield server


@pytest.fixture(scope="module")
def stack(tmp_path_factory, postgres, redis_server):
    """A stack on the private servers: its own database on the private Postgres, their Redis DB 0."""
    settings = StackSettings(
        home=tmp_path_factory.mktemp("stack"),
        password=PASSWORD,
        database="acme_stack_restarts",
        postgres=postgres.address,
        redis=redis_server.address,
        redis_db=0,
        # One worker slot and two task instances at once: while a task runs, its sibling (the
        # other cluster's mapped task) waits in the broker, where a restart of Redis loses it.
        parallelism=2,
        worker_concurrency=1,
        retry_delay_s=3,  # a retried task waits seconds, not the DAGs' minutes of backoff
        extra_env={
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
            "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": "False",
            "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": "20",
            "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL": "5",
            # The stack's recovery of lost Celery messages (stack_env: 300 s, 30 s, 60 s), shortened
            # so that a test waits one minute, not five (tasks here wait seconds for the worker).
            "AIRFLOW__SCHEDULER__TASK_QUEUED_TIMEOUT": "60",
            "AIRFLOW__SCHEDULER__TASK_QUEUED_TIMEOUT_CHECK_INTERVAL": "10",
            "AIRFLOW__SCHEDULER__ORPHANED_TASKS_CHECK_INTERVAL": "20",
        },
    )
    try:
        up(settings)
        yield settings
    finally:
        groups = [json.loads(p.read_text())["pid"] for p in settings.pids.glob("*.json")]
        # The private servers go away with the module: nothing to drop or flush, and the stack's
        # folder (its logs) stays with pytest's temporary folders for a look after a failure.
        down(settings)
        assert [g for g in groups if group_pids(g)] == [], "a process the stack started is still running"


@pytest.fixture(scope="module")
def api(stack) -> Api:
    client = Api.login(stack)
    wait_for(lambda: client.call("GET", f"/api/v2/dags/{DAG_ID}")[0] == 200, 180,
             "the dag-processor to register the nightly DAG", stack)  # fmt: skip
    status, body = client.call("PATCH", f"/api/v2/dags/{DAG_ID}", {"is_paused": False})
    assert status == 200 and body["is_paused"] is False, body
    return client


# --- the lake, compared with a clean run --------------------------------------------------------


def empty_lake(stack: StackSettings) -> None:
    client = lake_client(stack)
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=stack.bucket, Prefix="lake/")
    for page in pages:
        for item in page.get("Contents", []):
            client.delete_object(Bucket=stack.bucket, Key=item["Key"])


def lake_snapshot(stack: StackSettings) -> dict:
    """Every object of the lake: Parquet files as tables, JSON as documents, the rest as bytes."""
    client = lake_client(stack)
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=stack.bucket, Prefix="lake/")
    snapshot = {}
    for key in sorted(item["Key"] for page in pages for item in page.get("Contents", [])):
        body = client.get_object(Bucket=stack.bucket, Key=key)["Body"].read()
        if key.endswith(".parquet"):
            snapshot[key] = pq.read_table(io.BytesIO(body))
        elif key.endswith(".json"):
            snapshot[key] = json.loads(body)
        else:
            snapshot[key] = body
    return snapshot


def assert_lake_equals_clean_run(lake: dict, clean: dict) -> None:
    assert not [k for k in lake if k.startswith(("lake/staging/", "lake/_locks/")) or ".tmp" in k]
    assert sorted(lake) == sorted(clean), "the same objects as the clean run"
    for key, value in clean.items():
        if key.endswith(".parquet"):
            assert lake[key].equals(value), f"{key}: other rows than the clean run"
        else:
            assert lake[key] == value, f"{key} differs from the clean run"
    for key, table in lake.items():
        if key.startswith("lake/jobs/") and key.endswith("/jobs.parquet"):
            job_ids = table["job_id"].to_pylist()
            assert len(job_ids) == len(set(job_ids)), f"{key}: a job is in the lake twice"


def trigger(api: Api) -> str:
    run_id = f"manual__restart_{uuid.uuid4().hex[:8]}"
    status, body = api.call(
        "POST",
        f"/api/v2/dags/{DAG_ID}/dagRuns",
        {"dag_run_id": run_id, "logical_date": None, "conf": {"day": DAY}},
    )
    assert status == 200, body
    return run_id


def task_instances(api: Api, run_id: str) -> list[dict]:
    return api.get(f"/api/v2/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances")["task_instances"]


def wait_until_one_task_runs_and_one_is_queued(api: Api, stack: StackSettings, run_id: str) -> None:
    def running_and_queued():
        states = [t["state"] for t in task_instances(api, run_id)]
        return "running" in states and "queued" in states

    wait_for(running_and_queued, RUN_TIMEOUT_S, "a running and a queued task", stack, poll_s=0.2)


@pytest.fixture(scope="module")
def clean_lake(stack, api) -> dict:
    """What the day's run leaves in the lake when nothing is restarted."""
    empty_lake(stack)
    assert wait_for_run(api, stack, trigger(api), timeout_s=RUN_TIMEOUT_S) == "success"
    snapshot = lake_snapshot(stack)
    assert [k for k in snapshot if k.endswith("/jobs.parquet")], "the clean run published partitions"
    return snapshot


# --- what the stack's components did ------------------------------------------------------------

NOTEWORTHY = re.compile(
    r"OperationalError|InterfaceError|ConnectionError|Connection refused|connection to server|"
    r"server closed the connection|terminating connection|Traceback|ERROR|CRITICAL|"
    r"stuck in queued|queued.*timeout|Reschedul|revok|re-?queue|adopt|heartbeat.*(timed out|timeout)|"
    r"Marking task|marked as failed|up_for_retry|Restoring|reconnect|Cannot connect|Trying again",
    re.IGNORECASE,
)


def log_offsets(stack: StackSettings) -> dict[str, int]:
    return {path.name: path.stat().st_size for path in stack.logs.glob("*.log")}


def logged_since(stack: StackSettings, since: dict[str, int], service: str) -> list[str]:
    """The lines ``service`` logged since ``since`` (its log's size then)."""
    with (stack.logs / f"{service}.log").open("rb") as log:
        log.seek(since.get(f"{service}.log", 0))
        return log.read().decode(errors="replace").splitlines()


def component_report(stack: StackSettings, since: dict[str, int], limit: int = 25) -> dict[str, list[str]]:
    """The noteworthy lines each service logged since ``since``, one of each shape."""
    report = {}
    for path in sorted(stack.logs.glob("*.log")):
        seen, kept = set(), []
        for line in logged_since(stack, since, path.stem):
            if not NOTEWORTHY.search(line):
                continue
            shape = re.sub(r"\d+", "N", line)[:160]
            if shape not in seen:
                seen.add(shape)
                kept.append(line[:300])
        report[path.stem] = kept[:limit] + ([f"... {len(kept) - limit} more"] if len(kept) > limit else [])
    return report


def restart_outcome(stack, api, run_id, before_pids, since, record_property, label) -> dict:
    """Start again what exited (as the deployment's supervisor would), wait for the run, report."""
    started = time.monotonic()
    started_again_while_waiting = up(stack)["started_again_while_waiting"]
    exited = [name for name in SERVICES if service_pid(stack, name) != before_pids[name]]
    state = wait_for_run(api, stack, run_id, timeout_s=RUN_TIMEOUT_S)
    outcome = {
        "exited_and_started_again": exited,
        "of_which_while_up_waited": started_again_while_waiting,
        "run": state,
        "seconds_from_restart_to_end_of_run": round(time.monotonic() - started),
        "retried": sorted(
            f"{t['task_id']}[{t['map_index']}] try {t['try_number']}"
            for t in task_instances(api, run_id)
            if t["try_number"] > 1
        ),
        "requeued_or_adopted": [
            line[:300]
            for line in logged_since(stack, since, "scheduler")
            if "Task stuck in queued" in line or "Adopted the following" in line
        ],
        "components": component_report(stack, since),
    }
    print(f"\n{label}:", json.dumps(outcome, indent=1))
    record_property(label, json.dumps(outcome))
    assert state == "success", outcome
    return outcome


def test_postgres_restarted_mid_run_the_run_succeeds_and_the_lake_equals_a_clean_run(
    stack, api, postgres, clean_lake, record_property
):
    empty_lake(stack)
    since = log_offsets(stack)
    run_id = trigger(api)
    wait_until_one_task_runs_and_one_is_queued(api, stack, run_id)
    before_pids = {name: service_pid(stack, name) for name in SERVICES}
    postgres.stop("fast")  # every open connection is closed; new ones are refused
    time.sleep(OUTAGE_S)
    postgres.start()

    restart_outcome(stack, api, run_id, before_pids, since, record_property, "postgres_restart")
    assert_lake_equals_clean_run(lake_snapshot(stack), clean_lake)


def broker(redis_server):
    import redis

    host, port = redis_server.address.split(":")
    return redis.Redis(host=host, port=int(port), db=0)


def worker_gave_up(stack: StackSettings, since: dict[str, int], messages: int) -> bool:
    """Whether the worker took ``messages`` task messages since ``since`` and gave each up without a
    trace in its result backend (Postgres): Celery records a task's start there before running it;
    when that fails (logged once per process as "Exception raised outside body", a Python warning)
    it tries to record the failure, in the pool process and again in the worker's main process.
    Celery's database backend tries each of these three writes 3 times, the last logged as "Retrying
    0 more times". Only when all three failed does no result tell the restarted scheduler what
    happened, so that it re-queues the task (a failure recorded once Postgres is back would make it
    a failed try instead)."""
    lines = logged_since(stack, since, "worker")
    received = sum("] received" in line for line in lines)
    last_tries = sum("Failed operation _store_result.  Retrying 0 more times" in line for line in lines)
    return received == messages and last_tries == 3 * messages


@pytest.mark.slow  # 74 s on 2026-12-04 (the longest of the module)
def test_postgres_down_while_the_worker_takes_a_message_the_task_is_requeued(
    stack, api, postgres, redis_server, clean_lake, record_property
):
    """The worker takes a task's message while Postgres is down: Celery cannot record the task's start
    in its result backend, gives the message up and the task never runs (first seen by chance in a
    plain restart). The restarted scheduler finds the task still queued and re-queues it after
    ``task_queued_timeout``; with Airflow's defaults (600 s, checked every 120 s) the run waits more
    than ten minutes.

    The fault is made to happen every time: the worker is stopped (SIGSTOP) before the run is
    triggered, after its pending read from the broker (a 1 s BRPOP) has timed out, so the run's task
    messages (one per cluster, queued together) stay in Redis; Postgres is stopped once they are all
    there; the worker is let go, and Postgres stays down until the worker has given every one of
    them up (``worker_gave_up``)."""
    empty_lake(stack)
    since = log_offsets(stack)
    queue = broker(redis_server)
    worker_group = service_pid(stack, "worker")
    os.killpg(worker_group, signal.SIGSTOP)
    try:
        wait_for(lambda: queue.info("clients")["blocked_clients"] == 0, 30,
                 "the stopped worker's pending read from the broker to time out", stack, poll_s=0.2)  # fmt: skip
        run_id = trigger(api)

        def every_task_message_in_the_broker() -> int:
            tasks = task_instances(api, run_id)
            return len(tasks) if tasks and queue.llen("default") == len(tasks) else 0

        messages = wait_for(every_task_message_in_the_broker, RUN_TIMEOUT_S,
                            "every task message of the run in the broker", stack, poll_s=0.2)  # fmt: skip
        before_pids = {name: service_pid(stack, name) for name in SERVICES}
        postgres.stop("fast")
    finally:
        os.killpg(worker_group, signal.SIGCONT)
    try:
        wait_for(lambda: worker_gave_up(stack, since, messages), RUN_TIMEOUT_S,
                 f"the worker to take and give up the run's {messages} task messages while Postgres is down",
                 stack, poll_s=0.5)  # fmt: skip
    finally:
        postgres.start()

    outcome = restart_outcome(
        stack, api, run_id, before_pids, since, record_property, "postgres_lost_message"
    )
    assert_lake_equals_clean_run(lake_snapshot(stack), clean_lake)
    requeued = [line for line in outcome["requeued_or_adopted"] if "Task stuck in queued" in line]
    assert {re.search(r"map_index=(\d+)", line)[1] for line in requeued} == {str(i) for i in range(messages)}
    assert outcome["retried"] == [], "a lost message costs no try"


@pytest.mark.slow  # 77 s on 2026-12-04 with its teardown
def test_redis_restarted_mid_run_lost_messages_are_requeued_and_the_lake_equals_a_clean_run(
    stack, api, redis_server, clean_lake, record_property
):
    empty_lake(stack)
    since = log_offsets(stack)
    run_id = trigger(api)
    wait_until_one_task_runs_and_one_is_queued(api, stack, run_id)
    before_pids = {name: service_pid(stack, name) for name in SERVICES}
    redis_server.stop()  # it keeps nothing: the queued task's message is gone
    time.sleep(OUTAGE_S)
    redis_server.start()

    outcome = restart_outcome(stack, api, run_id, before_pids, since, record_property, "redis_restart")
    assert outcome["retried"] or outcome["requeued_or_adopted"], "the lost message's task ran again"
    assert_lake_equals_clean_run(lake_snapshot(stack), clean_lake)
