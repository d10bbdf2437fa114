"""The lake survives object-store faults: 500/503 answers, connection resets, lost answers, slow answers.

A fault-injecting proxy (``tests/fakes/s3_fault_proxy.py``) sits between the lake's real clients (s3fs for
objects, boto3 for the lock) and a real S3 API (moto server on loopback). Each test compares what a faulty
run left in the lake with a clean run of the same input: same objects, same rows, no duplicates, no
leftover lock or staging objects. Retries are the clients' default policy (botocore "legacy" mode, 5
attempts, plus s3fs's own retry loop); nothing here configures them.
"""

from __future__ import annotations

import io
import json
import threading
import time
import uuid
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from acme.jobs.ingest import JobInput, ingest_job_file
from acme.lake import LakeLockTimeout, open_lake
from tests.fakes.s3_fault_proxy import S3FaultProxy

pytestmark = pytest.mark.integration

SAMPLE = Path(__file__).resolve().parents[2] / "include/sample_data/jobs/kalos/2023-07-01.csv"
PARTITION = "jobs/cluster=kalos/date=2023-07-01"


@pytest.fixture
def proxy(s3_env, monkeypatch):
    """The proxy in front of the session's moto server; the lake's clients go through it."""
    with S3FaultProxy(s3_env["endpoint"]) as running:
        monkeypatch.setenv("AWS_ENDPOINT_URL_S3", running.endpoint)
        yield running


def new_prefix(label: str) -> str:
    return f"{label}-{uuid.uuid4().hex[:8]}"


def ingest(prefix: str) -> dict:
    lake = open_lake(f"s3://acme-lake/{prefix}")
    return ingest_job_file(lake, JobInput("kalos", "acmetrace", str(SAMPLE)), SAMPLE)


def lake_state(s3, prefix: str) -> dict:
    """What a prefix holds, read straight from the server (never through the proxy)."""
    client, bucket = s3["client"], s3["bucket"]
    listing = client.list_objects_v2(Bucket=bucket, Prefix=f"{prefix}/")
    keys = sorted(item["Key"][len(prefix) + 1 :] for item in listing.get("Contents", []))
    state: dict = {"keys": keys, "jobs": None, "validation": None}
    if f"{PARTITION}/jobs.parquet" in keys:
        body = client.get_object(Bucket=bucket, Key=f"{prefix}/{PARTITION}/jobs.parquet")["Body"].read()
        state["jobs"] = pq.read_table(io.BytesIO(body))
    if f"{PARTITION}/_validation.json" in keys:
        body = client.get_object(Bucket=bucket, Key=f"{prefix}/{PARTITION}/_validation.json")["Body"].read()
        document = json.loads(body)
        (entry,) = document["inputs"].values()
        state["validation"] = (document["partition_rows"], entry["rows_published_here"], entry["success"])
    return state


def assert_same_as_clean(state: dict, clean: dict) -> None:
    assert state["keys"] == clean["keys"], "same objects, no leftover lock/staging/temporary objects"
    assert not [k for k in state["keys"] if "_locks" in k or k.startswith("staging/")]
    jobs = state["jobs"]
    assert jobs.num_rows == clean["jobs"].num_rows
    assert len(set(jobs["job_id"].to_pylist())) == jobs.num_rows, "no duplicate job ids"
    assert jobs.equals(clean["jobs"]), "the very same rows as the clean run"
    assert state["validation"] == clean["validation"]


@pytest.fixture
def clean(proxy, s3_env):
    """A clean ingest of the sample day (no faults) to compare every faulty run with."""
    prefix = new_prefix("clean")
    summary = ingest(prefix)
    state = lake_state(s3_env, prefix)
    assert summary["rows"] == state["jobs"].num_rows > 400 and state["validation"][2] is True
    state["requests"] = sum(1 for event in proxy.events if prefix in event.path)
    return state


