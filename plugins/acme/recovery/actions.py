"""The action log of a recovery in the lake, and the marker that allows one recovery per job at a time.

Every step of a recovery (plan, each check world, decide, cordon of each node, checkpoint choice,
restart) is one JSON line in::

    recovery/cluster=<c>/job=<job_id>/<recovery_id>/actions.jsonl

with its start and end time (UTC, ISO 8601), inputs, result, status (``done``, ``planned`` in a dry
run, ``failed``, ``needs-person``) and dry-run flag. A step that changes the cluster carries an
*idempotency key* (``cordon:<node>``, ``restart``): before acting, recovery looks the key up and
skips the action when a ``done`` record with that key exists, so clearing and re-running a task or
the whole run never cordons or restarts twice. Dry-run records never count as done.

The log is rewritten whole under a lake lock on every append (small: tens of lines), so a reader
sees the old or the new log, never half a line, on a local folder and on S3 alike.

``recovery/cluster=<c>/job=<job_id>/_active.json`` names the recovery working on the job; another
recovery of the same job is refused until it is released (or older than the lock TTL, for a worker
that died without releasing it).
"""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from acme.errors import AcmeError, InputError

if TYPE_CHECKING:
    from acme.lake import Lake

SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
"""Cluster names, job ids and recovery ids as they may appear in a lake path."""


class RecoveryInProgressError(AcmeError):
    """Another recovery of the same job holds the job's marker."""


def checked_name(value: Any, what: str) -> str:
    """``value`` when it is safe as a path component, else an InputError naming ``what``."""
    if not isinstance(value, str) or not SAFE_NAME.match(value) or ".." in value:
        raise InputError(what, f"{value!r} must be 1-128 letters, digits, '.', '_' or '-'")
    return value


def checked_metrics_file(location: Any) -> str:
    """The ``metrics_file`` Param: a path inside the checkpoint location (it is read from there), so no
    ``..``, no absolute path or URL, no NUL byte."""
    parts = str(location).replace("\\", "/").split("/")
    if (
        not isinstance(location, str)
        or not location.strip()
        or "\x00" in location
        or "://" in location
        or location.startswith(("/", "\\", "~"))
        or ".." in parts
    ):
        raise InputError(
            "metrics_file", f"{location!r} must be a relative path inside the checkpoint location"
        )
    return location


