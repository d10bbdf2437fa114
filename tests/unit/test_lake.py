"""Local lake: whole-object publishing, listing, locking."""

from __future__ import annotations

import os
import threading
import time

import pytest

from acme.lake import Lake, LakeLockTimeout


def test_a_failed_write_leaves_the_old_object_and_no_temporary_file(tmp_path, monkeypatch):
    lake = Lake(str(tmp_path))
    lake.write_bytes("jobs/part.bin", b"old")

    def crash(src, dst):
        raise OSError("disk gone")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="disk gone"):
        lake.write_bytes("jobs/part.bin", b"new")
    monkeypatch.undo()
    assert lake.read_bytes("jobs/part.bin") == b"old"
    assert sorted(p.name for p in (tmp_path / "jobs").iterdir()) == ["part.bin"]


def test_listing_hides_temporary_files_of_writers_in_flight(tmp_path):
    lake = Lake(str(tmp_path))
    lake.write_bytes("jobs/a.parquet", b"1")
    (tmp_path / "jobs" / "b.parquet.tmp-123").write_bytes(b"partial")
    assert lake.list("jobs") == ["jobs/a.parquet"]


def test_local_lock_serializes_writers_and_times_out(tmp_path):
    lake = Lake(str(tmp_path))
    order = []

    def second():
        with lake.lock("p", timeout_s=10):
            order.append("second")

    with lake.lock("p"):
        thread = threading.Thread(target=second)
        thread.start()
        time.sleep(0.3)
        order.append("first")
    thread.join(10)
    assert order == ["first", "second"]
    with lake.lock("q"), pytest.raises(LakeLockTimeout, match="held for over"), lake.lock("q", timeout_s=0.2):
        pass


def test_find_gives_sizes_open_streams_and_remove_tolerates_a_retry(tmp_path):
    import pyarrow as pa

    lake = Lake(str(tmp_path))
    lake.write_bytes("a/one.bin", b"12345")
    lake.write_parquet("a/b/rows.parquet", pa.table({"x": [1, 2, 3]}))
    found = lake.find("a")
    assert [item.key for item in found] == ["a/b/rows.parquet", "a/one.bin"]
    assert found[1].size == 5
    assert lake.list("a") == ["a/b/rows.parquet", "a/one.bin"]
    assert lake.num_rows("a/b/rows.parquet") == 3
    with lake.open("a/one.bin") as handle:
        assert handle.read() == b"12345"
    assert lake.remove("a/one.bin") is True
    assert lake.remove("a/one.bin") is False
    assert lake.list("a") == ["a/b/rows.parquet"]
    assert lake.find("nothing/here") == []


def test_urls_map_back_to_keys_only_inside_the_lake(tmp_path):
    lake = Lake(str(tmp_path / "lake"))
    url = lake.url("jobs/cluster=seren/date=2023-07-01/jobs.parquet")
    assert lake.owns(url)
    assert lake.key_of(url) == "jobs/cluster=seren/date=2023-07-01/jobs.parquet"
    assert not lake.owns(str(tmp_path / "lake-other" / "x"))
    with pytest.raises(ValueError, match="is not in the lake"):
        lake.key_of(str(tmp_path / "elsewhere"))
    assert lake.duckdb_location("a/b") == lake.path("a/b")


def test_the_layout_partitions_by_cluster_and_day():
    from datetime import date

    from acme import lake_keys

    key = lake_keys.jobs_partition("seren", date(2023, 7, 1))
    assert key == "jobs/cluster=seren/date=2023-07-01/jobs.parquet"
    assert lake_keys.partition_values(key) == {"cluster": "seren", "date": "2023-07-01"}
    assert lake_keys.metric_samples("gpu_util", "kalos", "2023-07-02") == (
        "metrics/metric=gpu_util/cluster=kalos/date=2023-07-02/samples.parquet"
    )
    assert lake_keys.job_input_artifact("quarantine", "seren", None, "in.parquet") == (
        "quarantine/jobs/cluster=seren/date=undated/in.parquet"
    )
    assert lake_keys.diagnosis_message("seren", "2023-07-01", "../job 1").endswith(
        "/date=2023-07-01/_job_1.json"
    )
    assert lake_keys.staging("ingest_jobs", "manual__2023-07-01T00:00:00+00:00") == (
        "staging/ingest_jobs/manual__2023-07-01T00-00-00-00-00"
    )
    assert lake_keys.report("seren", "2023-07", root="") == "cluster=seren/period=2023-07"
