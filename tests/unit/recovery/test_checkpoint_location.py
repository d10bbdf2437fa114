"""Where a crashed job's checkpoints are: the run, the job record, the cluster configuration, the setting,
the default, in that order; a request that cannot be made still leaves an action log."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from acme.clusters import load_clusters
from acme.errors import ConfigError
from acme.lake import Lake
from acme.recovery.actions import ActionLog
from acme.recovery.checkpoint_location import checkpoint_location
from acme.recovery.recover import request_from_run

STARTED = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
PARAMS = {"cluster": "seren", "job_id": "8100", "nodes": ["gpu01", "gpu02"], "checkpoint_uri": ""}


def clusters(tmp_path: Path, seren_extra: str = "", kalos_extra: str = "") -> Path:
    path = tmp_path / "clusters.yaml"
    path.write_text(
        "clusters:\n"
        f"  seren:\n    jobs: {{format: acmetrace, input: x}}\n{seren_extra}"
        f"  kalos:\n    jobs: {{format: acmetrace, input: y}}\n{kalos_extra}"
    )
    return path


@pytest.fixture
def configured(tmp_path, monkeypatch) -> Path:
    path = clusters(tmp_path, seren_extra='    checkpoint_uri_pattern: "s3://seren-ckpt/{job_id}"\n')
    monkeypatch.setenv("ACME_CLUSTERS_FILE", str(path))
    monkeypatch.delenv("ACME_CHECKPOINT_URI_PATTERN", raising=False)
    return path


def test_the_run_or_job_record_comes_first(configured):
    found = checkpoint_location("seren", "8100", "s3://lake", given=" s3://from-record/8100 ")
    assert (found.uri, found.source) == ("s3://from-record/8100", "the checkpoint_uri Param")


def test_then_the_clusters_entry(configured):
    found = checkpoint_location("seren", "8100", "s3://lake")
    assert found.uri == "s3://seren-ckpt/8100"
    assert found.source == f"checkpoint_uri_pattern of cluster seren in {configured}"


def test_a_cluster_without_an_entry_takes_the_setting_then_the_default(configured, monkeypatch):
    found = checkpoint_location("kalos", "77", "s3://lake/")
    assert found.uri == "s3://lake/checkpoints/cluster=kalos/job=77"
    assert found.source.startswith("ACME_CHECKPOINT_URI_PATTERN (unset: its default")
    monkeypatch.setenv("ACME_CHECKPOINT_URI_PATTERN", "/ckpt/{cluster}/{job_id}")
    found = checkpoint_location("kalos", "77", "s3://lake/")
    assert (found.uri, found.source) == ("/ckpt/kalos/77", "ACME_CHECKPOINT_URI_PATTERN")
    # A cluster the configuration does not list (a recovery started by hand) also takes the setting.
    assert checkpoint_location("other", "1", "s3://lake").uri == "/ckpt/other/1"


def test_the_clusters_entry_is_checked_when_the_configuration_loads(tmp_path):
    path = clusters(tmp_path, seren_extra='    checkpoint_uri_pattern: "s3://c/{user}/{job_id}"\n')
    with pytest.raises(
        ConfigError, match=r"cluster 'seren': checkpoint_uri_pattern: unknown placeholder \{user\}"
    ):
        load_clusters(path)
    path = clusters(tmp_path, kalos_extra="    checkpoint_uri_pattern: 3\n")
    with pytest.raises(ConfigError, match="cluster 'kalos': checkpoint_uri_pattern: must be a non-empty"):
        load_clusters(path)


def test_a_request_takes_the_clusters_location_and_names_it(configured, tmp_path):
    lake = Lake(str(tmp_path / "lake"))
    request = request_from_run(lake, PARAMS, "manual__1", STARTED)
    assert request.checkpoint_uri == "s3://seren-ckpt/8100"
    assert request.checkpoint_from == f"checkpoint_uri_pattern of cluster seren in {configured}"
    assert request.recovery_id == "manual__1"


def test_a_request_that_cannot_be_made_is_still_in_the_action_log(tmp_path, monkeypatch):
    monkeypatch.setenv("ACME_CLUSTERS_FILE", str(clusters(tmp_path)))
    monkeypatch.setenv("ACME_CHECKPOINT_URI_PATTERN", "s3://ckpt/{user}")
    lake = Lake(str(tmp_path / "lake"))
    params = {**PARAMS, "recovery_id": "diag-seren-8100"}
    with pytest.raises(ConfigError, match="ACME_CHECKPOINT_URI_PATTERN: unknown placeholder"):
        request_from_run(lake, params, "manual__1", STARTED)
    (record,) = ActionLog(lake, "seren", "8100", "diag-seren-8100").records()
    assert record["step"] == "request" and record["status"] == "failed"
    assert "ACME_CHECKPOINT_URI_PATTERN: unknown placeholder {user}" in record["error"]
    assert record["inputs"]["params"]["job_id"] == "8100"


def test_a_request_without_a_safe_job_id_has_no_log_to_write_to(tmp_path, monkeypatch):
    monkeypatch.setenv("ACME_CLUSTERS_FILE", str(clusters(tmp_path)))
    lake = Lake(str(tmp_path / "lake"))
    with pytest.raises(Exception, match="job_id"):
        request_from_run(lake, {**PARAMS, "job_id": "../x"}, "manual__1", STARTED)
    assert list((tmp_path / "lake").rglob("actions.jsonl")) == []
