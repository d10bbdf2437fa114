"""The production topology on this machine, from the venv: ``up``, ``down``, ``status``.

Starts a loopback S3 server (moto) for the lake, then Airflow's api-server, dag-processor,
scheduler, triggerer and one Celery worker on 127.0.0.1, with the CeleryExecutor over Redis and
a Postgres database of the running server as metadata DB and Celery result backend — the
services of ``docker-compose.yaml``, minus the containers. Everything it starts is recorded in
``<stack dir>/pids/`` (PID plus the kernel's start time, so a reused PID is never signalled) and
logs to ``<stack dir>/logs/``; ``down`` stops exactly those process groups.

``up`` is idempotent: it starts only what is not running (e.g. a worker that died) and waits until
everything is healthy. ``<stack dir>/stack.env`` holds the environment for the Airflow CLI
(``source .stack/stack.env && airflow dags list``). The settings come from ``ACME_STACK_*``
variables (see ``StackSettings.from_env``); tests build their own ``StackSettings``.

    .venv/bin/python stack/stack.py up|down [--purge]|status
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
# Start order: the lake and the API first, the worker last (it needs the API to run tasks).
SERVICES = ("s3", "api-server", "dag-processor", "scheduler", "triggerer", "worker")
STACK_USER = "admin"
# Consumer DAG runs queued in DAG-id order: Airflow 3.3.2 can deadlock on Postgres without it.
ASSET_MANAGER_CLASS = "acme_airflow.asset_manager.OrderedAssetManager"


class StackError(RuntimeError):
    """The stack could not be started or a service did not become healthy."""


@dataclass(frozen=True)
class StackSettings:
    """Where the stack lives and which shared services (Postgres, Redis) it uses."""

    home: Path
    password: str
    database: str = "acme_stack"
    postgres: str = "postgres@127.0.0.1:5432"  # user@host:port; local trust authentication
    redis: str = "127.0.0.1:6379"
    redis_db: int = 5  # other Redis users on this host keep their own DB numbers
    bucket: str = "acme-lake"
    parallelism: int = 4  # task instances running at once across the stack
    worker_concurrency: int = 2  # task processes per Celery worker (each idle pool process ~190 MB RSS)
    max_active_runs: int = 4  # runs of one DAG at once (ACME_MAX_ACTIVE_RUNS)
    retry_delay_s: int | None = None  # caps every task's retry delay (cluster policy); None = the DAGs' own
    extra_env: dict[str, str] = field(default_factory=dict)  # further AIRFLOW__/ACME_ settings

    @classmethod
    def from_env(cls) -> StackSettings:
        """``ACME_STACK_DIR`` (default ``.stack``), ``ACME_STACK_PASSWORD`` (the REST API password of
        user ``admin``; default ``acme-stack``, the stack listens on loopback only),
        ``ACME_STACK_DATABASE``, ``ACME_STACK_POSTGRES``, ``ACME_STACK_REDIS``, ``ACME_STACK_REDIS_DB``,
        ``ACME_STACK_PARALLELISM``, ``ACME_STACK_WORKER_CONCURRENCY``, ``ACME_MAX_ACTIVE_RUNS``,
        ``ACME_STACK_RETRY_DELAY_S``."""

        def number(name: str, default: int | None) -> int | None:
            raw = os.environ.get(name, "").strip()
            if not raw:
                return default
            if not raw.isdigit():
                raise StackError(f"{name}={raw!r} must be a non-negative integer")
            return int(raw)

        return cls(
            home=Path(os.environ.get("ACME_STACK_DIR") or ROOT / ".stack").resolve(),
            password=os.environ.get("ACME_STACK_PASSWORD") or "acme-stack",
            database=os.environ.get("ACME_STACK_DATABASE") or "acme_stack",
            postgres=os.environ.get("ACME_STACK_POSTGRES") or "postgres@127.0.0.1:5432",
            redis=os.environ.get("ACME_STACK_REDIS") or "127.0.0.1:6379",
            redis_db=number("ACME_STACK_REDIS_DB", 5),
            parallelism=number("ACME_STACK_PARALLELISM", 4),
            worker_concurrency=number("ACME_STACK_WORKER_CONCURRENCY", 2),
            max_active_runs=number("ACME_MAX_ACTIVE_RUNS", 4),
            retry_delay_s=number("ACME_STACK_RETRY_DELAY_S", None),
        )

    @property
    def airflow_home(self) -> Path:
        return self.home / "airflow"

    @property
    def logs(self) -> Path:
        return self.home / "logs"

    @property
    def pids(self) -> Path:
        return self.home / "pids"

    @property
    def sql_alchemy_conn(self) -> str:
        return f"postgresql+psycopg2://{self.postgres}/{self.database}"


# --- ports and secrets, kept across restarts ---------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def load_state(settings: StackSettings) -> dict[str, Any]:
    """Ports and secrets of this stack, chosen at its first ``up`` and reused afterwards."""
    path = settings.home / "state.json"
    if path.exists():
        return json.loads(path.read_text())
    from cryptography.fernet import Fernet

    state = {
        "api_port": _free_port(),
        "s3_port": _free_port(),
        "jwt_secret": secrets.token_urlsafe(32),
        "fernet_key": Fernet.generate_key().decode(),
    }
    settings.home.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(state, indent=1))
    return state


def api_url(settings: StackSettings) -> str:
    return f"http://127.0.0.1:{load_state(settings)['api_port']}"


def s3_endpoint(settings: StackSettings) -> str:
    return f"http://127.0.0.1:{load_state(settings)['s3_port']}"


def lake_uri(settings: StackSettings) -> str:
    return f"s3://{settings.bucket}/lake"


def stack_env(settings: StackSettings) -> dict[str, str]:
    """Every setting the stack's processes (and the Airflow CLI pointed at it) run with."""
    state = load_state(settings)
    api, s3 = api_url(settings), s3_endpoint(settings)
    host, port = settings.redis.split(":")
    database_url = f"postgresql://{settings.postgres}/{settings.database}"
    lake_connection = {
        "conn_type": "aws",
        "login": "stack",
        "password": "stack-secret",
        "extra": {"endpoint_url": s3, "region_name": "us-east-1"},
    }
    env = {
        "AIRFLOW_HOME": str(settings.airflow_home),
        "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": settings.sql_alchemy_conn,
        "AIRFLOW__CELERY__BROKER_URL": f"redis://{host}:{port}/{settings.redis_db}",
        "AIRFLOW__CELERY__RESULT_BACKEND": f"db+{database_url}",
        "AIRFLOW__CELERY__WORKER_CONCURRENCY": str(settings.worker_concurrency),
        "AIRFLOW__CORE__PARALLELISM": str(settings.parallelism),
        "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(ROOT / "plugins"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__ASSET_MANAGER_CLASS": ASSET_MANAGER_CLASS,
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
        "AIRFLOW__CORE__FERNET_KEY": state["fernet_key"],
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{api}/execution/",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{STACK_USER}:admin",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(settings.home / "passwords.json"),
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__PORT": str(state["api_port"]),
        "AIRFLOW__API__BASE_URL": api,
        "AIRFLOW__API_AUTH__JWT_SECRET": state["jwt_secret"],
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "10",
        # One parsing process (Airflow: 2): each holds ~180 MB RSS while it parses, and the stack's
        # memory peak of a Seren-scale day came at a parse (benchmarks/README.md).
        "AIRFLOW__DAG_PROCESSOR__PARSING_PROCESSES": "1",
        "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "2",
        # No stale-bundle clean-up: it removes old copies of *versioned* (Git) DAG bundles, and the
        # stack's only bundle is the unversioned dags folder. The Celery worker ran it as a process of its
        # own (~130 MiB RSS, doing nothing here); with a versioned bundle, set it back (Airflow: 1800 s).
        "AIRFLOW__DAG_PROCESSOR__STALE_BUNDLE_CLEANUP_INTERVAL": "0",
        # Airflow's Celery settings plus the modules the tasks import, loaded by the worker before it
        # forks: each task process starts with them (seconds of CPU less per ingest task; see the module).
        "AIRFLOW__CELERY__CELERY_CONFIG_OPTIONS": "acme_airflow.celery_config.CELERY_CONFIG",
        # The scheduler's loop sleeps this long when it found nothing to do (Airflow: 1 s): a finished
        # task's successor is scheduled on the next pass, so every hand-over on a crash's way to its
        # restart waits half of it on average.
        "AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME": "0.25",
        # A task's supervisor waits in select() up to this long between looks at its task process: once
        # the task's sockets have closed, the process's exit is noticed only then, and until then the
        # Celery slot stays taken (up to 5 s, Airflow's default, after every task: seconds on a crash's
        # way to its restart). 1 s costs one more heartbeat call per second of a running task.
        "AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL": "1",
        # A task whose Celery message was lost (Redis restarted, or the worker could not record the
        # task's start while Postgres was down) stays queued until the scheduler re-queues it: after
        # 5 minutes, not Airflow's 10 + 2; a dead scheduler's queued tasks are adopted within a minute.
        # Longer than any wait for a free worker slot here (else a waiting task is re-queued too).
        "AIRFLOW__SCHEDULER__TASK_QUEUED_TIMEOUT": "300",
        "AIRFLOW__SCHEDULER__TASK_QUEUED_TIMEOUT_CHECK_INTERVAL": "30",
        "AIRFLOW__SCHEDULER__ORPHANED_TASKS_CHECK_INTERVAL": "60",
        "AIRFLOW_CONN_ACME_LAKE_S3": json.dumps(lake_connection),
        "ACME_AWS_CONN_ID": "acme_lake_s3",
        "ACME_LAKE_URI": lake_uri(settings),
        "ACME_MAX_ACTIVE_RUNS": str(settings.max_active_runs),
        # The command line (python -m acme lake-summary) reads the standard AWS environment.
        "AWS_ACCESS_KEY_ID": lake_connection["login"],
        "AWS_SECRET_ACCESS_KEY": lake_connection["password"],
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL_S3": s3,
        "GX_ANALYTICS_ENABLED": "false",
        # This tree's plugins first: an editable install elsewhere (a .pth file of the venv) would
        # otherwise give the workers another tree's acme and acme_airflow.
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "plugins"), os.environ.get("PYTHONPATH")])),
    }
    env.update(settings.extra_env)
    return env


