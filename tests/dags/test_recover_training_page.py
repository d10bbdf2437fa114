"""recover_training's final page (task ``page_oncall``, a teardown) run by Airflow (dag.test) on the simulated
cluster with a real SMTP server (aiosmtpd) as on-call's channel: the recovery's state from its action log,
the suspect node, where the log is; once per state; and a run that needs a person keeps its failure."""

from __future__ import annotations

import pytest

from acme.recovery.synth_checkpoints import write_checkpoint
from tests.dags.test_recover_training import run_dag, sim_conf, task_states
from tests.notify_support import smtp_connection, smtp_server

pytestmark = pytest.mark.airflow


@pytest.fixture
def simulated(monkeypatch, lake_dir):
    monkeypatch.setenv("ACME_RECOVERY_BACKEND", "simulated")
    return lake_dir


@pytest.fixture
def checkpoints(tmp_path):
    root = tmp_path / "checkpoints"
    for step in (100, 200):
        write_checkpoint(root, step)
    return root


@pytest.fixture
def oncall_mail(tmp_path, monkeypatch):
    routing = tmp_path / "notify.yaml"
    routing.write_text(
        "channels: {mail: {kind: smtp, connection: smtp_h29a_rec}}\n"
        "oncall: {gpu_threshold: 64, clusters: {seren: {channel: mail, to: oncall-seren@acme.example}}}\n"
    )
    monkeypatch.setenv("ACME_NOTIFY_FILE", str(routing))
    with smtp_server() as (mailbox, port):
        monkeypatch.setenv("AIRFLOW_CONN_SMTP_H29A_REC", smtp_connection(port))
        yield mailbox


def test_the_final_page_gives_the_restart_the_suspect_node_and_the_action_log_once(
    airflow_db, simulated, checkpoints, oncall_mail
):
    run = run_dag(**sim_conf(checkpoints))
    assert run.state == "success", task_states(run)
    assert run_dag(**sim_conf(checkpoints)).state == "success"  # a re-run: the same state is not paged again
    (page,) = oncall_mail.messages
    assert page["To"] == "oncall-seren@acme.example"
    assert page["Subject"].startswith(
        "[acme page] seren: a crash on job demo-pretrain-1 (64 GPUs) - recovery restarted"
    )
    (body,) = oncall_mail.bodies()
    assert "Suspect nodes: seren-n005" in body
    assert (
        f"Action log: {simulated}/recovery/cluster=seren/job=demo-pretrain-1/incident-8/actions.jsonl" in body
    )


def test_a_recovery_that_needs_a_person_pages_so_and_the_run_keeps_its_failure(
    airflow_db, simulated, tmp_path, oncall_mail
):
    empty = tmp_path / "no-checkpoints"
    empty.mkdir()
    run = run_dag(**sim_conf(empty, recovery_id="incident-9"))
    assert run.state == "failed"
    assert task_states(run)["page_oncall"] == ["success"]
    (page,) = oncall_mail.messages
    assert "recovery needs a person" in page["Subject"]
    assert "no healthy checkpoint" in oncall_mail.bodies()[0] or "checkpoint" in oncall_mail.bodies()[0]