def recovery_id_from_run(run_id: str) -> str:
    """A lake-safe recovery id from an Airflow run id (``manual__2026-11-29T14:00:00+00:00`` …)."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "-", run_id).strip("-.")[:128]
    return checked_name(cleaned or "run", "run id")


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def job_prefix(cluster: str, job_id: str) -> str:
    from acme import lake_keys

    return lake_keys.recovery_job(checked_name(cluster, "cluster"), checked_name(job_id, "job_id"))


class ActionLog:
    """The actions of one recovery of one job (module docstring)."""

    def __init__(self, lake: Lake, cluster: str, job_id: str, recovery_id: str, folder: str | None = None):
        """``folder`` (default the job's, ``job_prefix``) holds the log: a node's validations use their own."""
        self.lake = lake
        self.cluster = cluster
        self.job_id = job_id
        self.recovery_id = checked_name(recovery_id, "recovery_id")
        self.key = f"{folder or job_prefix(cluster, job_id)}/{self.recovery_id}/actions.jsonl"
        self._lock_name = (
            f"recovery-{cluster}-{job_id}" if folder is None else re.sub(r"[^A-Za-z0-9._-]", "-", folder)
        )

    def records(self) -> list[dict[str, Any]]:
        if not self.lake.exists(self.key):
            return []
        lines = self.lake.read_bytes(self.key).decode().splitlines()
        records = []
        for number, line in enumerate(lines, start=1):
            try:
                records.append(json.loads(line))
            except ValueError as exc:
                raise InputError(self.lake.url(self.key), f"not a JSON line: {exc}", line=number) from None
        return records

    def done(self, idempotency_key: str) -> dict[str, Any] | None:
        """The last real (not dry-run) ``done`` record with this key, if any."""
        found = None
        for record in self.records():
            if (
                record.get("idempotency_key") == idempotency_key
                and record.get("status") == "done"
                and not record.get("dry_run")
            ):
                found = record
        return found

    def done_or_planned(self, idempotency_key: str, dry_run: bool) -> dict[str, Any] | None:
        """``done`` for a live run; for a dry run, its own last record with this key (a re-run of the same
        dry run does not record it again)."""
        if not dry_run:
            return self.done(idempotency_key)
        found = None
        for record in self.records():
            if (
                record.get("idempotency_key") == idempotency_key
                and record.get("dry_run")
                and record.get("status") != "failed"
            ):
                found = record
        return found

    def append(self, record: dict[str, Any]) -> dict[str, Any]:
        record = {"recovery_id": self.recovery_id, "cluster": self.cluster, "job_id": self.job_id, **record}
        with self.lake.lock(self._lock_name, timeout_s=60):
            lines = [json.dumps(r, sort_keys=True, default=str) for r in self.records()]
            lines.append(json.dumps(record, sort_keys=True, default=str))
            self.lake.write_bytes(self.key, ("\n".join(lines) + "\n").encode())
        return record

    @contextlib.contextmanager
    def step(
        self,
        step: str,
        inputs: dict[str, Any],
        dry_run: bool,
        idempotency_key: str | None = None,
    ) -> Iterator[dict[str, Any]]:
        """Record one step: yields a dict the caller fills with the result; failures are recorded too.

        The record's status is ``planned`` in a dry run, ``done`` otherwise, ``failed`` (with the
        error) when the block raises, or what the caller set as ``result["status"]``.
        """
        started, clock = utc_now(), time.perf_counter()
        result: dict[str, Any] = {}
        record = {
            "step": step,
            "idempotency_key": idempotency_key,
            "dry_run": dry_run,
            "inputs": inputs,
            "started_at": started,
        }
        try:
            yield result
        except BaseException as exc:
            status = getattr(exc, "recovery_status", "failed")
            self.append(
                {
                    **record,
                    "ended_at": utc_now(),
                    "seconds": round(time.perf_counter() - clock, 3),
                    "status": status,
                    "error": f"{type(exc).__name__}: {exc}",
                    "result": result,
                }
            )
            raise
        status = result.pop("status", "planned" if dry_run else "done")
        self.append(
            {
                **record,
                "ended_at": utc_now(),
                "seconds": round(time.perf_counter() - clock, 3),
                "status": status,
                "result": result,
            }
        )


def acquire_job(lake: Lake, cluster: str, job_id: str, recovery_id: str, run_id: str, ttl_s: float) -> dict:
    """Mark ``recovery_id`` as the job's one active recovery; the same recovery may re-acquire.

    Raises ``RecoveryInProgressError`` while another, not stale, recovery holds the job.
    """
    key = f"{job_prefix(cluster, job_id)}/_active.json"
    with lake.lock(f"recovery-{cluster}-{job_id}", timeout_s=60):
        held = lake.read_json(key)
        if held and held.get("recovery_id") != recovery_id:
            age = time.time() - float(held.get("since_epoch", 0))
            if age < ttl_s:
                raise RecoveryInProgressError(
                    f"job {job_id} on {cluster}: recovery {held.get('recovery_id')} (run "
                    f"{held.get('run_id')}) has been working on it for {age:.0f} s; one recovery per job "
                    f"at a time (the marker {lake.url(key)} expires after {ttl_s:.0f} s)"
                )
        if held and held.get("recovery_id") == recovery_id:
            return held
        marker = {
            "recovery_id": recovery_id,
            "run_id": run_id,
            "since": utc_now(),
            "since_epoch": time.time(),
        }
        lake.write_json(key, marker)
        return marker


def release_job(lake: Lake, cluster: str, job_id: str, recovery_id: str) -> bool:
    """Remove the job's marker when ``recovery_id`` holds it; True when removed."""
    key = f"{job_prefix(cluster, job_id)}/_active.json"
    with lake.lock(f"recovery-{cluster}-{job_id}", timeout_s=60):
        held = lake.read_json(key)
        if not held or held.get("recovery_id") != recovery_id:
            return False
        lake.remove(key)
        return True