def write_config_files(settings: StackSettings) -> None:
    """The REST API password, the optional retry cluster policy and ``stack.env`` for the CLI."""
    for folder in (settings.airflow_home / "config", settings.logs, settings.pids):
        folder.mkdir(parents=True, exist_ok=True)
    (settings.home / "passwords.json").write_text(json.dumps({STACK_USER: settings.password}))
    policy = settings.airflow_home / "config" / "airflow_local_settings.py"
    if settings.retry_delay_s is None:
        policy.unlink(missing_ok=True)
    else:
        # A cluster policy (Airflow imports airflow_local_settings from $AIRFLOW_HOME/config):
        # tests and benchmarks that kill workers should not wait the DAGs' minutes-long backoff.
        policy.write_text(
            '"""Generated by stack/stack.py: caps every task\'s retry delay."""\n'
            "from datetime import timedelta\n\n\n"
            "def task_policy(task):\n"
            f"    task.retry_delay = min(task.retry_delay, timedelta(seconds={settings.retry_delay_s}))\n"
            "    task.retry_exponential_backoff = False\n"
        )
    lines = [f"export {name}={_shell_quote(value)}" for name, value in stack_env(settings).items()]
    (settings.home / "stack.env").write_text("\n".join(lines) + "\n")


def _shell_quote(value: str) -> str:
    return "'" + value.replace("'", "'\"'\"'") + "'"


