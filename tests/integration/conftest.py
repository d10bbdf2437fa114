"""Real services on loopback for the integration tests; each is stopped by the fixture that started it."""

from __future__ import annotations

import contextlib
import socket

import pytest


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def start_s3_server():
    """A moto S3 server (a real S3 HTTP API) on 127.0.0.1, with a bucket ``acme-lake``; stopped on exit."""
    import boto3
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    client = boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id="test",
        aws_secret_access_key="test",
        region_name="us-east-1",
    )
    client.create_bucket(Bucket="acme-lake")
    try:
        yield {"endpoint": endpoint, "client": client, "bucket": "acme-lake"}
    finally:
        server.stop()


@pytest.fixture(scope="session")
def s3_server():
    with start_s3_server() as server:
        yield server


@pytest.fixture
def s3_env(s3_server, monkeypatch):
    """Standard AWS environment pointing at the loopback server (what the command line reads)."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", s3_server["endpoint"])
    return s3_server
