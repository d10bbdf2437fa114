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
