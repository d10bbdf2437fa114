"""The recovery defaults a fresh install meets: one dry-run setting, the checkpoint location pattern."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from acme.errors import ConfigError, InputError
from acme.recovery.checkpoint_location import checkpoint_location
from acme.recovery.recover import RecoveryRequest
from acme.settings import recovery


def dry_run_default() -> bool:
    return recovery().dry_run


def checkpoint_uri_for(cluster: str, job_id: str, lake_uri: str) -> str:
    return checkpoint_location(cluster, job_id, lake_uri).uri


STARTED = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
PARAMS = {"cluster": "seren", "job_id": "8100", "nodes": ["gpu01", "gpu02"], "checkpoint_uri": ""}


@pytest.mark.parametrize(
    ("value", "expected"), [(None, True), ("true", True), ("false", False), ("0", False)]
)
def test_one_setting_decides_the_dry_run_default(monkeypatch, value, expected):
    from acme.diagnosis.routing import recovery_dry_run

    if value is None:
        monkeypatch.delenv("ACME_RECOVERY_DRY_RUN", raising=False)
    else:
        monkeypatch.setenv("ACME_RECOVERY_DRY_RUN", value)
    assert dry_run_default() is expected and recovery_dry_run() is expected


def test_a_misspelt_dry_run_setting_is_refused_not_read_as_live(monkeypatch):
    monkeypatch.setenv("ACME_RECOVERY_DRY_RUN", "flase")
    with pytest.raises(ConfigError, match="ACME_RECOVERY_DRY_RUN='flase'"):
        dry_run_default()


def test_the_checkpoint_pattern_has_a_default_under_the_lake_and_can_be_set(monkeypatch):
    monkeypatch.delenv("ACME_CHECKPOINT_URI_PATTERN", raising=False)
    assert checkpoint_uri_for("seren", "8100", "s3://lake/") == "s3://lake/checkpoints/cluster=seren/job=8100"
    monkeypatch.setenv("ACME_CHECKPOINT_URI_PATTERN", "s3://ckpt/{cluster}/{job_id}")
    assert checkpoint_uri_for("seren", "8100", "s3://lake") == "s3://ckpt/seren/8100"
    monkeypatch.setenv("ACME_CHECKPOINT_URI_PATTERN", "s3://ckpt/{user}/{job_id}")
    with pytest.raises(ConfigError, match=r"unknown placeholder \{user\}"):
        checkpoint_uri_for("seren", "8100", "s3://lake")


def test_an_empty_checkpoint_param_takes_the_pattern_and_says_where_it_came_from():
    request = RecoveryRequest.from_params(PARAMS, "r1", "run", STARTED, default_checkpoint="/lake/ckpt/8100")
    assert (request.checkpoint_uri, request.checkpoint_from) == (
        "/lake/ckpt/8100",
        "ACME_CHECKPOINT_URI_PATTERN",
    )
    given = RecoveryRequest.from_params(
        {**PARAMS, "checkpoint_uri": "s3://c/8100"}, "r1", "run", STARTED, "/x"
    )
    assert (given.checkpoint_uri, given.checkpoint_from) == ("s3://c/8100", "the checkpoint_uri Param")
    with pytest.raises(InputError, match="checkpoint_uri: missing"):
        RecoveryRequest.from_params(PARAMS, "r1", "run", STARTED)