# --- processes ----------------------------------------------------------------------------------


def _start_ticks(pid: int) -> int | None:
    """The kernel's start time of ``pid`` (clock ticks since boot), or None when it is gone or a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] == "Z":
        return None
    return int(fields[19])


def _reap(pid: int) -> None:
    """Collect a child of this process that ended (so it is not left a zombie)."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def service_pid(settings: StackSettings, name: str) -> int | None:
    """PID of service ``name`` if the process this stack started is still that process and alive."""
    record = settings.pids / f"{name}.json"
    if not record.exists():
        return None
    started = json.loads(record.read_text())
    _reap(started["pid"])
    if _start_ticks(started["pid"]) != started["start_ticks"]:
        return None
    return started["pid"]


def _command(settings: StackSettings, name: str) -> list[str]:
    airflow = str(BIN / "airflow")
    if name == "s3":
        return [str(BIN / "moto_server"), "-H", "127.0.0.1", "-p", str(load_state(settings)["s3_port"])]
    if name == "api-server":
        return [airflow, "api-server", "--host", "127.0.0.1", "--port", str(load_state(settings)["api_port"])]
    if name in ("scheduler", "triggerer"):
        # The log servers bind every interface on fixed ports; every process here shares AIRFLOW_HOME/logs.
        return [airflow, name, "--skip-serve-logs"]
    if name == "dag-processor":
        return [airflow, "dag-processor"]
    if name == "worker":
        return [
            airflow, "celery", "worker", "--skip-serve-logs", "--without-gossip", "--without-mingle",
            "--celery-hostname", f"acme-worker@{settings.database}",
            "--concurrency", stack_env(settings)["AIRFLOW__CELERY__WORKER_CONCURRENCY"],
        ]  # fmt: skip
    raise StackError(f"unknown service {name!r}; services: {', '.join(SERVICES)}")