def test_ingest_under_random_500_503_and_resets_equals_a_clean_run(proxy, clean, s3_env, record_property):
    """Seeded random faults on ~30% of requests: each run either succeeds with exactly the clean rows, or
    fails loudly leaving no partial partition; a re-run without faults then equals the clean run."""
    outcomes = []
    for seed in (1, 2, 3, 4, 5):
        prefix = new_prefix(f"faulty-{seed}")
        before = len(proxy.events)
        proxy.fail_randomly(0.3, seed=seed, faults=("500", "503", "reset"))
        # A lost answer (the write happened, the client can't know) on data objects too; on the lock
        # object it is test_lock_put_whose_answer_is_lost_is_recognised_as_ours below.
        proxy.fail("reset_after", method="PUT", path=r"/jobs\.parquet$", times=1)
        try:
            ingest(prefix)
            outcome = "ok"
        except Exception as exc:
            outcome = f"failed: {type(exc).__name__}: {exc}"
            assert str(exc), "the failure says what went wrong"
        proxy.clear()
        events = proxy.events[before:]
        faults = {a: sum(1 for e in events if e.action == a) for a in ("500", "503", "reset", "reset_after")}
        state = lake_state(s3_env, prefix)
        if outcome == "ok":
            assert_same_as_clean(state, clean)
        elif state["jobs"] is not None:  # one PUT publishes the partition: all of it or nothing
            assert state["jobs"].equals(clean["jobs"])
        ingest(prefix)  # the re-run (what Airflow's retry does), without faults
        assert_same_as_clean(lake_state(s3_env, prefix), clean)
        outcomes.append({"seed": seed, "requests": len(events), "faults": faults, "outcome": outcome})
    print("\nrandom faults:", json.dumps(outcomes, indent=1))
    record_property("s3_fault_outcomes", json.dumps(outcomes))
    injected = sum(sum(o["faults"].values()) for o in outcomes)
    requests = sum(o["requests"] for o in outcomes)
    assert injected >= 0.15 * requests, f"the script really faulted requests ({injected} of {requests})"


def test_counted_faults_on_the_partition_put_are_retried_without_duplicates(proxy, clean, s3_env):
    """ "Fail the next 2 PUTs of jobs.parquet" (503 SlowDown, then 500), and lose the answer of the next
    one: the client retries, the last write wins, the partition holds each job once."""
    prefix = new_prefix("counted")
    proxy.fail("503", method="PUT", path=rf"^/acme-lake/{prefix}/jobs/.*jobs\.parquet$", times=1)
    proxy.fail("500", method="PUT", path=rf"^/acme-lake/{prefix}/jobs/.*jobs\.parquet$", times=1)
    proxy.fail("reset_after", method="PUT", path=rf"^/acme-lake/{prefix}/jobs/.*jobs\.parquet$", times=1)
    ingest(prefix)
    puts = [
        e for e in proxy.events if e.method == "PUT" and e.path.endswith("jobs.parquet") and prefix in e.path
    ]
    assert [e.action for e in puts] == ["503", "500", "reset_after", "forward"]
    assert_same_as_clean(lake_state(s3_env, prefix), clean)


def test_a_truncated_read_of_the_existing_partition_does_not_lose_rows(proxy, clean, s3_env):
    """The re-run merges into the partition it reads back: an answer cut mid-body (full Content-Length,
    half the bytes, reset) must be retried, never merged from a part of the partition."""
    prefix = new_prefix("truncated")
    ingest(prefix)
    proxy.fail("truncate", method="GET", path=rf"^/acme-lake/{prefix}/jobs/.*jobs\.parquet", times=2)
    ingest(prefix)
    truncated = [e for e in proxy.events if e.action == "truncate" and prefix in e.path]
    assert len(truncated) == 2, "the partition's reads really were cut"
    assert_same_as_clean(lake_state(s3_env, prefix), clean)


