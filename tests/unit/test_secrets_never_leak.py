"""Secrets planted in a scheduler extract and in a training log never reach anything the pipeline writes.

The planted values go through the real ingest (sacct parser, validation, quarantine, publish) and the
real diagnosis (compression, rules, retrieval store, records, owner message); then every object in
the lake is searched for them, byte for byte. The raw zone (``raw/``: the input as received, written by
the DAG's extract step) is the one documented exception (see :mod:`acme.secrets`).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from acme.diagnosis.pipeline import diagnose_job
from acme.diagnosis.records import write_records
from acme.diagnosis.routing import route, write_owner_message
from acme.jobs.ingest import JobInput, ingest_job_file
from acme.lake import Lake
from acme.secrets import redact

SECRETS = {
    "hf_token": "hf_" + "Q" * 34,
    "openai_key": "sk-proj-" + "A1b2C3d4" * 4,
    "aws_key": "AKIA" + "Z" * 16,
    "password": "hunter2-Sup3rSecret",
    "url_password": "s3cr3tPa55",
    "bearer": "abcDEF123456ghiJKL789",
}

SACCT = "\n".join(
    [
        "JobID|JobName|User|Partition|State|Submit|Start|End|Elapsed|NNodes|NCPUS|NodeList|AllocTRES|ReqTRES|ExitCode",
        # a job whose name carries a token and a password, as users' launch scripts do
        f"9001|train --hf-token={SECRETS['hf_token']} --password {SECRETS['password']}|alice|gpu|FAILED|"
        "2024-03-10T01:00:00|2024-03-10T01:05:00|2024-03-10T03:05:00|02:00:00|2|128|gpu[01-02]|"
        "billing=128,cpu=128,gres/gpu=16,mem=1T,node=2|cpu=128,gres/gpu=16|1:0",
        # a malformed row (bad NNodes) with an API key in its name: it goes to quarantine, record and all
        f"9002|eval OPENAI_API_KEY={SECRETS['openai_key']}|bob|gpu|COMPLETED|2024-03-10T01:00:00|"
        "2024-03-10T01:05:00|2024-03-10T02:05:00|01:00:00|two|8|gpu03|cpu=8,gres/gpu=1|cpu=8|0:0",
    ]
)

LOG = [
    "[rank0]: step 100 loss 2.31",
    f"[rank0]: export AWS_ACCESS_KEY_ID={SECRETS['aws_key']}",
    f"[rank0]: downloading from https://alice:{SECRETS['url_password']}@data.example.com/shard-7",
    f"[rank0]: Authorization: Bearer {SECRETS['bearer']}",
    "[rank0]: Traceback (most recent call last):",
    '[rank0]:   File "train.py", line 12, in <module>',
    f"[rank0]: KeyError: 'token {SECRETS['hf_token']} password={SECRETS['password']}'",
]


def all_objects(lake: Lake) -> dict[str, bytes]:
    """Every object's content as bytes; Parquet decoded to text first (its pages may be compressed,
    and a byte search of compressed pages would miss a secret)."""

    def content(key: str) -> bytes:
        if key.endswith(".parquet"):
            return lake.read_parquet(key).to_pandas().to_csv().encode()
        return lake.read_bytes(key)

    return {key: content(key) for key in lake.list("")}


@pytest.fixture
def lake(tmp_path) -> Lake:
    return Lake(str(tmp_path / "lake"))


def test_redact_masks_every_planted_kind():
    text = " ".join(LOG) + " " + SACCT
    masked = redact(text)
    for name, secret in SECRETS.items():
        assert secret in text and secret not in masked, name


def test_ingest_diagnosis_and_report_write_and_log_no_secret_outside_the_raw_zone(
    lake, tmp_path, monkeypatch, capfd, caplog
):
    from acme.report.build import build_report

    caplog.set_level("DEBUG")
    monkeypatch.setenv("ACME_DIAGNOSIS_EMBEDDING", "lexical")
    extract = tmp_path / "sacct-2024-03-10.txt"
    extract.write_text(SACCT + "\n", encoding="utf-8")
    job_input = JobInput(cluster="seren", format="sacct", uri=str(extract))
    summary = ingest_job_file(lake, job_input, extract, max_quarantine_share=1.0)
    assert summary["rows"] == 1 and summary["quarantined"] == 1

    job = {
        "cluster": "seren", "job_id": "9001", "job_type": "Pretrain", "user": "alice",
        "job_name": "train", "node_list": "gpu[01-02]",
    }  # fmt: skip
    record = diagnose_job(lake, "seren", job, LOG, agent=None)
    assert record.reason == "KeyError"
    write_records(lake, [record])
    decided = route(record, job)
    assert decided.message is not None
    write_owner_message(lake, record, decided.message)
    report = build_report(lake, "seren", "2024-03")
    assert report["summary"]["gpu_jobs"] == 1

    objects = all_objects(lake)
    outside_raw = {key: data for key, data in objects.items() if not key.startswith("raw/")}
    assert any(key.startswith("jobs/") for key in outside_raw)
    assert any(key.startswith("quarantine/") for key in outside_raw)
    assert any(key.startswith("diagnoses/") for key in outside_raw)
    assert any(key.startswith("diagnosis/messages/") for key in outside_raw)
    assert any(key.startswith("reports/") and key.endswith(".html") for key in outside_raw)
    printed = capfd.readouterr()
    outside_raw["printed and logged"] = (printed.out + printed.err + caplog.text).encode()
    assert "quarantine/jobs/cluster=seren" in caplog.text  # the run's own logging was captured
    leaks = [
        (name, key)
        for key, data in outside_raw.items()
        for name, secret in SECRETS.items()
        if secret.encode() in data
    ]
    assert leaks == []
    # The planted values were really read, and masked rather than dropped: the rows are still there.
    jobs = b"".join(data for key, data in outside_raw.items() if key.startswith("jobs/"))
    quarantine = b"".join(data for key, data in outside_raw.items() if key.startswith("quarantine/"))
    assert b"--hf-token=[REDACTED]" in jobs
    assert b"OPENAI_API_KEY=[REDACTED]" in quarantine


def test_compress_output_has_no_secret(tmp_path):
    from acme.diagnosis.compress import compress_cli

    log = tmp_path / "train.log"
    log.write_text("\n".join(LOG) + "\n", encoding="utf-8")
    out = tmp_path / "compressed.txt"
    compress_cli(log, out)
    text = Path(out).read_text(encoding="utf-8")
    assert "KeyError" in text
    assert [name for name, secret in SECRETS.items() if secret in text] == []