def start_service(settings: StackSettings, name: str) -> int:
    """Start ``name`` in its own process group (unless it runs already) and record its PID."""
    running = service_pid(settings, name)
    if running:
        return running
    log_path = settings.logs / f"{name}.log"
    log_offset = log_path.stat().st_size if log_path.exists() else 0
    log = log_path.open("a")
    process = subprocess.Popen(
        _command(settings, name),
        env={**os.environ, **stack_env(settings)},
        cwd=settings.home,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    log.close()
    ticks = _start_ticks(process.pid)
    record = {"pid": process.pid, "start_ticks": ticks, "argv": process.args, "log_offset": log_offset}
    (settings.pids / f"{name}.json").write_text(json.dumps(record))
    return process.pid


def stop_service(settings: StackSettings, name: str, sig: int = signal.SIGTERM, grace_s: float = 30) -> bool:
    """Signal the process group of ``name``; after SIGTERM, SIGKILL what is left after ``grace_s``.

    Also stops what is left of a group whose leader died (Linux does not reuse a PID while it is a
    live group's id). Returns whether anything was running. ``sig=SIGKILL`` simulates a crash.
    """
    record = settings.pids / f"{name}.json"
    if not record.exists():
        return False
    pgid = json.loads(record.read_text())["pid"]
    leader_is_ours = service_pid(settings, name) is not None
    members = group_pids(pgid)
    if not leader_is_ours and (not members or pgid in members):
        record.unlink()  # nothing left, or the PID now belongs to an unrelated process group
        return False
    os.killpg(pgid, sig)
    deadline = time.monotonic() + (grace_s if sig != signal.SIGKILL else 5)
    while group_pids(pgid) and time.monotonic() < deadline:
        _reap(pgid)
        time.sleep(0.2)
    if group_pids(pgid):
        os.killpg(pgid, signal.SIGKILL)
        while group_pids(pgid) and time.monotonic() < deadline + 10:
            _reap(pgid)
            time.sleep(0.2)
    _reap(pgid)
    record.unlink()
    return True


def _live_processes() -> list[list[str]]:
    """For every live (non-zombie) process: its PID, then the ``/proc/<pid>/stat`` fields after the
    command name (index 1 the state, 3 the process group, 12–15 the CPU times utime, stime, cutime,
    cstime in clock ticks)."""
    processes = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] != "Z":
            processes.append([entry.name, *fields])
    return processes