def test_a_put_failing_past_every_retry_fails_loudly_and_publishes_nothing(proxy, clean, s3_env):
    """503 SlowDown on every attempt at jobs.parquet: the ingest fails with the S3 error, the partition is
    not visible at all, the lock is released; the re-run equals the clean run.

    s3fs retries SlowDown 5 times around botocore's own 5 attempts (25 PUTs, ~40 s of back-off with the
    defaults); botocore's standard ``retries`` config (2 attempts) keeps this test short: 5 x 2 PUTs.
    """
    prefix = new_prefix("exhausted")
    proxy.fail("503", method="PUT", path=rf"^/acme-lake/{prefix}/jobs/.*jobs\.parquet$", times=1000)
    options = {
        "client_kwargs": {"endpoint_url": proxy.endpoint},
        "config_kwargs": {"retries": {"total_max_attempts": 2, "mode": "legacy"}},
    }
    with pytest.raises(Exception) as failure:
        lake = open_lake(f"s3://acme-lake/{prefix}", storage_options=options)
        ingest_job_file(lake, JobInput("kalos", "acmetrace", str(SAMPLE)), SAMPLE)
    proxy.clear()
    attempts = [e for e in proxy.events if e.action == "503" and prefix in e.path]
    print(f"\nexhausted after {len(attempts)} attempts: {type(failure.value).__name__}: {failure.value}")
    assert "SlowDown" in str(failure.value) or "reduce your request rate" in str(failure.value)
    assert f"s3://acme-lake/{prefix}/jobs/" in str(failure.value), "the error names the object"
    assert len(attempts) == 10, "s3fs's 5 tries, each of botocore's 2 attempts"
    state = lake_state(s3_env, prefix)
    assert state["jobs"] is None and not [k for k in state["keys"] if k.startswith("jobs/") or "_locks" in k]
    ingest(prefix)
    assert_same_as_clean(lake_state(s3_env, prefix), clean)


def test_s3_lock_conditional_put_answered_503_then_ok_stays_exclusive(proxy, s3_env):
    lake = open_lake(f"s3://acme-lake/{new_prefix('lock503')}")
    conditional = ("If-None-Match", "*")
    proxy.fail("503", method="PUT", path=r"/_locks/part$", header=conditional, times=2)
    second: list[str] = []

    def second_writer():
        try:
            with lake.lock("part", timeout_s=1.0):
                second.append("acquired")
        except LakeLockTimeout:
            second.append("timed out")

    with lake.lock("part", timeout_s=10):
        attempts = [e for e in proxy.events if e.method == "PUT" and e.path.endswith("/_locks/part")]
        assert [e.action for e in attempts] == ["503", "503", "forward"] and attempts[-1].status == 200
        thread = threading.Thread(target=second_writer)
        thread.start()
        thread.join(timeout=10)
    assert second == ["timed out"], "the lock taken after two 503s excludes a second writer"
    with lake.lock("part", timeout_s=2):  # released on exit, despite the faults on the way in
        pass


def test_lock_put_whose_answer_is_lost_is_recognised_as_ours(proxy, s3_env):
    """The conditional PUT creates the lock but its answer is lost; botocore's retry gets 412 from our own
    lock, which the lake recognises by its owner id (it used to wait 60 s for its own lock to go stale)."""
    lake = open_lake(f"s3://acme-lake/{new_prefix('lostlock')}")
    proxy.fail("reset_after", method="PUT", path=r"/_locks/part$", header=("If-None-Match", "*"), times=1)
    started = time.monotonic()
    with lake.lock("part", timeout_s=3.0):
        acquired_after = time.monotonic() - started
    assert acquired_after < 2.0
    assert [e.action for e in proxy.events if e.path.endswith("/_locks/part")][:2] == [
        "reset_after",
        "forward",
    ]


def test_slow_answers_below_the_client_timeout_only_slow_the_ingest(proxy, clean, s3_env):
    prefix = new_prefix("slow")
    delay_s = 0.4
    proxy.fail("delay", path=rf"^/acme-lake/{prefix}/", times=1000, delay_s=delay_s)
    proxy.fail("delay", path=rf"^/acme-lake\?.*prefix={prefix}", times=1000, delay_s=delay_s)
    started = time.monotonic()
    ingest(prefix)
    elapsed = time.monotonic() - started
    delayed = [e for e in proxy.events if e.action == "delay"]
    assert all(e.status in (200, 204, 404) for e in delayed)
    assert len(delayed) == clean["requests"], "every request was slow, none timed out and was retried"
    assert elapsed >= len(delayed) * delay_s * 0.9, "the answers really were slow"
    assert_same_as_clean(lake_state(s3_env, prefix), clean)
