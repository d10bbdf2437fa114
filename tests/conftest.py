"""Test settings: a project-local Airflow home for tests, set before anything imports airflow."""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_REFERENCE = ROOT.parent / "shared" / "reference"

# ACME_TEST_AIRFLOW_HOME lets parallel test sessions keep separate metadata DBs; each pytest-xdist worker
# of one session (gw0, gw1, ...) has its own home under it, with a copy of a DB migrated once for them all
# (airflow_db), kept unused in MIGRATED_TEMPLATE.
BASE_AIRFLOW_HOME = Path(os.environ.get("ACME_TEST_AIRFLOW_HOME") or ROOT / ".airflow-test")
MIGRATED_TEMPLATE = BASE_AIRFLOW_HOME / "migrated-template"
XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
os.environ["AIRFLOW_HOME"] = str(BASE_AIRFLOW_HOME / XDIST_WORKER if XDIST_WORKER else BASE_AIRFLOW_HOME)
os.environ["AIRFLOW__CORE__DAGS_FOLDER"] = str(ROOT / "dags")
os.environ["AIRFLOW__CORE__PLUGINS_FOLDER"] = str(ROOT / "plugins")
os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
os.environ["AIRFLOW__CORE__ASSET_MANAGER_CLASS"] = "acme_airflow.asset_manager.OrderedAssetManager"
os.environ["AIRFLOW__CORE__PARALLELISM"] = "2"
os.environ["GX_ANALYTICS_ENABLED"] = "false"
# dag.test() of a DAG with a DeadlineAlert fails once its run succeeded in Airflow 3.3.2 (apache/airflow#73428:
# it hands the encoded alerts to the deadline clean-up), so the nightly chain's alerts are off in tests;
# tests/integration/test_deadline_alert.py turns them on and has a real scheduler and triggerer fire one.
os.environ.setdefault("ACME_NOTIFY_DEADLINE_HOUR", "off")
# Tests must never write into the demo lake.
os.environ["ACME_LAKE_URI"] = str(Path(os.environ["AIRFLOW_HOME"]) / "lake-must-be-overridden")


@pytest.fixture(autouse=True)
def _no_root_log_handler_on_a_closed_stream() -> None:
    """Airflow's logging set-up, run the first time a test touches Airflow, adds a root StreamHandler
    bound to the stream pytest was capturing then. Once that stream is closed, every later record at
    INFO (great-expectations logs its set-up at INFO) prints "--- Logging error ---" into whatever
    test runs next, and tests that read a command's stderr see it. Drop such handlers first."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        if type(handler) is logging.StreamHandler and getattr(handler.stream, "closed", False):
            root.removeHandler(handler)


@pytest.fixture(scope="session")
def airflow_db() -> Path:
    """A migrated SQLite metadata DB for dag.test() (migrated once, then reused; a worker of a parallel
    session starts from a copy of :data:`MIGRATED_TEMPLATE`)."""
    home = Path(os.environ["AIRFLOW_HOME"])
    if XDIST_WORKER and not (home / ".migrated").exists():
        migrated_db(MIGRATED_TEMPLATE)
        home.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(MIGRATED_TEMPLATE / "airflow.db", home / "airflow.db")
        (home / ".migrated").touch()
    return migrated_db(home)


def migrated_db(home: Path) -> Path:
    """``home`` with a migrated ``airflow.db``; workers that ask at once wait for the first one's migration."""
    home.mkdir(parents=True, exist_ok=True)
    with (home / ".migrate.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not (home / ".migrated").exists():
            airflow = Path(sys.executable).with_name("airflow")
            env = dict(os.environ, AIRFLOW_HOME=str(home))
            subprocess.run([str(airflow), "db", "migrate"], check=True, capture_output=True, env=env)
            (home / ".migrated").touch()
    return home


@pytest.fixture
def lake_dir(tmp_path, monkeypatch) -> Path:
    """A fresh local lake for one test, also set as ACME_LAKE_URI."""
    lake = tmp_path / "lake"
    monkeypatch.setenv("ACME_LAKE_URI", str(lake))
    return lake


@pytest.fixture(scope="session")
def shared_reference() -> Path:
    if not SHARED_REFERENCE.exists():
        pytest.skip("../shared/reference is not next to the repository")
    return SHARED_REFERENCE
