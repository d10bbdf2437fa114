"""The nightly diagnosis in bulk (acme.diagnosis.nightly) on the bundled Seren day (about 1,000 failed jobs,
ingested by the real ingest): jobs without a log from metadata in one step, jobs with a log in chunks, the
cap with its carry-over queue, and retries that never diagnose or store a job twice."""

from __future__ import annotations

import gzip
from datetime import date
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from acme.diagnosis.synth_log import iter_training_log

ROOT = Path(__file__).resolve().parents[3]
DAY = date(2023, 7, 1)
SEREN_CSV = ROOT / "include" / "sample_data" / "jobs" / "seren" / f"{DAY}.csv"


@pytest.fixture
def seren_day(lake_dir, monkeypatch):
    """The bundled seren day in a fresh lake, with a short crash log for five of its failed jobs."""
    from acme.diagnosis.nightly import failed_jobs
    from acme.jobs.ingest import JobInput, ingest_job_file
    from acme.lake import Lake

    monkeypatch.setenv("ACME_DIAGNOSIS_EMBEDDING", "lexical")  # the model's load is not under test here
    lake = Lake(str(lake_dir))
    ingest_job_file(lake, JobInput("seren", "acmetrace", str(SEREN_CSV)), SEREN_CSV)
    failed = failed_jobs(lake, "seren", DAY)
    logged = [job["job_id"] for job in failed[::200][:5]]
    for job_id in logged:
        path = lake_dir / "logs" / "cluster=seren" / f"job={job_id}" / "train.log"
        path.parent.mkdir(parents=True)
        path.write_text("\n".join(iter_training_log(400, seed=1, ranks=2, failure="ECCError")) + "\n")
    return {"lake": lake, "failed": [j["job_id"] for j in failed], "logged": logged}


def stored(lake_dir: Path) -> list[dict]:
    return pq.read_table(lake_dir / f"diagnoses/cluster=seren/date={DAY}/diagnoses.parquet").to_pylist()


def run_night(lake, run_id: str, **kwargs) -> dict:
    """What one DAG run does: plan, the bulk step, every chunk; returns the plan and the steps' summaries."""
    from acme.diagnosis.nightly import diagnose_chunk, diagnose_without_logs, plan_run

    plan = plan_run(lake, [("seren", DAY)], run_id=run_id, **kwargs)
    steps = [diagnose_without_logs(lake, plan["plan"])]
    steps += [diagnose_chunk(lake, chunk["plan"], chunk["chunk"]) for chunk in plan["chunks"]]
    return {"plan": plan, "steps": steps}


def test_the_plan_finds_the_logged_jobs_by_one_listing_and_leaves_the_rest_to_metadata(seren_day):
    from acme.diagnosis.nightly import job_ids_with_logs, plan_run

    lake = seren_day["lake"]
    assert len(seren_day["failed"]) > 900  # a Seren-scale day
    assert job_ids_with_logs(lake, "seren", DAY) == set(seren_day["logged"])
    plan = plan_run(lake, [("seren", DAY)], run_id="night-1", chunks=2)
    assert plan["with_log"] == 5 and plan["without_log"] == len(seren_day["failed"]) - 5
    assert [c["jobs"] for c in plan["chunks"]] == [3, 2] and plan["waiting"] == 0
    assert [(s["kind"], s["jobs"]) for s in plan["steps"]] == [
        ("without a log", len(seren_day["failed"]) - 5),
        ("with a log", 3),
        ("with a log", 2),
    ]
    crash = plan_run(lake, [("seren", DAY)], run_id="crash", job_id=seren_day["logged"][0])
    assert [(s["kind"], s["jobs"]) for s in crash["steps"]] == [("with a log", 1)]  # one worker slot


