"""The lake for a task: local by default; on S3 with the credentials of an Airflow connection."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from acme.lake import Lake


def task_lake() -> Lake:
    """Open ``ACME_LAKE_URI``; for ``s3://`` take key, secret and endpoint from ``ACME_AWS_CONN_ID``."""
    from acme import settings
    from acme.lake import open_lake

    project = settings.project()
    uri = project.lake_uri
    if not uri.startswith("s3://"):
        return open_lake(uri)
    from airflow.providers.amazon.aws.hooks.s3 import S3Hook

    hook = S3Hook(aws_conn_id=project.aws_conn_id)
    credentials = hook.get_credentials()
    client_kwargs = {}
    endpoint = hook.conn_config.endpoint_url
    if endpoint:
        client_kwargs["endpoint_url"] = endpoint
    if hook.conn_config.region_name:
        client_kwargs["region_name"] = hook.conn_config.region_name
    options = {
        "key": credentials.access_key,
        "secret": credentials.secret_key,
        "token": credentials.token,
        "client_kwargs": client_kwargs,
    }
    return open_lake(uri, {k: v for k, v in options.items() if v})
