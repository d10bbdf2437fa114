"""Approvals and triage answered by a person: a real api-server on loopback (PostgreSQL metadata DB of its
own, the simple auth manager) and the DAG run by ``airflow dags test`` in a subprocess on the same DB.

On Airflow 3.3 a human-in-the-loop task waits in ``awaiting_input``; an answer PATCHed to the REST API
(``/api/v2/dags/{dag}/dagRuns/{run}/taskInstances/{task}/{map_index}/hitlDetails``) or given in the UI's
Required Actions form resumes it, and ``dags test`` goes on. ``dags test`` never sweeps time-outs (the
scheduler does): the time-out test runs the scheduler's own sweep (``SchedulerJobRunner.
check_awaiting_input_timeouts``) in a subprocess, as a scheduler loop would. The answers must reach the
recovery's action log and the learned rules in the lake.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest

from acme.recovery.synth_checkpoints import write_checkpoint
from tests.api_server_support import AIRFLOW, api_server_env, running_api_server, stop
from tests.api_server_support import token as api_token
from tests.integration.conftest import free_port

# Measured at load 8-10 on this 2-core machine: the api-server set-up 31 s, each test 38-52 s (the dags
# test run plus the answer), the module 275 s; at load 30-40 the tests took about 90 s each.
pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "acme-hitl-test-password"
NODES = [
    f"seren-n{i:03d}" for i in range(8)
]  # demo-pretrain-1 of the simulated cluster: seren-n005 is faulty
FLUX = [
    "[rank2]: Traceback (most recent call last):",
    '[rank2]:   File "/workspace/train.py", line 88, in <module>',
    "[rank2]: widgetlib.FluxCapacitorFault: flux capacitor drained on device 3 (code 0x1f)",
]


def psql(sql: str) -> None:
    subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-v", "ON_ERROR_STOP=1", "-c", sql],
                   check=True, capture_output=True)  # fmt: skip


@pytest.fixture(scope="module")
def hitl_server(tmp_path_factory):
    """A migrated PostgreSQL DB (named for this branch's test, dropped after) and an api-server on it."""
    if subprocess.run(["pg_isready", "-h", "127.0.0.1"], capture_output=True).returncode != 0:
        pytest.fail("PostgreSQL is not running on 127.0.0.1:5432")
    home = tmp_path_factory.mktemp("airflow-hitl")
    database = f"acme_hitl_{uuid.uuid4().hex[:10]}"
    psql(f"CREATE DATABASE {database}")
    port = free_port()
    env = api_server_env(
        home,
        port,
        PASSWORD,
        AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=f"postgresql+psycopg2://postgres@127.0.0.1:5432/{database}",
        AIRFLOW__API__BASE_URL=f"http://127.0.0.1:{port}",
        ACME_RECOVERY_BACKEND="simulated",
        ACME_DIAGNOSIS_EMBEDDING="lexical",
    )
    try:
        done = subprocess.run(
            [AIRFLOW, "db", "migrate"], env=env, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stderr[-2000:]
        with running_api_server(env, home) as base:
            yield {"base": base, "env": env, "home": home, "lake": home / "lake"}
    finally:
        psql(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")


def token(base: str) -> str:
    return api_token(base, PASSWORD)


def api(server: dict, path: str, body: dict | None = None, method: str = "GET") -> dict:
    request = urllib.request.Request(
        f"{server['base']}/api/v2{path}",
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token(server['base'])}", "Content-Type": "application/json"},
        method=method,
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return json.load(answer)
    except urllib.error.HTTPError as error:
        raise AssertionError(f"{method} {path}: HTTP {error.code}: {error.read().decode()[:2000]}") from None


def dags_test(server: dict, dag_id: str, day: str, conf: dict, log: Path, **env: str) -> subprocess.Popen:
    """``airflow dags test`` of one DAG in the background, on the server's DB (output to ``log``)."""
    handle = log.open("w")
    return subprocess.Popen(
        [AIRFLOW, "dags", "test", dag_id, day, "--conf", json.dumps(conf)],
        env={**server["env"], **env}, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip


def waiting_question(server: dict, dag_id: str, task_id: str, process: subprocess.Popen, log: Path) -> dict:
    """The open HITL detail of ``task_id`` in ``dag_id``'s runs, as the REST API lists it."""
    deadline = time.monotonic() + 150
    while time.monotonic() < deadline:
        listed = api(server, f"/dags/{dag_id}/dagRuns/~/hitlDetails?response_received=false")
        # Only a task still waiting: an earlier test's timed-out question stays without a response too.
        found = [
            d for d in listed["hitl_details"]
            if d["task_instance"]["task_id"] == task_id and d["task_instance"]["state"] == "awaiting_input"
        ]  # fmt: skip
        if found:
            return max(found, key=lambda d: d["created_at"])
        if process.poll() is not None:
            raise AssertionError(f"dags test ended before asking: {log.read_text()[-4000:]}")
        time.sleep(1)
    raise AssertionError(f"no question from {dag_id}.{task_id}: {log.read_text()[-4000:]}")


def answer(server: dict, detail: dict, options: list[str], params_input: dict) -> dict:
    ti = detail["task_instance"]
    path = (f"/dags/{ti['dag_id']}/dagRuns/{ti['dag_run_id']}/taskInstances/{ti['task_id']}/"
            f"{ti['map_index']}/hitlDetails")  # fmt: skip
    return api(server, path, {"chosen_options": options, "params_input": params_input}, "PATCH")


def finished(process: subprocess.Popen, log: Path, timeout_s: float = 150) -> str:
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        stop(process)
        raise AssertionError(f"dags test did not finish: {log.read_text()[-4000:]}") from None
    output = log.read_text()
    assert process.returncode == 0, output[-4000:]
    return output


def approval_records(lake: Path, recovery_id: str) -> tuple[list[dict], dict[str, str]]:
    (path,) = lake.glob(f"recovery/cluster=seren/job=demo-pretrain-1/{recovery_id}/actions.jsonl")
    records = [json.loads(line) for line in path.read_text().splitlines()]
    return [r for r in records if r["step"] == "approval"], {r["step"]: r["status"] for r in records}


def live_conf(server: dict, recovery_id: str) -> dict:
    checkpoints = server["home"] / f"ckpt-{recovery_id}"
    write_checkpoint(checkpoints, 100)
    write_checkpoint(checkpoints, 200)
    # Started by hand: the auto-approve policy does not apply, so the live run asks.
    return {"cluster": "seren", "job_id": "demo-pretrain-1", "nodes": NODES, "dry_run": False,
            "checkpoint_uri": str(checkpoints), "recovery_id": recovery_id, "reason": "ECCError"}  # fmt: skip


def cordoned(lake: Path) -> list[str]:
    state = lake / "recovery/simulated/cluster=seren/state.json"
    return list(json.loads(state.read_text()).get("cordoned") or []) if state.exists() else []


# ------------------------------------------------------------------------------------------ approval
def test_a_rejection_over_the_rest_api_is_logged_with_who_and_why_and_nothing_is_cordoned(
    hitl_server, tmp_path
):
    log = tmp_path / "dags-test.log"
    process = dags_test(
        hitl_server, "recover_training", "2026-11-29", live_conf(hitl_server, "rest-reject"), log
    )
    try:
        detail = waiting_question(hitl_server, "recover_training", "approve", process, log)
        assert detail["options"] == ["Approve", "Reject"]
        assert "seren-n005" in detail["subject"] and "step_200" in detail["body"]
        assert "Blast radius" in detail["body"] and "ECCError" in detail["body"]
        answered = answer(hitl_server, detail, ["Reject"], {"why": "n005 is under warranty repair: wait"})
        assert answered["responded_by"]["name"] == "admin"
        finished(process, log)
    finally:
        stop(process)
    approvals, steps = approval_records(hitl_server["lake"], "rest-reject")
    assert [a["status"] for a in approvals] == ["awaiting", "rejected"]
    assert approvals[-1]["by"] == "admin" and approvals[-1]["reason"] == "n005 is under warranty repair: wait"
    assert steps["cordon"] == "planned" and steps["restart"] == "planned"
    assert "seren-n005" not in cordoned(hitl_server["lake"])


def test_an_approval_over_the_rest_api_cordons_and_restarts(hitl_server, tmp_path):
    log = tmp_path / "dags-test.log"
    process = dags_test(
        hitl_server, "recover_training", "2026-11-29", live_conf(hitl_server, "rest-approve"), log
    )
    try:
        detail = waiting_question(hitl_server, "recover_training", "approve", process, log)
        answer(hitl_server, detail, ["Approve"], {"why": "checked the Xid on n005"})
        finished(process, log)
    finally:
        stop(process)
    approvals, steps = approval_records(hitl_server["lake"], "rest-approve")
    assert [(a["status"], a["by"], a["reason"]) for a in approvals][-1] == (
        "approved", "admin", "checked the Xid on n005",
    )  # fmt: skip
    assert steps["cordon"] == "done" and steps["restart"] == "done"
    assert "seren-n005" in cordoned(hitl_server["lake"])


def test_an_approval_nobody_answers_times_out_and_ends_as_a_plan(hitl_server, tmp_path):
    log = tmp_path / "dags-test.log"
    conf = live_conf(hitl_server, "nobody-answers")
    process = dags_test(hitl_server, "recover_training", "2026-11-29", conf, log,
                        ACME_RECOVERY_APPROVAL_TIMEOUT_S="2")  # fmt: skip
    try:
        waiting_question(hitl_server, "recover_training", "approve", process, log)
        time.sleep(3)  # past the 2 s response time-out
        sweep = ("from airflow.jobs.job import Job\n"
                 "from airflow.jobs.scheduler_job_runner import SchedulerJobRunner\n"
                 "SchedulerJobRunner(job=Job()).check_awaiting_input_timeouts()\n")  # fmt: skip
        done = subprocess.run([sys.executable, "-c", sweep], env=hitl_server["env"], capture_output=True,
                              text=True, timeout=120)  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        finished(process, log)
    finally:
        stop(process)
    approvals, steps = approval_records(hitl_server["lake"], "nobody-answers")
    assert [a["status"] for a in approvals] == ["awaiting", "timed_out"]
    assert approvals[-1]["by"] == "timeout" and "ends as a plan" in approvals[-1]["reason"]
    assert steps["restart"] == "planned"


# ------------------------------------------------------------------------------------------ triage
def seed_failed_big_job(lake: Path) -> None:
    """One failed 256-GPU Pretrain job of seren on 2023-07-01 in the lake, with an Unknown crash log."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = lake / "jobs/cluster=seren/date=2023-07-01"
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({
        "job_id": ["flux-1"], "state_group": ["failed"], "job_type": ["Pretrain"], "user": ["u1"],
        "job_name": ["gpt-pretrain-run1"], "node_list": ["seren-n[000-031]"], "gpu_num": [256],
        "run_s": [3600.0], "gpu_time": [256 * 3600.0], "submit_time": ["2023-07-01T03:00:00+00:00"],
    }), folder / "jobs.parquet")  # fmt: skip
    logs = lake / "logs/cluster=seren/job=flux-1"
    logs.mkdir(parents=True, exist_ok=True)
    (logs / "train.log").write_text("\n".join(FLUX) + "\n")


def test_a_triage_answer_over_the_rest_api_becomes_a_rule_that_diagnoses_the_same_log(hitl_server, tmp_path):
    from acme.diagnosis.pipeline import diagnose_log_lines
    from acme.lake import Lake

    lake = hitl_server["lake"]
    seed_failed_big_job(lake)
    log = tmp_path / "dags-test.log"
    process = dags_test(hitl_server, "diagnose_failures", "2023-07-02",
                        {"cluster": "seren", "day": "2023-07-01"}, log)  # fmt: skip
    try:
        detail = waiting_question(hitl_server, "diagnose_failures", "triage", process, log)
        assert "flux-1" in detail["subject"] and "FluxCapacitorFault" in detail["body"]
        assert detail["options"][-1] == "Unknown" and "NVLinkError" in detail["options"]
        answer(hitl_server, detail, ["NVLinkError"], {"note": "the GPU's NVLink was down"})
        finished(process, log)
    finally:
        stop(process)
    learned = (lake / "diagnosis/rules/learned.yaml").read_text()
    assert "NVLinkError" in learned and "by: admin" in learned
    again = diagnose_log_lines(
        [line.replace("device 3", "device 6") for line in FLUX], {"job_id": "flux-2"}, cluster="seren",
        lake=Lake(str(lake)), agent=None, learn=False,
    )  # fmt: skip
    assert (again.reason, again.source) == ("NVLinkError", "rule")


# ------------------------------------------------------------------------------------------ the UI's form
def test_a_rejection_in_the_ui_form_in_headless_chromium_reaches_the_action_log(hitl_server, tmp_path):
    """The Required Actions page of the waiting task, as an operator opens it: type a reason, click Reject."""
    from tests.integration.test_airflow_ui_trigger_form import wait_until
    from tests.integration.test_report_browser import ARTIFACTS, DevTools, ensure_chromium, headless_chromium

    log = tmp_path / "dags-test.log"
    process = dags_test(
        hitl_server, "recover_training", "2026-11-29", live_conf(hitl_server, "ui-reject"), log
    )
    try:
        detail = waiting_question(hitl_server, "recover_training", "approve", process, log)
        ti = detail["task_instance"]
        url = f"{hitl_server['base']}/dags/recover_training/runs/{ti['dag_run_id']}/tasks/approve/required_actions"
        with headless_chromium(ensure_chromium(), tmp_path / "profile") as port:
            page = DevTools(port)
            try:
                for domain in ("Page", "Runtime", "Network"):
                    page.call(f"{domain}.enable")
                page.call("Network.setCookie", name="_token", value=token(hitl_server["base"]),
                          url=f"{hitl_server['base']}/")  # fmt: skip
                page.open(url)
                wait_until(
                    page, "document.body.innerText.includes('Approve live recovery')", "the approval form"
                )
                wait_until(page, "!!document.getElementById('element_why')", "the Reason field")
                page.evaluate("document.getElementById('element_why').focus()")
                page.call("Input.insertText", text="rack 5 switch maintenance tonight")
                page.screenshot(ARTIFACTS / "ui_hitl_approval_form.png")
                wait_until(page, """(() => { const b = Array.from(document.querySelectorAll('button'))
                    .find(b => b.textContent.trim() === 'Reject'); if (!b || b.disabled) return false;
                    b.click(); return true; })()""", "the Reject button")  # fmt: skip
                finished(process, log)
            finally:
                page.close()
    finally:
        stop(process)
    approvals, steps = approval_records(hitl_server["lake"], "ui-reject")
    assert [a["status"] for a in approvals] == ["awaiting", "rejected"]
    assert approvals[-1]["by"] == "admin" and approvals[-1]["reason"] == "rack 5 switch maintenance tonight"
    assert steps["restart"] == "planned"