def test_every_failed_job_is_stored_once_and_jobs_without_a_log_load_no_model(
    seren_day, lake_dir, monkeypatch
):
    from acme.diagnosis import retrieval
    from acme.diagnosis.nightly import diagnose_without_logs, plan_run, summarize

    lake = seren_day["lake"]
    monkeypatch.setattr(retrieval, "_EMBEDDERS", {})
    plan = plan_run(lake, [("seren", DAY)], run_id="night-1")
    bulk = diagnose_without_logs(lake, plan["plan"])
    assert retrieval._EMBEDDERS == {}  # no embedder, no model: rules over metadata only
    assert bulk["jobs"] == len(seren_day["failed"]) - 5

    retried = diagnose_without_logs(lake, plan["plan"])  # a retry of the step: every job is stored already
    assert (retried["jobs"], retried["skipped"]) == (0, len(seren_day["failed"]) - 5)
    night = run_night(lake, "night-1")  # the whole run again: plans only what is still undiagnosed
    assert night["plan"]["already_diagnosed"] == len(seren_day["failed"]) - 5
    summary = summarize(night["steps"], night["plan"]["waiting"])
    assert summary["jobs"] == 5 and summary["reasons"] == {"ECCError": 5}
    rows = stored(lake_dir)
    assert sorted(r["job_id"] for r in rows) == sorted(seren_day["failed"])  # each exactly once
    by_id = {r["job_id"]: r for r in rows}
    assert {by_id[j]["reason"] for j in seren_day["logged"]} == {"ECCError"}
    unlogged = [by_id[j] for j in seren_day["failed"] if j not in seren_day["logged"]]
    assert all("diagnosed from the job metadata alone" in r["note"] for r in unlogged)
    assert all(r["source"] in ("rule", "none") for r in unlogged)

    again = run_night(lake, "night-2")  # the next night over the same day: everything is done already
    assert again["plan"]["with_log"] == again["plan"]["without_log"] == 0
    assert again["plan"]["already_diagnosed"] == len(seren_day["failed"])
    assert len(stored(lake_dir)) == len(rows)


def test_a_node_failure_without_a_log_is_diagnosed_from_the_job_state(lake_dir):
    from acme.diagnosis.nightly import diagnose_without_logs, plan_key
    from acme.lake import Lake
    from tests.diagnosis_support import read_records

    lake = Lake(str(lake_dir))
    job = {
        "job_id": "77",
        "state": "NODE_FAIL",
        "job_type": "Eval",
        "submit_time": "2023-07-01T01:00:00+00:00",
    }
    lake.write_json(
        plan_key("manual"),
        {"created_at": "2023-07-02T00:00:00+00:00", "chunks": [], "waiting": 0,
         "without_log": [{"cluster": "kalos", "day": "2023-07-01", "job": job, "log": None}]},
    )  # fmt: skip
    summary = diagnose_without_logs(lake, plan_key("manual"))
    (record,) = read_records(lake, "kalos", DAY)
    assert (record.reason, record.source, summary["reasons"]) == ("NodeFailure", "rule", {"NodeFailure": 1})
    assert any("NODE_FAIL" in e["text"] for e in record.evidence)


def test_the_cap_carries_the_rest_over_to_later_runs_until_every_logged_job_is_diagnosed(seren_day, lake_dir):
    from acme.diagnosis.nightly import diagnose_chunk, plan_run
    from tests.diagnosis_support import waiting_jobs

    lake = seren_day["lake"]

    def taken(plan: dict) -> list[str]:
        chunks = lake.read_json(plan["plan"])["chunks"]
        return sorted(item["job"]["job_id"] for chunk in chunks for item in chunk)

    first = plan_run(lake, [("seren", DAY)], run_id="night-1", limit=2)
    assert (first["with_log"], first["waiting"]) == (2, 3)
    other = plan_run(lake, [("seren", DAY)], run_id="other-run", limit=2)  # night-1's claims are fresh
    assert (other["with_log"], other["waiting"]) == (2, 3) and not set(taken(first)) & set(taken(other))
    retried = plan_run(lake, [("seren", DAY)], run_id="night-1", limit=2)  # a retry takes its own claims
    assert taken(retried) == taken(first)
    assert len(waiting_jobs(lake, "seren")) == 5  # claimed entries stay until their record exists
    for plan in (retried, other):
        for chunk in plan["chunks"]:
            diagnose_chunk(lake, chunk["plan"], chunk["chunk"])

    last = run_night(lake, "night-3", limit=2)
    assert (last["plan"]["with_log"], last["plan"]["waiting"]) == (1, 0)
    assert run_night(lake, "night-4", limit=2)["plan"]["with_log"] == 0
    assert waiting_jobs(lake, "seren") == []
    rows = stored(lake_dir)
    assert sorted(r["job_id"] for r in rows) == sorted(seren_day["failed"])
    assert {r["reason"] for r in rows if r["job_id"] in seren_day["logged"]} == {"ECCError"}


