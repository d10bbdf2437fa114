"""The Airflow UI as a newcomer meets it: a real api-server (127.0.0.1, SQLite, the simple auth
manager) and a real headless Chromium open each DAG's trigger form.

Every Param's description is shown under its field, ``cluster`` is a dropdown of the configured
clusters, and each DAG's details show its summary line. The DAGs are serialized with ``airflow dags
reserialize`` (no dag-processor or scheduler is needed to show a form). The api-server and Chromium
are stopped in a finally; a screenshot of each form is kept in test-artifacts/.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from tests.api_server_support import AIRFLOW, api_server_env, running_api_server
from tests.api_server_support import token as api_token
from tests.integration.conftest import free_port
from tests.integration.test_report_browser import ARTIFACTS, DevTools, ensure_chromium, headless_chromium

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "acme-ui-test-password"


@pytest.fixture(scope="module")
def api_server(tmp_path_factory):
    """A migrated SQLite DB with the project's DAGs serialized, and an api-server on loopback."""
    home = tmp_path_factory.mktemp("airflow-ui")
    env = api_server_env(home, free_port(), PASSWORD)
    for command in (["db", "migrate"], ["dags", "reserialize"]):
        done = subprocess.run([AIRFLOW, *command], env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
    with running_api_server(env, home) as base:
        yield base


def token(base: str) -> str:
    return api_token(base, PASSWORD)


def wait_until(page: DevTools, expression: str, what: str, timeout_s: float = 60):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = page.evaluate(expression)
        if value:
            return value
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


DIALOG_TEXT = """(() => {
  const dialogs = Array.from(document.querySelectorAll('[role=dialog]'))
    .filter(d => d.innerText.includes('Trigger Dag'));
  return dialogs.length ? dialogs[0].innerText : '';
})()"""
CLICK_TRIGGER = """Array.from(document.querySelectorAll('button'))
  .find(b => b.textContent.trim() === 'Trigger').click()"""


def dag_params(dag_id: str) -> dict[str, dict]:
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(ROOT / "dags" / f"{dag_id}.py"))
    dag = bag.dags[dag_id]
    return {name: dag.params.get_param(name) for name in dag.params}


DAG_IDS = [path.stem for path in sorted((ROOT / "dags").glob("*.py"))]


def test_each_trigger_form_shows_every_param_description_and_the_dag_summary(api_server, tmp_path):
    with headless_chromium(ensure_chromium(), tmp_path / "profile") as port:
        page = DevTools(port)
        try:
            for domain in ("Page", "Runtime", "Network"):
                page.call(f"{domain}.enable")
            page.call("Network.setCookie", name="_token", value=token(api_server), url=f"{api_server}/")
            for dag_id in DAG_IDS:
                params = dag_params(dag_id)
                page.open(f"{api_server}/dags/{dag_id}/details")
                row = wait_until(
                    page, "(document.querySelector('[data-testid=description-row]') || {}).innerText",
                    f"{dag_id}'s details",
                )  # fmt: skip
                assert row.startswith("Description") and len(row) > 40, row
                wait_until(page, f"(() => {{ try {{ {CLICK_TRIGGER}; return true; }} catch (e) {{ return false; }} }})()",
                           f"{dag_id}'s Trigger button")  # fmt: skip
                text = wait_until(page, DIALOG_TEXT, f"{dag_id}'s trigger form")
                text = wait_until(
                    page, f"(() => {{ const t = {DIALOG_TEXT}; return t.includes('Run Parameters') && t; }})()",
                    f"{dag_id}'s Run Parameters",
                )  # fmt: skip
                for name, param in params.items():
                    assert param.description and param.description in text, f"{dag_id}.{name}: {text}"
                page.screenshot(ARTIFACTS / f"ui_trigger_{dag_id}.png")
        finally:
            page.close()
    assert (ARTIFACTS / "ui_trigger_ingest_job_traces.png").read_bytes()[:4] == b"\x89PNG"


def test_the_cluster_field_offers_the_configured_clusters(api_server):
    """The form's cluster field is a dropdown of all, kalos and seren: the schema the api-server serves."""
    request = urllib.request.Request(
        f"{api_server}/api/v2/dags/ingest_job_traces/details",
        headers={"Authorization": f"Bearer {token(api_server)}"},
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        details = json.load(answer)
    assert details["description"].startswith("Nightly: ")
    cluster = details["params"]["cluster"]
    assert cluster["value"] == "all" and cluster["schema"]["enum"] == ["all", "kalos", "seren"]
