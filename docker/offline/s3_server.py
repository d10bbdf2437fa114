"""A loopback S3 server in MinIO's place: moto's S3 API, its objects kept in a directory.

Takes MinIO's arguments, ``server DIR [--address [HOST]:PORT] [--console-address ...]`` (the
console is not served). moto holds objects in memory, so this loads DIR/<bucket>/<key> at start
and writes every bucket back to DIR every few seconds and on SIGTERM/SIGINT (`docker compose down`),
so the lake survives a restart as in MinIO's volume; only changed objects are written. The address it serves is written to
/tmp/s3-address for `mc ready local` (mc.py).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from pathlib import Path

import boto3
from moto.server import ThreadedMotoServer

ADDRESS_FILE = Path("/tmp/s3-address")
SYNC_SECONDS = 5.0


def _client(endpoint: str):  # noqa: ANN202
    return boto3.client(
        "s3", endpoint_url=endpoint, region_name="us-east-1",
        aws_access_key_id="s3", aws_secret_access_key="s3",
    )


def _load(s3, root: Path) -> dict[tuple[str, str], str]:
    """Puts every file of root/<bucket>/ into the server; returns {(bucket, key): ETag}."""
    written = {}
    for bucket_dir in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        s3.create_bucket(Bucket=bucket_dir.name)
        for path in sorted(p for p in bucket_dir.rglob("*") if p.is_file() and not p.name.startswith(".")):
            key = path.relative_to(bucket_dir).as_posix()
            written[(bucket_dir.name, key)] = s3.put_object(Bucket=bucket_dir.name, Key=key, Body=path.read_bytes())["ETag"]
    return written


def _dump(s3, root: Path, written: dict[tuple[str, str], str]) -> None:
    """Writes what changed since the last dump to root/<bucket>/<key> (a file written whole, then
    renamed into place) and removes the files of deleted objects."""
    present = {}
    for bucket in s3.list_buckets().get("Buckets", []):
        name = bucket["Name"]
        (root / name).mkdir(exist_ok=True)
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=name):
            for obj in page.get("Contents", []):
                present[(name, obj["Key"])] = obj["ETag"]
    for (name, key), etag in present.items():
        if written.get((name, key)) != etag:
            target = root / name / key
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_name(f".{target.name}.partial")
            partial.write_bytes(s3.get_object(Bucket=name, Key=key)["Body"].read())
            partial.replace(target)
    for name, key in set(written) - set(present):
        (root / name / key).unlink(missing_ok=True)
    written.clear()
    written.update(present)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="minio")
    parser.add_argument("command", choices=["server"])
    parser.add_argument("directory", type=Path)
    parser.add_argument("--address", default="127.0.0.1:9000")
    parser.add_argument("--console-address", default="")
    args = parser.parse_args(argv)
    host, _, port = args.address.rpartition(":")
    host = host or "127.0.0.1"
    args.directory.mkdir(parents=True, exist_ok=True)
    server = ThreadedMotoServer(ip_address=host, port=int(port))
    server.start()
    endpoint = f"http://{host}:{port}"
    s3 = _client(endpoint)
    written = _load(s3, args.directory)
    print(f"s3: moto on {endpoint}, {len(written)} objects loaded from {args.directory}", flush=True)
    ADDRESS_FILE.write_text(endpoint)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    while not stop.wait(SYNC_SECONDS):
        _dump(s3, args.directory, written)
    _dump(s3, args.directory, written)
    print(f"s3: {len(written)} objects kept in {args.directory}", flush=True)
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
