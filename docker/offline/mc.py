"""The MinIO client commands docker-compose.yaml runs, against the loopback S3 server (s3_server.py).

``mc ready local``, ``mc alias set NAME URL KEY SECRET``, ``mc mb [--ignore-existing] ALIAS/BUCKET``;
``mc admin ...`` succeeds and says why it has nothing to do: moto's server takes every key, so
there is no user to add or policy to attach.
"""

from __future__ import annotations

import json
import sys
import urllib.request
from pathlib import Path

ALIASES = Path.home() / ".mc-aliases.json"
ADDRESS_FILE = Path("/tmp/s3-address")


def _aliases() -> dict[str, dict[str, str]]:
    return json.loads(ALIASES.read_text()) if ALIASES.exists() else {}


def _ready() -> int:
    try:
        endpoint = ADDRESS_FILE.read_text().strip()
        with urllib.request.urlopen(f"{endpoint}/", timeout=3) as response:  # noqa: S310
            return 0 if response.status == 200 else 1
    except OSError as error:
        print(f"mc ready: the S3 server does not answer: {error}", file=sys.stderr)
        return 1


def _make_bucket(args: list[str]) -> int:
    import boto3

    ignore = "--ignore-existing" in args
    alias, _, bucket = next(a for a in args if not a.startswith("-")).partition("/")
    conf = _aliases()[alias]
    s3 = boto3.client("s3", endpoint_url=conf["url"], region_name="us-east-1",
                      aws_access_key_id=conf["key"], aws_secret_access_key=conf["secret"])
    try:
        s3.create_bucket(Bucket=bucket)
    except s3.exceptions.BucketAlreadyOwnedByYou:
        if not ignore:
            raise
    print(f"Bucket created successfully `{alias}/{bucket}`.")
    return 0


def main(argv: list[str]) -> int:
    match argv:
        case ["ready", _]:
            return _ready()
        case ["alias", "set", name, url, key, secret]:
            ALIASES.write_text(json.dumps({**_aliases(), name: {"url": url, "key": key, "secret": secret}}))
            print(f"Added `{name}` successfully.")
            return 0
        case ["mb", *rest]:
            return _make_bucket(rest)
        case ["admin", *rest]:
            print(f"mc admin {' '.join(rest[:2])}: the loopback S3 server takes every key; nothing to do")
            return 0
    print(f"mc (loopback S3 stand-in): unsupported command: {' '.join(argv)}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
