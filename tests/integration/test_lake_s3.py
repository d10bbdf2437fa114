"""The lake on a real S3 API (moto server on loopback): same code as the local lake."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import threading
import time
import uuid

import pyarrow.parquet as pq
import pytest

from acme.jobs.ingest import JobInput
from acme.lake import LakeLockTimeout, open_lake

pytestmark = pytest.mark.integration


def keys(s3, prefix: str) -> list[str]:
    listing = s3["client"].list_objects_v2(Bucket=s3["bucket"], Prefix=prefix)
    return sorted(item["Key"] for item in listing.get("Contents", []))


def test_cli_ingests_into_s3_exactly_once(s3_env, shared_reference, tmp_path):
    prefix = f"run-{uuid.uuid4().hex[:8]}"
    sample = shared_reference / "acmetrace" / "samples" / "trace_seren_sample.csv"
    command = [sys.executable, "-m", "acme", "ingest-jobs", "--format", "acmetrace", "--cluster", "seren",
               "--input", str(sample), "--lake", f"s3://acme-lake/{prefix}"]  # fmt: skip
    first = subprocess.run(command, capture_output=True, text=True, check=True)
    summary = json.loads(first.stdout)
    partition = f"{prefix}/jobs/cluster=seren/date=2023-02-28/jobs.parquet"
    assert summary["partitions"] == [f"s3://acme-lake/{partition}"]
    input_key = JobInput("seren", "acmetrace", str(sample)).key
    report = f"{prefix}/validation/jobs/cluster=seren/date=2023-02-28/{input_key}.json"
    assert keys(s3_env, prefix) == [
        f"{prefix}/jobs/cluster=seren/date=2023-02-28/_validation.json",
        partition,
        report,
    ]
    validation = s3_env["client"].get_object(
        Bucket="acme-lake", Key=partition.replace("jobs.parquet", "_validation.json")
    )
    (entry,) = json.loads(validation["Body"].read())["inputs"].values()
    assert entry["report"] == f"s3://acme-lake/{report}" and entry["success"] is True
    body = s3_env["client"].get_object(Bucket="acme-lake", Key=partition)["Body"].read()
    table = pq.read_table(io.BytesIO(body))
    assert table.num_rows == 5 and len(set(table["job_id"].to_pylist())) == 5

    subprocess.run(command, capture_output=True, text=True, check=True)
    body_again = s3_env["client"].get_object(Bucket="acme-lake", Key=partition)["Body"].read()
    assert pq.read_table(io.BytesIO(body_again)).equals(table)
    assert not [k for k in keys(s3_env, prefix) if "_locks" in k], "locks are released"


def test_s3_lock_excludes_a_second_writer_and_releases(s3_env):
    lake = open_lake(f"s3://acme-lake/locks-{uuid.uuid4().hex[:8]}")
    order = []

    def second_writer():
        with lake.lock("partition-x", timeout_s=10):
            order.append("second")

    with lake.lock("partition-x"):
        thread = threading.Thread(target=second_writer)
        thread.start()
        time.sleep(0.5)
        order.append("first")
    thread.join(timeout=10)
    assert order == ["first", "second"]
    with pytest.raises(LakeLockTimeout), lake.lock("partition-y"), lake.lock("partition-y", timeout_s=0.5):
        pass


def test_s3_lock_left_by_a_killed_holder_is_taken_over_but_a_live_one_is_kept(s3_env):
    """A SIGKILLed worker leaves its lock object: the retry takes it over once it is stale. A live
    holder refreshes its lock, so a waiter never breaks it however long the holder works."""
    import json

    lake = open_lake(f"s3://acme-lake/locks-{uuid.uuid4().hex[:8]}")
    bucket, _, prefix = lake.root.partition("/")
    key = f"{prefix}/_locks/partition-z"
    dead = {"owner": "worker-1:4242:killed", "since": time.time() - 5}
    s3_env["client"].put_object(Bucket=bucket, Key=key, Body=json.dumps(dead).encode())
    started = time.monotonic()
    with lake.lock("partition-z", timeout_s=10, stale_after_s=2):
        took_over_after = time.monotonic() - started
    assert took_over_after < 2

    with lake.lock("partition-w", stale_after_s=1.0):
        time.sleep(2.5)  # well past stale_after_s: only the heartbeat keeps it ours
        with pytest.raises(LakeLockTimeout), lake.lock("partition-w", timeout_s=1.0, stale_after_s=1.0):
            pass
    with lake.lock("partition-w", timeout_s=2):  # released on exit
        pass
