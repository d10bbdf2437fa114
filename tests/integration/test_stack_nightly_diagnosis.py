"""One cluster-day through the production stack as the scheduler runs it (slow tier: a few minutes).

``stack/stack.py`` with the CeleryExecutor over Redis, Postgres, the lake on a loopback S3 server; a
synthesized Seren day at a tenth of its daily volume, five of its failed jobs with a 20,000-line crash log.
One REST call triggers the ingest; the Asset events start ``diagnose_failures`` and then ``characterize``.
The cap on jobs with a log is 2 (``ACME_DIAGNOSIS_MAX_JOBS``), so the carry-over queue must hand the rest
to later diagnosis runs (triggered here by hand, as the next nights would). At the end every failed job of
the day has exactly one diagnosis record and the day's report counts all of them in its failure table.
"""

from __future__ import annotations

import json
import math
import uuid

import pytest
from stack.nightly_day import (
    DAG_IDS,
    DAY,
    clusters_file,
    failed_job_ids,
    report_failure_reasons,
    run_day,
    stored_diagnoses,
    synth_day,
    upload_logs,
    waiting_in_queue,
)
from stack.rest import StackApi
from stack.stack import StackSettings, claim_free_redis_db, down, group_pids, up

pytestmark = [pytest.mark.integration, pytest.mark.slow]

LOGGED = 5
CAP = 2


@pytest.fixture(scope="module")
def day_stack(tmp_path_factory):
    data = tmp_path_factory.mktemp("seren-day")
    day_csv = synth_day(data, scale=0.1)
    settings = StackSettings(
        home=tmp_path_factory.mktemp("stack"),
        password="nightly-test-password",
        database=f"acme_stack_night_{uuid.uuid4().hex[:8]}",
        redis_db=claim_free_redis_db("test_stack_nightly_diagnosis"),
        retry_delay_s=3,
        extra_env={
            "ACME_CLUSTERS_FILE": str(clusters_file(data)),
            "ACME_DIAGNOSIS_MAX_JOBS": str(CAP),
            "ACME_DIAGNOSIS_EMBEDDING": "lexical",  # the model is measured in the benchmarks, not here
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
        },
    )
    try:
        up(settings)
        yield settings, day_csv
    finally:
        groups = [json.loads(p.read_text())["pid"] for p in settings.pids.glob("*.json")]
        down(settings, purge=True)
        assert [g for g in groups if group_pids(g)] == [], "a process the stack started is still running"


def test_one_ingest_leads_to_a_diagnosis_of_every_failed_job_and_a_report_that_counts_them(day_stack):
    settings, day_csv = day_stack
    failed = failed_job_ids(day_csv)
    assert len(failed) > 50
    logged = upload_logs(settings, failed[:: len(failed) // LOGGED][:LOGGED])
    api = StackApi(settings)
    for dag_id in DAG_IDS:
        api.unpause(dag_id)

    night = run_day(api)
    assert [r["state"] for r in night["diagnoses"]] == ["success"]
    first = {r["job_id"] for r in stored_diagnoses(settings)}
    assert len(first) == len(failed) - LOGGED + CAP  # every job without a log, the cap of the others
    assert waiting_in_queue(settings) == LOGGED  # the queue as planned: CAP taken, LOGGED - CAP waiting

    # The report the scheduler built after that diagnosis already counts every job diagnosed so far.
    assert sum(int(row["jobs"]) for row in report_failure_reasons(settings)) == len(first)

    for _ in range(math.ceil((LOGGED - CAP) / CAP)):  # the next nights take what waits
        run = api.trigger("diagnose_failures", {"cluster": "seren", "day": DAY.isoformat()})
        assert api.wait_run("diagnose_failures", run["dag_run_id"])["state"] == "success"
    rows = stored_diagnoses(settings)
    assert sorted(r["job_id"] for r in rows) == failed  # each failed job exactly once
    by_id = {r["job_id"]: r for r in rows}
    assert all(by_id[j]["source"] == "rule" and by_id[j]["reason"] != "Unknown" for j in logged)

    report = api.trigger("characterize", {"cluster": "seren", "period": DAY.isoformat()})
    assert api.wait_run("characterize", report["dag_run_id"])["state"] == "success"
    table = report_failure_reasons(settings)
    assert sum(int(row["jobs"]) for row in table) == len(failed)
    reasons = {row["reason"] for row in table}
    assert {by_id[j]["reason"] for j in logged} <= reasons
