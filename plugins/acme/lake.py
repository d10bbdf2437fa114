"""The lake: a local folder by default, an S3 prefix when configured, through the same code.

Where each kind of object lives is :mod:`acme.lake_keys`; callers read, write, list and remove
through :class:`Lake`, never through its filesystem.

Every object is published whole: locally written to a hidden temporary name and renamed over the
target (``os.replace`` is atomic on POSIX; the next write of the object removes the temporary file
a killed writer left); on S3 one PUT (readers see the old or the new object, never a part).
Read-modify-write of a partition happens under a lock: ``flock`` locally, a conditional PUT
(``If-None-Match: *``) of a lock object on S3.
"""

from __future__ import annotations

import builtins
import contextlib
import io
import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, BinaryIO

from acme.errors import AcmeError, ConfigError

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    import pyarrow as pa


class LakeLockTimeout(AcmeError):
    """Another writer held a partition lock for longer than we were willing to wait."""


class LakeStorageError(AcmeError):
    """The object store failed on an object after the client's retries (the message names it)."""


@dataclass(frozen=True)
class LakeObject:
    """One stored object: its key, size in bytes and when it was last written (seconds since the epoch;
    0 when the store does not say)."""

    key: str
    size: int
    modified: float = 0.0


class Lake:
    """Byte- and Parquet-level access to the lake rooted at ``uri``."""

    def __init__(self, uri: str, storage_options: dict[str, Any] | None = None):
        import fsspec

        if not uri:
            raise ConfigError("lake URI is empty (set ACME_LAKE_URI)")
        self.uri = uri.rstrip("/")
        self.storage_options = dict(storage_options or {})
        self.fs, self.root = fsspec.core.url_to_fs(self.uri, **self.storage_options)
        self.is_local = self.fs.protocol in ("file", "local") or "file" in self.fs.protocol
        if self.is_local:
            os.makedirs(self.root, exist_ok=True)

    def __repr__(self) -> str:
        return f"Lake({self.uri!r})"

    # --- addressing -----------------------------------------------------------------
    def path(self, key: str) -> str:
        """Filesystem path (for ``self.fs``) of a key relative to the lake root."""
        return f"{self.root}/{key.lstrip('/')}"

    def url(self, key: str) -> str:
        """Full URL of a key, as shown to people and other tools."""
        return f"{self.uri}/{key.lstrip('/')}"

    # --- reading ----------------------------------------------------------------------
    def exists(self, key: str) -> bool:
        return self.fs.exists(self.path(key))

    def read_bytes(self, key: str) -> bytes:
        with self._naming(key, "read"):
            return self.fs.cat_file(self.path(key))

    @contextlib.contextmanager
    def _naming(self, key: str, action: str) -> Iterator[None]:
        """Storage errors left after the client's retries name the object (``OSError`` from s3fs does not)."""
        try:
            yield
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise LakeStorageError(f"cannot {action} {self.url(key)}: {exc}") from exc

    def read_json(self, key: str, default: Any = None) -> Any:
        if not self.exists(key):
            return default
        return json.loads(self.read_bytes(key))

    def read_parquet(self, key: str) -> pa.Table:
        import io

        import pyarrow.parquet as pq

        # One GET of the whole object: on S3, ranged reads of an object that a writer replaces meanwhile
        # fail (FileExpired: the ETag changed), and every lake object is replaced whole anyway.
        return pq.read_table(io.BytesIO(self.read_bytes(key)))

    def open(self, key: str) -> BinaryIO:
        """A binary stream of the object (for readers that need not hold it whole); close it after use."""
        with self._naming(key, "open"):
            return self.fs.open(self.path(key), "rb")

    def num_rows(self, key: str) -> int:
        """Rows of a Parquet object, from its footer only."""
        import pyarrow.parquet as pq

        with self.open(key) as handle:
            return pq.ParquetFile(handle).metadata.num_rows

    def list(self, prefix: str) -> list[str]:
        """Keys of all objects under ``prefix``, sorted."""
        return [item.key for item in self.find(prefix)]

    def find(self, prefix: str) -> builtins.list[LakeObject]:
        """Every object under ``prefix`` with its size, sorted by key, from one listing of the store."""
        base = self.path(prefix)
        if not self.fs.exists(base):
            return []
        root = self.root.rstrip("/") + "/"
        found = []
        for path, info in self.fs.find(base, detail=True).items():
            key = path[len(root) :] if path.startswith(root) else path
            if ".tmp-" not in key:
                found.append(LakeObject(key, int(info.get("size") or 0), _modified_s(info)))
        return sorted(found, key=lambda item: item.key)

    def owns(self, url: str) -> bool:
        """Whether ``url`` (a location as :meth:`url` gives it) lies in this lake."""
        return url.startswith(self.uri + "/")

    def key_of(self, url: str) -> str:
        """The key of a URL inside this lake (see :meth:`owns`)."""
        if not self.owns(url):
            raise ValueError(f"{url} is not in the lake {self.uri}")
        return url[len(self.uri) + 1 :]

    def duckdb_location(self, key: str) -> str:
        """What DuckDB opens for a key: a local path, or a URL of the filesystem :meth:`attach_to_duckdb`
        registers."""
        if self.is_local:
            return self.path(key)
        protocol = self.fs.protocol
        protocol = protocol[0] if isinstance(protocol, tuple | list) else protocol
        return f"{protocol}://{self.path(key)}"

    def attach_to_duckdb(self, con: Any) -> None:
        """Let a DuckDB connection read this lake's objects (their :meth:`duckdb_location`)."""
        if not self.is_local:
            con.register_filesystem(self.fs)

    # --- writing (every write publishes a whole object) -------------------------------
    def write_bytes(self, key: str, data: bytes) -> str:
        target = self.path(key)
        if self.is_local:
            folder, name = os.path.split(target)
            os.makedirs(folder, exist_ok=True)
            _remove_orphaned_temporaries(folder, name)
            temporary = os.path.join(folder, f"{_temporary_prefix(name)}{os.getpid()}-{uuid.uuid4().hex}")
            try:
                with open(temporary, "wb") as handle:
                    handle.write(data)
                    handle.flush()
                    os.fsync(handle.fileno())
                os.replace(temporary, target)
            finally:
                if os.path.exists(temporary):
                    os.unlink(temporary)
        else:
            with self._naming(key, "write"):
                self.fs.pipe_file(target, data)
        return self.url(key)

    def write_json(self, key: str, document: Any) -> str:
        text = json.dumps(document, indent=2, sort_keys=True, default=str)
        return self.write_bytes(key, text.encode())

    def write_parquet(self, key: str, table: pa.Table) -> str:
        import pyarrow.parquet as pq

        buffer = io.BytesIO()
        pq.write_table(table, buffer, compression="zstd", write_statistics=True)
        return self.write_bytes(key, buffer.getvalue())

    def upload_file(self, local_path: str, key: str) -> str:
        with open(local_path, "rb") as handle:
            return self.write_bytes(key, handle.read())

    def delete_prefix(self, prefix: str) -> None:
        """Remove every object under ``prefix`` (nothing when there is none)."""
        base = self.path(prefix)
        if self.fs.exists(base):
            self.fs.rm(base, recursive=True)

    def remove(self, key: str) -> bool:
        """Remove one object; False when it was not there (a retried removal is not an error)."""
        with self._naming(key, "remove"):
            try:
                self.fs.rm(self.path(key))
            except FileNotFoundError:
                return False
        return True

    @contextlib.contextmanager
    def local_file(self, key: str) -> Iterator[str]:
        """A local filesystem path holding the object (the object itself when local)."""
        if self.is_local:
            yield self.path(key)
            return
        import tempfile

        suffix = os.path.splitext(key)[1]
        with tempfile.NamedTemporaryFile(suffix=suffix) as handle:
            self.fs.get_file(self.path(key), handle.name)
            yield handle.name

    # --- locking ------------------------------------------------------------------------
    @contextlib.contextmanager
    def lock(self, name: str, timeout_s: float = 300.0, stale_after_s: float = 60.0) -> Iterator[None]:
        """Exclusive lock named ``name`` shared by every process using this lake.

        Locally ``flock``: the kernel releases it when the holder dies. On S3 a lock object, which a
        killed holder (SIGKILLed worker) leaves behind: the live holder refreshes it every
        ``stale_after_s / 4`` seconds, so a lock not refreshed for ``stale_after_s`` belongs to a dead
        process and a waiter may take it over -- well within ``timeout_s``, so the task's retry
        succeeds instead of timing out behind a dead worker's lock.
        """
        if self.is_local:
            with self._local_lock(name, timeout_s):
                yield
        else:
            with self._s3_lock(name, timeout_s, stale_after_s):
                yield

    @contextlib.contextmanager
    def _local_lock(self, name: str, timeout_s: float) -> Iterator[None]:
        import fcntl

        lock_path = self.path(f"_locks/{name}.lock")
        os.makedirs(os.path.dirname(lock_path), exist_ok=True)
        deadline = time.monotonic() + timeout_s
        with open(lock_path, "a") as handle:
            while True:
                try:
                    fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise LakeLockTimeout(f"lock {lock_path} held for over {timeout_s:.0f} s") from None
                    time.sleep(0.05)
            try:
                yield
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)

    @contextlib.contextmanager
    def _s3_lock(self, name: str, timeout_s: float, stale_after_s: float) -> Iterator[None]:
        import botocore.exceptions

        client = self._s3_client()
        bucket, _, prefix = self.root.partition("/")
        key = f"{prefix}/_locks/{name}".lstrip("/")
        owner = f"{os.uname().nodename}:{os.getpid()}:{uuid.uuid4().hex}"
        deadline = time.monotonic() + timeout_s
        while True:
            body = json.dumps({"owner": owner, "since": time.time()}).encode()
            try:
                client.put_object(Bucket=bucket, Key=key, Body=body, IfNoneMatch="*")
                break
            except botocore.exceptions.ClientError as exc:
                code = exc.response.get("Error", {}).get("Code")
                if code not in ("PreconditionFailed", "ConditionalRequestConflict"):
                    raise
                # The PUT may have succeeded with its answer lost: botocore's retry then meets our own lock.
                if self._s3_lock_owner(client, bucket, key) == owner:
                    break
            if self._s3_lock_is_stale(client, bucket, key, stale_after_s):
                client.delete_object(Bucket=bucket, Key=key)
                continue
            if time.monotonic() > deadline:
                raise LakeLockTimeout(f"lock s3://{bucket}/{key} held for over {timeout_s:.0f} s")
            time.sleep(0.2)
        stop = threading.Event()
        beat = threading.Thread(
            target=self._s3_lock_heartbeat,
            args=(client, bucket, key, owner, stale_after_s / 4, stop),
            name=f"lake-lock-heartbeat:{name}",
            daemon=True,
        )
        beat.start()
        try:
            yield
        finally:
            stop.set()
            beat.join()
            try:
                client.delete_object(Bucket=bucket, Key=key)
            except (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError) as exc:
                # Not fatal: the lock is no longer refreshed, so the next writer takes it over once stale.
                log.warning(
                    "could not release lock s3://%s/%s (%s); it expires in %.0f s",
                    bucket,
                    key,
                    exc,
                    stale_after_s,
                )

    @staticmethod
    def _s3_lock_owner(client: Any, bucket: str, key: str) -> str | None:
        import botocore.exceptions

        try:
            return json.loads(client.get_object(Bucket=bucket, Key=key)["Body"].read()).get("owner")
        except (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError, ValueError):
            return None

    @staticmethod
    def _s3_lock_heartbeat(client: Any, bucket: str, key: str, owner: str, every_s: float, stop) -> None:
        """Refresh our lock's time while we hold it (never someone else's: the owner is checked)."""
        import botocore.exceptions

        while not stop.wait(every_s):
            try:
                held = json.loads(client.get_object(Bucket=bucket, Key=key)["Body"].read())
                if held.get("owner") != owner:
                    return
                body = json.dumps({"owner": owner, "since": time.time()}).encode()
                client.put_object(Bucket=bucket, Key=key, Body=body)
            except (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError, ValueError):
                continue  # a failed refresh is retried at the next beat; the lock stays ours meanwhile

    @staticmethod
    def _s3_lock_is_stale(client: Any, bucket: str, key: str, stale_after_s: float) -> bool:
        import botocore.exceptions

        try:
            held = json.loads(client.get_object(Bucket=bucket, Key=key)["Body"].read())
        except (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError, ValueError):
            return False
        return time.time() - float(held.get("since", time.time())) > stale_after_s

    def _s3_client(self) -> Any:
        import boto3

        options = self.storage_options
        client_kwargs = dict(options.get("client_kwargs") or {})
        return boto3.client(
            "s3",
            aws_access_key_id=options.get("key"),
            aws_secret_access_key=options.get("secret"),
            aws_session_token=options.get("token"),
            endpoint_url=client_kwargs.get("endpoint_url") or options.get("endpoint_url"),
            region_name=client_kwargs.get("region_name"),
        )


