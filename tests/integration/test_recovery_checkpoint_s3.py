"""recover_training finds a checkpoint kept on the lake's S3 service with the lake's own credentials.

Inside Airflow the lake's key, secret and endpoint come from its connection (``task_lake``), not from
the environment: the compose deployment has no AWS environment, so a checkpoint store opened from
the environment alone found no S3 endpoint (the compose tier's first recovery). A real S3 HTTP API
on loopback (moto) holds the checkpoints; the test process has no AWS environment at all.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

pytestmark = pytest.mark.integration

PREFIX = "lake/checkpoints/cluster=seren/job=ckpt-on-s3"


@pytest.fixture
def no_aws_environment(monkeypatch):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL",
                 "AWS_ENDPOINT_URL_S3", "AWS_PROFILE", "AWS_DEFAULT_REGION"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no credentials from a metadata address
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")


def test_the_checkpoint_on_the_lakes_s3_is_read_with_the_lakes_credentials(
    s3_server, no_aws_environment, tmp_path
):
    from acme.lake import Lake
    from acme.recovery.recover import choose_restart_checkpoint
    from acme.recovery.request import RecoveryRequest
    from acme.recovery.synth_checkpoints import write_checkpoint

    for step in (100, 200):
        folder = write_checkpoint(tmp_path, step)
        for path in folder.rglob("*"):
            if path.is_file():
                key = f"{PREFIX}/{path.relative_to(tmp_path).as_posix()}"
                s3_server["client"].put_object(Bucket="acme-lake", Key=key, Body=path.read_bytes())
    # The lake as a task opens it: the connection's key, secret and endpoint as storage options.
    lake = Lake("s3://acme-lake/lake", {"key": "test", "secret": "test",
                "client_kwargs": {"endpoint_url": s3_server["endpoint"], "region_name": "us-east-1"}})  # fmt: skip
    params = {"cluster": "seren", "job_id": "ckpt-on-s3", "nodes": ["seren-n000", "seren-n001"],
              "checkpoint_uri": f"s3://acme-lake/{PREFIX}", "dry_run": True}  # fmt: skip
    request = RecoveryRequest.from_params(
        params, "ckpt-on-s3-1", "manual__ckpt", datetime(2026, 12, 2, tzinfo=UTC)
    )

    choice = choose_restart_checkpoint(lake, request)

    assert choice["step"] == 200, choice
    assert choice["path"].endswith("step_200"), choice