def test_a_stale_claim_of_a_run_that_failed_for_good_is_taken_over(seren_day, monkeypatch):
    from datetime import UTC, datetime, timedelta

    from acme.diagnosis.nightly import plan_run

    lake = seren_day["lake"]
    start = datetime(2023, 7, 2, tzinfo=UTC)
    dead = plan_run(lake, [("seren", DAY)], run_id="dead", limit=5, now=start)  # never diagnoses
    assert dead["with_log"] == 5
    soon = plan_run(lake, [("seren", DAY)], run_id="next", limit=5, now=start + timedelta(hours=1))
    assert (soon["with_log"], soon["waiting"]) == (0, 5)
    later = plan_run(lake, [("seren", DAY)], run_id="later", limit=5, now=start + timedelta(hours=7))
    assert later["with_log"] == 5


def test_rediagnose_takes_the_day_again_and_still_stores_each_job_once(seren_day, lake_dir):
    lake = seren_day["lake"]
    run_night(lake, "night-1")
    before = {r["job_id"]: r["diagnosed_at"] for r in stored(lake_dir)}
    night = run_night(lake, "redo", rediagnose=True)
    assert night["plan"]["with_log"] == 5 and night["plan"]["without_log"] == len(seren_day["failed"]) - 5
    after = {r["job_id"]: r["diagnosed_at"] for r in stored(lake_dir)}
    assert set(after) == set(before) and all(after[j] > before[j] for j in after)


def test_a_named_job_is_diagnosed_again_from_its_log_outside_the_queue(seren_day):
    from acme.diagnosis.nightly import plan_run
    from tests.diagnosis_support import waiting_jobs

    lake = seren_day["lake"]
    run_night(lake, "night-1")
    job_id = seren_day["logged"][0]
    plan = plan_run(lake, [("seren", DAY)], run_id="manual", job_id=job_id)
    assert (plan["with_log"], plan["without_log"], plan["waiting"]) == (1, 0, 0)
    assert waiting_jobs(lake, "seren") == []
    unlogged = next(j for j in seren_day["failed"] if j not in seren_day["logged"])
    assert plan_run(lake, [("seren", DAY)], run_id="manual-2", job_id=unlogged)["without_log"] == 1


def test_an_unreadable_nightly_log_is_recorded_as_such_and_the_chunk_goes_on(seren_day, lake_dir):
    from acme.diagnosis.nightly import diagnose_chunk, plan_run

    lake = seren_day["lake"]
    bad = seren_day["logged"][0]
    log = lake_dir / "logs" / "cluster=seren" / f"job={bad}" / "train.log.gz"
    log.write_bytes(gzip.compress(b"RuntimeError: CUDA error\n" * 1000)[:-20])  # cut off in transfer
    plan = plan_run(lake, [("seren", DAY)], run_id="night-1", chunks=1)
    summary = diagnose_chunk(lake, plan["plan"], 0)
    assert summary["jobs"] == 5 and len(summary["errors"]) == 1 and bad in summary["errors"][0]
    row = next(r for r in stored(lake_dir) if r["job_id"] == bad)
    assert row["reason"] == "Unknown" and "cannot diagnose" in row["note"] and "train.log.gz" in row["note"]


def test_rule_decided_cases_wait_for_the_nightly_chunk_not_for_a_crash_diagnosis(seren_day):
    from acme.diagnosis.deferred_cases import deferred_case_keys
    from acme.diagnosis.nightly import diagnose_chunk, plan_run
    from acme.diagnosis.retrieval import CaseStore

    lake = seren_day["lake"]
    job_id = seren_day["logged"][0]
    manual = plan_run(lake, [("seren", DAY)], run_id="crash", job_id=job_id)
    diagnose_chunk(lake, manual["plan"], 0)
    assert len(deferred_case_keys(lake)) == 1 and CaseStore(lake).read("seren") == []

    run_night(lake, "night-1")  # the rule decides every logged job; the chunks store every case once
    assert deferred_case_keys(lake) == []
    assert sorted(c["job_id"] for c in CaseStore(lake).read("seren")) == sorted(seren_day["logged"])
