"""``diagnose_failures`` run by Airflow (dag.test) on a bundled day with a real SMTP server (aiosmtpd) as the
owners' and on-call's mail channel: one digest per owner, a page for the large job's infrastructure failure,
each delivered once, also when the run is repeated."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from acme.diagnosis.synth_log import iter_training_log
from tests.notify_support import smtp_connection, smtp_server

ROOT = Path(__file__).resolve().parents[2]
DAY = "2023-07-01"
SAMPLE = ROOT / "include" / "sample_data" / "jobs" / "kalos" / f"{DAY}.csv"
# Failed jobs of the bundled day and the crash each one's log shows: two owners' script errors, and an
# uncorrectable ECC error under a 256-GPU job.
CRASHES = {
    "dlc7e55e6b6s2gk7": ("u0a5d", "KeyError"),
    "dlcbu1d574zff4n4": ("u0a5d", "OutOfMemoryError"),
    "dlceuwohcji2odkq": ("u0a5d", "KeyError"),
    "dlc2zwo9a1hmmd46": ("u199a", "ImportError"),
    "dlct44brhety09yi": ("ufa7d", "ECCError"),
}

pytestmark = pytest.mark.airflow  # two runs over the whole bundled day: 5-10 s on 2026-12-04


def _run(conf):
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(ROOT / "dags" / "diagnose_failures.py"))
    assert not bag.import_errors, bag.import_errors
    dag = bag.dags["diagnose_failures"]
    for task in dag.tasks:
        task.retries = 0
    return dag.test(logical_date=datetime.fromisoformat(DAY).replace(tzinfo=UTC), run_conf=conf)


def test_the_nightly_diagnosis_mails_one_digest_per_owner_and_pages_oncall_once(
    airflow_db, lake_dir, tmp_path, monkeypatch
):
    from acme.jobs.ingest import JobInput, ingest_job_file
    from acme.lake import Lake

    monkeypatch.setenv("ACME_DIAGNOSIS_EMBEDDING", "lexical")  # the model's load is not under test here
    lake = Lake(str(lake_dir))
    ingest_job_file(lake, JobInput("kalos", "acmetrace", str(SAMPLE)), SAMPLE)  # the whole bundled day
    for job_id, (_, failure) in CRASHES.items():
        log = lake_dir / "logs" / "cluster=kalos" / f"job={job_id}" / "train.log"
        log.parent.mkdir(parents=True)
        log.write_text("\n".join(iter_training_log(2_000, seed=3, ranks=8, failure=failure)) + "\n")
    routing = tmp_path / "notify.yaml"
    routing.write_text(
        "channels: {mail: {kind: smtp, connection: smtp_h29a_dag}}\n"
        "owners: {channel: mail, domain: kalos.acme.example}\n"
        "oncall: {gpu_threshold: 128, default: {channel: mail, to: oncall@acme.example}}\n"
    )
    monkeypatch.setenv("ACME_NOTIFY_FILE", str(routing))
    monkeypatch.setenv("ACME_NOTIFY_REPORT_URL", "https://reports.acme.example")
    with smtp_server() as (mailbox, port):
        monkeypatch.setenv("AIRFLOW_CONN_SMTP_H29A_DAG", smtp_connection(port))
        assert _run({"day": DAY, "cluster": "kalos"}).state == "success"
        first = list(mailbox.messages)
        assert _run({"day": DAY, "cluster": "kalos", "rediagnose": True}).state == "success"  # a re-run
        assert len(mailbox.messages) == len(first)
    by_to = {m["To"]: (m, body) for m, body in zip(first, mailbox.bodies(), strict=True)}
    assert sorted(by_to) == ["oncall@acme.example", "u0a5d@kalos.acme.example", "u199a@kalos.acme.example"]
    digest, body = by_to["u0a5d@kalos.acme.example"]
    assert digest["Subject"] == f"[acme] kalos {DAY}: 3 of your jobs failed (2 reasons, 0.05 GPU-hours)"
    # By reason, most GPU-hours lost first: the OOM (121 GPU-s of run time) before the two KeyErrors.
    assert "KeyError (Script): 2 job(s), 0.01 GPU-hours lost" in body, body
    assert body.index("OutOfMemoryError (") < body.index("KeyError (Script)")
    assert "dlc7e55e6b6s2gk7, dlceuwohcji2odkq" in body and "what to do:" in body
    assert f"https://reports.acme.example/cluster=kalos/period={DAY}/index.html" in body
    page, text = by_to["oncall@acme.example"]
    assert page["Subject"].startswith("[acme page] kalos: ECCError on job dlct44brhety09yi (256 GPUs)")
    assert "Recovery: no recovery" in text and "Evidence:" in text
    assert not list((lake_dir / "notify/queue").rglob("*.json"))  # everything went out