def _modified_s(info: dict[str, Any]) -> float:
    """When the store last wrote an object, from its listing entry (local ``mtime``, S3 ``LastModified``)."""
    stamp = info.get("mtime", info.get("LastModified"))
    if isinstance(stamp, datetime):
        return stamp.timestamp()
    return float(stamp or 0.0)


def _temporary_prefix(name: str) -> str:
    """Temporary files are hidden (a leading dot: Hive-style readers such as ``pyarrow.dataset`` skip
    them, so a complete but unrenamed copy is never read as a second data file) and name their host and
    process, so that a later write of the same object can remove those a killed writer left behind."""
    return f".{name}.tmp-{os.uname().nodename}-"


def _remove_orphaned_temporaries(folder: str, name: str) -> None:
    """Remove this object's temporary files whose writer, a process of this host, is dead (SIGKILLed)."""
    import glob

    prefix = _temporary_prefix(name)
    for path in glob.glob(os.path.join(glob.escape(folder), glob.escape(prefix) + "*")):
        pid = os.path.basename(path)[len(prefix) :].split("-", 1)[0]
        if not pid.isdigit() or _process_alive(int(pid)):
            continue
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # alive, someone else's
    return True


def open_lake(uri: str | None = None, storage_options: dict[str, Any] | None = None) -> Lake:
    """The configured lake (``ACME_LAKE_URI``), or ``uri`` when given.

    Outside Airflow, S3 credentials come from the standard AWS environment variables;
    ``AWS_ENDPOINT_URL_S3`` / ``AWS_ENDPOINT_URL`` point at an S3-compatible server.
    """
    from acme import settings

    uri = uri or settings.project().lake_uri
    if storage_options is None and uri.startswith("s3://"):
        endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        storage_options = {"client_kwargs": {"endpoint_url": endpoint}} if endpoint else {}
    return Lake(uri, storage_options)


def summarize_jobs(lake: Lake) -> dict[str, Any]:
    """What the lake holds: rows per job partition and per quarantine file, telemetry samples."""
    from acme import lake_keys
    from acme.lake_keys import partition_values

    partitions = [
        {**partition_values(key), "rows": lake.num_rows(key), "path": lake.url(key)}
        for key in lake.list(lake_keys.JOBS)
        if key.endswith(".parquet")
    ]
    quarantine = [
        {**partition_values(key), "rows": lake.num_rows(key), "path": lake.url(key)}
        for key in lake.list(lake_keys.QUARANTINE_JOBS)
        if key.endswith(".parquet")
    ]
    metrics = [
        {**partition_values(key), "rows": lake.num_rows(key), "path": lake.url(key)}
        for key in lake.list(lake_keys.METRICS)
        if key.endswith(".parquet")
    ]
    return {
        "lake": lake.uri,
        "metric_samples": sum(m["rows"] for m in metrics),
        "metric_partitions": len(metrics),
        "metric_days": sorted({(m["cluster"], m["date"]) for m in metrics}),
        "jobs": sum(p["rows"] for p in partitions),
        "quarantined": sum(q["rows"] for q in quarantine),
        "partitions": partitions,
        "quarantine": quarantine,
    }