def group_pids(pgid: int) -> list[int]:
    """Live (non-zombie) processes of a process group."""
    return [int(fields[0]) for fields in _live_processes() if int(fields[3]) == pgid]


def stack_cpu_seconds(settings: StackSettings) -> dict[str, float]:
    """Per service: the CPU time (user + system) its live processes used, with that of the children they
    have reaped (a Celery pool process reaps its task processes), in seconds. The difference of two
    readings is what the service used in between, as long as no process of it exited meanwhile
    without a parent in the group to reap it."""
    ticks = os.sysconf("SC_CLK_TCK")
    groups = {name: service_pid(settings, name) for name in SERVICES}
    used = dict.fromkeys(SERVICES, 0.0)
    for fields in _live_processes():
        for name, pgid in groups.items():
            if pgid is not None and int(fields[3]) == pgid:
                used[name] += sum(int(value) for value in fields[12:16]) / ticks
    return used


def _memory_kib(pid: int) -> tuple[int, int]:
    """(RSS, PSS) of one process in KiB; (0, 0) when it is gone. PSS shares each page among the processes
    mapping it (forked workers share most of their parent's pages), so PSS sums to what the stack holds."""
    rss = pss = 0
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Rss:"):
                rss = int(line.split()[1])
            elif line.startswith("Pss:"):
                pss = int(line.split()[1])
    except (OSError, ValueError):
        return 0, 0
    return rss, pss


def stack_memory(settings: StackSettings) -> dict[str, dict[str, int]]:
    """Per service: its processes (every member of its process group), their summed RSS and PSS in bytes."""
    memory = {}
    processes = _live_processes()  # one pass over /proc for every service
    for name in SERVICES:
        pid = service_pid(settings, name)
        members = [int(fields[0]) for fields in processes if pid and int(fields[3]) == pid]
        sizes = [_memory_kib(member) for member in members]
        memory[name] = {
            "processes": len(members),
            "rss": sum(rss for rss, _ in sizes) * 1024,
            "pss": sum(pss for _, pss in sizes) * 1024,
        }
    return memory


def stack_rss_bytes(settings: StackSettings) -> int:
    """Resident memory of every process of the stack (all its process groups), summed (pages shared by
    forked processes count once per process: ``stack_memory`` has PSS too)."""
    return sum(service["rss"] for service in stack_memory(settings).values())


# --- shared services and health -----------------------------------------------------------------


def ensure_database(settings: StackSettings) -> None:
    """Create the stack's metadata database on the Postgres server unless it exists."""
    import psycopg2

    user, _, hostport = settings.postgres.partition("@")
    host, _, port = hostport.partition(":")
    try:
        connection = psycopg2.connect(host=host, port=int(port or 5432), user=user, dbname="postgres")
    except psycopg2.OperationalError as exc:
        raise StackError(f"PostgreSQL at {hostport} is not reachable as {user}: {exc}") from exc
    connection.autocommit = True
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", (settings.database,))
            if cursor.fetchone() is None:
                cursor.execute(f'CREATE DATABASE "{settings.database}"')
    finally:
        connection.close()


def drop_database(settings: StackSettings) -> None:
    import psycopg2

    user, _, hostport = settings.postgres.partition("@")
    host, _, port = hostport.partition(":")
    connection = psycopg2.connect(host=host, port=int(port or 5432), user=user, dbname="postgres")
    connection.autocommit = True
    try:
        with connection.cursor() as cursor:
            cursor.execute(f'DROP DATABASE IF EXISTS "{settings.database}" WITH (FORCE)')
    finally:
        connection.close()


