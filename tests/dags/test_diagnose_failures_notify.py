"""``diagnose_failures`` run by Airflow (dag.test) on a bundled day with a real SMTP server (aiosmtpd) as the
owners' mail channel: one digest per owner, delivered once, also when the run is repeated."""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.notify_support import smtp_connection, smtp_server

ROOT = Path(__file__).resolve().parents[2]
DAY = "2023-07-01"
SAMPLE = ROOT / "include" / "sample_data" / "jobs" / "kalos" / f"{DAY}.csv"

pytestmark = pytest.mark.airflow


def _run(conf):
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(ROOT / "dags" / "diagnose_failures.py"))
    assert not bag.import_errors, bag.import_errors
    dag = bag.dags["diagnose_failures"]
    for task in dag.tasks:
        task.retries = 0
    return dag.test(logical_date=datetime.fromisoformat(DAY).replace(tzinfo=UTC), run_conf=conf)


def test_the_nightly_diagnosis_mails_one_digest_per_owner_once(airflow_db, lake_dir, tmp_path, monkeypatch):
    from acme.jobs.ingest import JobInput, ingest_job_file
    from acme.lake import Lake

    lake = Lake(str(lake_dir))
    ingest_job_file(lake, JobInput("kalos", "acmetrace", str(SAMPLE)), SAMPLE)  # the whole bundled day
    routing = tmp_path / "notify.yaml"
    routing.write_text(
        "channels: {mail: {kind: smtp, connection: smtp_h29a_dag}}\n"
        "owners: {channel: mail, domain: kalos.acme.example}\n"
    )
    monkeypatch.setenv("ACME_NOTIFY_FILE", str(routing))
    monkeypatch.setenv("ACME_NOTIFY_REPORT_URL", "https://reports.acme.example")
    with smtp_server() as (mailbox, port):
        monkeypatch.setenv("AIRFLOW_CONN_SMTP_H29A_DAG", smtp_connection(port))
        assert _run({"day": DAY, "cluster": "kalos"}).state == "success"
        first = len(mailbox.messages)
        assert _run({"day": DAY, "cluster": "kalos", "rediagnose": True}).state == "success"  # a re-run
        assert len(mailbox.messages) == first
    owner_messages = [json.loads(p.read_text()) for p in (lake_dir / "diagnosis/messages").rglob("*.json")]
    owners = Counter(m["user"] for m in owner_messages)
    assert owners and first == len(owners)  # one digest per owner, not one mail per job
    to = Counter(r[0] for r in mailbox.recipients)
    assert to == Counter(f"{user}@kalos.acme.example" for user in owners)
    busiest, jobs = owners.most_common(1)[0]
    (mail,) = [m for m in mailbox.messages if m["To"] == f"{busiest}@kalos.acme.example"]
    assert mail["Subject"].startswith(f"[acme] kalos {DAY}: {jobs} of your jobs failed")
    body = mailbox.bodies()[mailbox.messages.index(mail)]
    assert "GPU-hours lost" in body and "what to do:" in body
    assert f"https://reports.acme.example/cluster=kalos/period={DAY}/index.html" in body
    assert not list((lake_dir / "notify/queue").rglob("*.json"))  # everything went out
