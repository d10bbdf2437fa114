"""The docker-compose deployment is coherent: services, healthchecks, start order, mounts, settings.

No image can be pulled here, so the deployment is checked rather than started: its structure is
read from ``docker-compose.yaml``, its settings are compared with ``.env.example`` and with the
settings the code reads, and ``docker compose config`` (or Debian's ``docker-compose``) validates
it with the interpolation of a filled-in ``.env``. CI installs docker-compose (``.ci/run``): there
a missing binary fails the test; elsewhere (env ``CI`` unset) that one test is skipped.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
AIRFLOW_SERVICES = ("api-server", "scheduler", "dag-processor", "triggerer", "worker")
ONE_SHOT_SERVICES = ("airflow-init", "minio-init")
# Variables the pipeline itself sets for the jobs and pods it launches: not deployment settings.
LAUNCHED_JOB_VARIABLES = {
    "ACME_NODE_NAME", "ACME_CHECK_WORLD", "ACME_RESUME_FROM", "ACME_RESUME_STEP", "ACME_SKIP_BATCHES",
    "ACME_RECOVERY_ID",
}  # fmt: skip
SETTING_LINE = re.compile(r"^(#\s*)?([A-Z][A-Z0-9_]*[A-Z0-9])=(.*)$")


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yaml").read_text())


@pytest.fixture(scope="module")
def env_example() -> dict[str, tuple[bool, str]]:
    """``.env.example`` as {name: (set, value)}; ``set`` is False for a commented-out default."""
    settings = {}
    for line in (ROOT / ".env.example").read_text().splitlines():
        match = SETTING_LINE.match(line)
        if match:
            settings[match.group(2)] = (match.group(1) is None, match.group(3))
    return settings


def compose_text_without_comments() -> str:
    lines = (ROOT / "docker-compose.yaml").read_text().splitlines()
    return "\n".join(line for line in lines if not line.lstrip().startswith("#"))


def compose_variables() -> dict[str, str]:
    """Every ``${VAR…}`` the compose file interpolates, with its operator (``:-``, ``-``, ``:?`` or '')."""
    text = compose_text_without_comments()
    found = {}
    for name, operator in re.findall(r"(?<!\$)\$\{([A-Z][A-Z0-9_]*)(:-|-|:\?|\?)?", text):
        found[name] = found.get(name) or operator
    return found


def test_every_service_of_the_deployment_is_there(compose):
    assert set(compose["services"]) == {
        "postgres", "redis", "minio", "minio-init", "statsd-exporter", "prometheus", *AIRFLOW_SERVICES,
        *ONE_SHOT_SERVICES,
    }  # fmt: skip
    commands = {name: compose["services"][name]["command"] for name in AIRFLOW_SERVICES}
    assert commands == {
        "api-server": ["api-server"],
        "scheduler": ["scheduler"],
        "dag-processor": ["dag-processor"],
        # No log server (Airflow's serve_logs binds every address): the api-server reads the task
        # logs from the airflow-logs volume that every Airflow service mounts.
        "triggerer": ["triggerer", "--skip-serve-logs"],
        "worker": ["celery", "worker", "--skip-serve-logs"],
    }


def test_every_published_port_is_bound_to_loopback(compose):
    published = {
        name: service["ports"] for name, service in compose["services"].items() if service.get("ports")
    }
    assert set(published) == {"minio", "prometheus", "api-server"}, published
    for name, ports in published.items():
        for port in ports:
            assert isinstance(port, str) and port.startswith("127.0.0.1:"), (name, port)
    for name, service in compose["services"].items():
        assert service.get("network_mode") is None, f"{name}: network_mode (the offline override's)"


def test_the_task_logs_the_api_server_reads_are_on_the_volume_every_airflow_service_mounts(compose):
    for name in (*AIRFLOW_SERVICES, "airflow-init"):
        assert "airflow-logs:/opt/airflow/logs" in compose["services"][name]["volumes"], name
    assert "airflow-logs" in compose["volumes"]


def test_long_running_services_have_healthchecks_and_one_shot_jobs_do_not_restart(compose):
    for name, service in compose["services"].items():
        if name in ONE_SHOT_SERVICES:
            assert service.get("restart", "no") == "no", name
            continue
        test = service.get("healthcheck", {}).get("test")
        assert test and test[0] in ("CMD", "CMD-SHELL"), f"{name} has no healthcheck"
        assert service.get("restart") == "unless-stopped", name


# Images whose entrypoint runs the service itself as the container's PID 1, with no init of its own:
# no signal sent from inside the container reaches a PID 1 (the compose tier's `kill -STOP -1` found
# no process to stop), and nothing reaps its children.
IMAGES_WITHOUT_AN_INIT = ("prom/prometheus",)


def test_services_on_images_without_an_init_run_under_dockers_init(compose):
    for name, service in compose["services"].items():
        if service.get("image", "").split(":")[0] in IMAGES_WITHOUT_AN_INIT:
            assert service.get("init") is True, f"{name}: init: true (Docker's tini as PID 1)"


def test_services_start_after_what_they_need_is_healthy_or_done(compose):
    services = compose["services"]
    for name, service in services.items():
        for needed, condition in (service.get("depends_on") or {}).items():
            assert needed in services, f"{name} depends on unknown service {needed}"
            expected = "service_completed_successfully" if needed in ONE_SHOT_SERVICES else "service_healthy"
            assert condition == {"condition": expected}, (name, needed)
            if expected == "service_healthy":
                assert "healthcheck" in services[needed], (
                    f"{name} waits for {needed}, which has no healthcheck"
                )
    for name in AIRFLOW_SERVICES:
        assert {"postgres", "redis", "minio-init", "airflow-init"} <= set(services[name]["depends_on"]), name
    assert "api-server" in services["worker"]["depends_on"]  # tasks talk to the execution API
    assert set(services["airflow-init"]["depends_on"]) == {"postgres", "redis"}


def test_project_folders_are_mounted_into_every_airflow_service(compose):
    for name in (*AIRFLOW_SERVICES, "airflow-init"):
        mounts = {m.split(":")[1]: m.split(":")[0] for m in compose["services"][name]["volumes"]}
        for folder in ("dags", "plugins", "include"):
            assert mounts.get(f"/opt/airflow/{folder}") == f"./{folder}", (name, folder)
            assert (ROOT / folder).is_dir()
        assert "/opt/airflow/logs" in mounts and "/opt/airflow/auth" in mounts, name
    prometheus = compose["services"]["prometheus"]["volumes"][0].split(":")[0]
    assert (ROOT / prometheus).is_file()
    scraped = yaml.safe_load((ROOT / prometheus).read_text())["scrape_configs"][0]["static_configs"][0]
    assert scraped["targets"] == ["statsd-exporter:9102"]


def test_airflow_settings_point_at_the_services_of_the_file(compose):
    env = compose["services"]["scheduler"]["environment"]
    assert env["AIRFLOW__CORE__EXECUTOR"] == "CeleryExecutor"
    # Ports are variables with the services' defaults (host networking needs others: .env.example).
    assert "@postgres:${POSTGRES_PORT:-5432}/" in env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]
    assert env["AIRFLOW__CELERY__RESULT_BACKEND"].startswith("db+postgresql://")
    assert "@redis:${REDIS_PORT:-6379}/" in env["AIRFLOW__CELERY__BROKER_URL"]
    assert (
        env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"]
        == "http://api-server:${AIRFLOW_API_PORT:-8080}/execution/"
    )
    assert env["AIRFLOW__API__PORT"] == "${AIRFLOW_API_PORT:-8080}"
    assert env["AIRFLOW__METRICS__STATSD_HOST"] == "statsd-exporter"
    assert env["ACME_AWS_CONN_ID"] == "acme_lake_s3" and "AIRFLOW_CONN_ACME_LAKE_S3" in env
    assert compose["services"]["api-server"]["ports"] == [
        "127.0.0.1:${AIRFLOW_API_PORT:-8080}:${AIRFLOW_API_PORT:-8080}"
    ]


def test_env_example_documents_every_variable_of_the_compose_file(env_example):
    undocumented = sorted(set(compose_variables()) - set(env_example))
    assert undocumented == []


def test_secrets_have_no_default_anywhere(env_example):
    required = {name for name, operator in compose_variables().items() if operator in (":?", "?")}
    assert {"POSTGRES_PASSWORD", "REDIS_PASSWORD", "AIRFLOW_ADMIN_PASSWORD", "AIRFLOW_JWT_SECRET",
            "AIRFLOW_FERNET_KEY", "MINIO_ROOT_PASSWORD"} <= required  # fmt: skip
    for name in required:
        assert env_example[name] == (True, ""), f".env.example gives {name} a value"
    text = compose_text_without_comments()
    for name in required:
        assert not re.search(rf"\$\{{{name}(:-|-)", text), f"{name} has a default in docker-compose.yaml"


def test_env_example_documents_every_setting_the_code_reads(env_example):
    read = set()
    for path in [*(ROOT / "plugins").rglob("*.py"), *(ROOT / "dags").glob("*.py")]:
        read |= set(re.findall(r"[\"'](ACME_[A-Z0-9_]*[A-Z0-9])[\"']", path.read_text()))
    undocumented = sorted(read - LAUNCHED_JOB_VARIABLES - set(env_example))
    assert undocumented == [], f"add these settings to .env.example: {undocumented}"
    for name in ("AIRFLOW_CONN_ACME_LLM", "AIRFLOW_CONN_KUBERNETES_DEFAULT", "ACME_SSH_DIR"):
        assert name in env_example


def test_dockerfile_builds_on_the_pinned_airflow_with_the_pinned_requirements():
    dockerfile = (ROOT / "Dockerfile").read_text()
    pinned = re.search(r"apache-airflow\[[^\]]*\]==([\d.]+)", (ROOT / "requirements.txt").read_text())
    assert re.search(rf"^FROM apache/airflow:{re.escape(pinned.group(1))}-python3\.11$", dockerfile, re.M)
    assert "-r /opt/acme/requirements.txt -c /opt/acme/constraints.txt" in dockerfile


def compose_command() -> list[str] | None:
    if shutil.which("docker"):
        done = subprocess.run(["docker", "compose", "version"], capture_output=True)
        if done.returncode == 0:
            return ["docker", "compose"]
    return ["docker-compose"] if shutil.which("docker-compose") else None


def run_config(tmp_path: Path, env_text: str) -> subprocess.CompletedProcess:
    """``config`` on a copy of the compose file next to an ``.env`` (it is read for interpolation and
    as the services' env_file)."""
    command = compose_command()
    if command is None:
        if os.environ.get("CI"):
            pytest.fail(
                "docker compose / docker-compose is missing: .ci/run installs Debian's docker-compose"
            )
        pytest.skip("no docker compose or docker-compose binary (CI installs one)")
    shutil.copy(ROOT / "docker-compose.yaml", tmp_path / "docker-compose.yaml")
    (tmp_path / ".env").write_text(env_text)
    return subprocess.run(
        [*command, "-f", str(tmp_path / "docker-compose.yaml"), "config"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_compose_config_validates_with_filled_secrets_and_refuses_without(tmp_path, env_example):
    example = (ROOT / ".env.example").read_text()
    refused = run_config(tmp_path, example)
    assert refused.returncode != 0
    assert "in .env" in refused.stderr + refused.stdout  # names the missing secret
    secrets = [name for name, (is_set, value) in env_example.items() if is_set and value == ""]
    filled = re.sub(
        rf"^({'|'.join(secrets)})=$", lambda m: f"{m.group(1)}=test-{m.group(1).lower()}", example, flags=re.M
    )
    done = run_config(tmp_path, filled)
    assert done.returncode == 0, done.stderr
    resolved = yaml.safe_load(done.stdout)["services"]
    env = resolved["worker"]["environment"]
    assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] == (
        "postgresql+psycopg2://airflow:test-postgres_password@postgres:5432/airflow"
    )
    lake = json.loads(env["AIRFLOW_CONN_ACME_LAKE_S3"])
    assert lake["login"] == "test-acme_lake_s3_access_key_id"
    assert lake["extra"]["endpoint_url"] == "http://minio:9000"
    assert env["POSTGRES_USER"] == "airflow"  # .env reaches the containers (env_file)
    assert env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"] == "http://api-server:8080/execution/"
    assert resolved["postgres"]["environment"]["PGPORT"] == "5432"