# A throw-away stack's broker DB is claimed with this key (SET NX), so two stacks started at the
# same moment never share one; ``down(purge=True)`` flushes it with the DB. Expires after a day
# in case a stack is never purged (its Celery keys keep the DB non-empty anyway).
REDIS_CLAIM_KEY = "acme:stack:claimed-by"


def claim_free_redis_db(owner: str, host: str = "127.0.0.1", port: int = 6379) -> int:
    """Claim an empty Redis DB from 15 down to 8 (DBs below 8 belong to other users here) for a
    throw-away stack: the first whose claim key this process sets. Raises StackError when none is free."""
    import redis

    for number in range(15, 7, -1):
        client = redis.Redis(host=host, port=port, db=number)
        if client.dbsize() == 0 and client.set(REDIS_CLAIM_KEY, owner, nx=True, ex=86_400):
            return number
    raise StackError(f"no empty Redis DB between 8 and 15 on {host}:{port}")


def flush_broker(settings: StackSettings) -> None:
    import redis

    host, port = settings.redis.split(":")
    redis.Redis(host=host, port=int(port), db=settings.redis_db).flushdb()


def _wait(what: str, check, timeout_s: float, settings: StackSettings, service: str) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        if service_pid(settings, service) is None:
            raise StackError(f"{service} exited while waiting for {what}; log: {settings.logs}/{service}.log")
        time.sleep(1)
    raise StackError(f"timed out after {timeout_s:.0f} s waiting for {what}; logs in {settings.logs}")


def _s3_ready(settings: StackSettings) -> bool:
    try:
        with urllib.request.urlopen(s3_endpoint(settings), timeout=2):
            return True
    except (OSError, urllib.error.URLError):
        return False


def lake_client(settings: StackSettings):
    """A boto3 S3 client for the stack's loopback object store (its credentials and endpoint)."""
    import boto3

    env = stack_env(settings)
    return boto3.client(
        "s3",
        endpoint_url=env["AWS_ENDPOINT_URL_S3"],
        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
        region_name="us-east-1",
    )


def ensure_bucket(settings: StackSettings) -> None:
    client = lake_client(settings)
    if settings.bucket not in [b["Name"] for b in client.list_buckets()["Buckets"]]:
        client.create_bucket(Bucket=settings.bucket)


def health(settings: StackSettings) -> dict[str, Any] | None:
    """The api-server's health document (metadatabase, scheduler, triggerer, dag_processor)."""
    try:
        with urllib.request.urlopen(f"{api_url(settings)}/api/v2/monitor/health", timeout=5) as response:
            return json.loads(response.read())
    except (OSError, urllib.error.URLError, ValueError):
        return None


HEALTH_PARTS = ("metadatabase", "scheduler", "triggerer", "dag_processor")


def unhealthy_parts(settings: StackSettings) -> dict[str, Any]:
    """What the api-server's health document says is not healthy (empty when all is), or why there is
    no document."""
    document = health(settings)
    if document is None:
        return {"api-server": f"no answer from {api_url(settings)}/api/v2/monitor/health"}
    return {
        part: document.get(part)
        for part in HEALTH_PARTS
        if (document.get(part) or {}).get("status") != "healthy"
    }


def _wait_healthy(settings: StackSettings, timeout_s: float) -> list[str]:
    """Wait until the api-server reports every component healthy. A service that exits meanwhile is
    started again, as the deployment's supervisor does (``restart: unless-stopped``): after a restart of
    Postgres the scheduler, dag-processor and triggerer exit, and on a loaded machine one of them may
    still be on its way out when ``up`` looks, then exit and never report again. Returns the services
    started again; on timeout the error names what is unhealthy and which services run."""
    restarted = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not unhealthy_parts(settings):
            return restarted
        for name in SERVICES[1:]:
            if service_pid(settings, name) is None:
                if restarted.count(name) == 3:
                    raise StackError(
                        f"{name} exited 4 times while the stack started; log: {settings.logs}/{name}.log"
                    )
                start_service(settings, name)
                restarted.append(name)
        time.sleep(1)
    running = {name: service_pid(settings, name) for name in SERVICES}
    raise StackError(
        f"timed out after {timeout_s:.0f} s waiting for the api-server and its components to be healthy: "
        f"unhealthy {json.dumps(unhealthy_parts(settings))}; services (PID, None = not running) "
        f"{json.dumps(running)}; started again while waiting: {restarted or 'none'}; logs in {settings.logs}"
    )


