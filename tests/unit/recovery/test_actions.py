"""The action log and the one-recovery-per-job marker, on a local lake."""

from __future__ import annotations

import pytest

from acme.errors import InputError
from acme.lake import Lake
from acme.recovery.actions import (
    ActionLog,
    RecoveryInProgressError,
    acquire_job,
    recovery_id_from_run,
    release_job,
)


@pytest.fixture
def lake(tmp_path) -> Lake:
    return Lake(str(tmp_path / "lake"))


def test_steps_are_recorded_with_times_status_and_failures(lake):
    log = ActionLog(lake, "seren", "job-1", "r1")
    with log.step("cordon", {"node": "n1"}, dry_run=False, idempotency_key="cordon:n1") as result:
        result["patched"] = True
    with pytest.raises(RuntimeError), log.step("restart", {}, dry_run=False, idempotency_key="restart"):
        raise RuntimeError("API down")
    with log.step("cordon", {"node": "n2"}, dry_run=True, idempotency_key="cordon:n2"):
        pass
    first, failed, planned = log.records()
    assert first["status"] == "done" and first["result"] == {"patched": True}
    assert first["started_at"] <= first["ended_at"] and first["seconds"] >= 0
    assert failed["status"] == "failed" and failed["error"] == "RuntimeError: API down"
    assert planned["status"] == "planned" and planned["dry_run"] is True
    assert log.done("cordon:n1") is not None
    assert log.done("restart") is None and log.done("cordon:n2") is None  # failed and dry-run never count
    assert log.key == "recovery/cluster=seren/job=job-1/r1/actions.jsonl"


def test_a_corrupt_action_log_names_its_line(lake):
    log = ActionLog(lake, "seren", "job-1", "r1")
    lake.write_bytes(log.key, b'{"step": "open"}\nnot json\n')
    with pytest.raises(InputError, match=r"actions.jsonl:2: not a JSON line"):
        log.records()


def test_one_recovery_per_job_until_released_or_stale(lake):
    acquire_job(lake, "seren", "job-1", "r1", "run-1", ttl_s=3600)
    assert acquire_job(lake, "seren", "job-1", "r1", "run-1", ttl_s=3600)["recovery_id"] == "r1"  # re-acquire
    with pytest.raises(RecoveryInProgressError, match="recovery r1 .run run-1. has been working on it"):
        acquire_job(lake, "seren", "job-1", "r2", "run-2", ttl_s=3600)
    acquire_job(lake, "seren", "job-2", "r2", "run-2", ttl_s=3600)  # other jobs are free
    assert not release_job(lake, "seren", "job-1", "r2")  # only the holder releases
    assert release_job(lake, "seren", "job-1", "r1")
    acquire_job(lake, "seren", "job-1", "r2", "run-2", ttl_s=3600)
    assert acquire_job(lake, "seren", "job-1", "r3", "run-3", ttl_s=0)["recovery_id"] == "r3"  # stale marker


@pytest.mark.parametrize("bad", ["../x", "a/b", "", "x" * 200])
def test_unsafe_names_never_reach_a_lake_path(lake, bad):
    with pytest.raises(InputError):
        ActionLog(lake, "seren", bad, "r1")


def test_recovery_ids_from_run_ids_are_lake_safe():
    assert recovery_id_from_run("manual__2026-11-29T14:00:00+00:00") == "manual__2026-11-29T14-00-00-00-00"