def _worker_ready(settings: StackSettings) -> bool:
    """The running worker has logged Celery's ``<hostname> ready.`` (it consumes from the broker)."""
    record = settings.pids / "worker.json"
    if not record.exists():
        return False
    with (settings.logs / "worker.log").open("rb") as log:
        log.seek(json.loads(record.read_text()).get("log_offset", 0))
        return f"acme-worker@{settings.database} ready.".encode() in log.read()


# --- commands -----------------------------------------------------------------------------------


def up(settings: StackSettings, timeout_s: float = 240) -> dict[str, Any]:
    """Start whatever of the stack is not running and wait until all of it is healthy."""
    settings.home.mkdir(parents=True, exist_ok=True)
    write_config_files(settings)
    ensure_database(settings)
    start_service(settings, "s3")
    _wait("the S3 server", lambda: _s3_ready(settings), 60, settings, "s3")
    ensure_bucket(settings)
    migrate = subprocess.run(
        [str(BIN / "airflow"), "db", "migrate"],
        env={**os.environ, **stack_env(settings)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    (settings.logs / "db-migrate.log").write_text(migrate.stdout + migrate.stderr)
    if migrate.returncode != 0:
        raise StackError(f"airflow db migrate failed: {migrate.stderr[-2000:]}")
    for name in SERVICES[1:]:
        start_service(settings, name)
    restarted = _wait_healthy(settings, timeout_s)
    _wait("the Celery worker", lambda: _worker_ready(settings), timeout_s, settings, "worker")
    return status(settings) | {"started_again_while_waiting": restarted}


def down(settings: StackSettings, purge: bool = False) -> list[str]:
    """Stop every service this stack started (reverse order); ``purge`` also drops its database,
    Redis DB and folder."""
    stopped = [name for name in reversed(SERVICES) if stop_service(settings, name)]
    if purge:
        drop_database(settings)
        flush_broker(settings)
        import shutil

        shutil.rmtree(settings.home, ignore_errors=True)
    return stopped


def status(settings: StackSettings) -> dict[str, Any]:
    """Which services run (PID), where the API and the lake are, and the API's health."""
    return {
        "services": {name: service_pid(settings, name) for name in SERVICES},
        "api": api_url(settings),
        "s3": s3_endpoint(settings),
        "lake": lake_uri(settings),
        "user": STACK_USER,
        "env_file": str(settings.home / "stack.env"),
        "logs": str(settings.logs),
        "health": health(settings),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("up", help="start what is not running, wait until healthy")
    stop = commands.add_parser("down", help="stop everything this stack started, by PID")
    stop.add_argument("--purge", action="store_true", help="also drop its database, Redis DB and folder")
    commands.add_parser("status", help="PIDs, endpoints and health")
    args = parser.parse_args(argv)
    try:
        settings = StackSettings.from_env()
        if args.command == "up":
            print(json.dumps(up(settings), indent=1))
        elif args.command == "down":
            print(json.dumps({"stopped": down(settings, purge=args.purge)}))
        else:
            if not (settings.home / "state.json").exists():
                print(json.dumps({"services": dict.fromkeys(SERVICES)}))
                return 1
            document = status(settings)
            print(json.dumps(document, indent=1))
            return 0 if all(document["services"].values()) else 1
    except StackError as exc:
        print(f"stack: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
