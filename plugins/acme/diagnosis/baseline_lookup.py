"""The lake lookup of the last good run of a failed job's family (issue 31, item 2), for
:mod:`acme.diagnosis.baseline`'s diff: which run it is, and its log's line templates, read once a night.

Kept apart from ``baseline`` because it finds the good run's log as the pipeline finds a failed job's
(``acme.diagnosis.pipeline.locate_logs``), and the pipeline itself uses ``baseline``'s diff.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any

from acme.diagnosis.baseline import Baseline, baseline_keys
from acme.errors import InputError

if TYPE_CHECKING:
    from acme.lake import Lake

LOOKBACK_DAYS = 14  # job partitions (by submit day) searched for the last good run before a failure
_GOOD_STATES = ("COMPLETED",)
_JOB_COLUMNS = ("job_id", "job_name", "user", "job_type", "state", "submit_time", "start_time", "end_time")


def family_of(job: dict[str, Any]) -> str | None:
    """The job family a baseline is looked up by (``acme.diagnosis.learning.family_key``: type, user and
    name without run numbers); None for a job without a name or a user (AcmeTrace's), which has none."""
    from acme.diagnosis.learning import family_key

    if not job.get("job_name") or not job.get("user"):
        return None
    return family_key(job)


def _as_time(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, str) and value:
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    return None


def failure_time(job: dict[str, Any]) -> datetime | None:
    """When the failed run began (start, else submit, else end): a good run must have ended before it."""
    for name in ("start_time", "submit_time", "end_time"):
        found = _as_time(job.get(name))
        if found is not None:
            return found
    return None


class BaselineFinder:
    """The lake lookup of the last good run of a failed job's family, and its log's templates.

    The last good run: among the lake's jobs of the same cluster and family (:func:`family_of`) whose state
    is COMPLETED and which ended before the failed run began (:func:`failure_time`), submitted in the
    ``lookback_days`` before it, the one that ended last. Its log is found as the failed job's is
    (``ACME_DIAGNOSIS_LOG_PATTERN``, ``acme.diagnosis.pipeline.locate_logs``). A good run without a readable
    log gives no baseline and a note, never an error.

    One finder serves a night (a DAG run's chunk): job partitions are read once each, and a good run's log
    once; with ``cache_folder`` (the run's staging folder) its templates are also kept in the lake, so the
    other chunks of the night read them instead of the log.
    """

    def __init__(self, lake: Lake, *, cache_folder: str | None = None, lookback_days: int = LOOKBACK_DAYS):
        self.lake = lake
        self.cache_folder = cache_folder
        self.lookback_days = lookback_days
        self._completed: dict[tuple[str, date], list[dict[str, Any]]] = {}
        self._baselines: dict[tuple[str, str], Baseline] = {}

    def for_job(self, cluster: str, job: dict[str, Any]) -> Baseline:
        """The baseline of a failed job (see the class docstring)."""
        family = family_of(job)
        if family is None:
            return Baseline(None, "no job name or user: no job family, no last good run looked up")
        began = failure_time(job)
        if began is None:
            return Baseline(
                None, "the failed job has no start, submit or end time: no last good run looked up"
            )
        good = self.last_good_run(cluster, family, began, exclude=str(job.get("job_id") or ""))
        if good is None:
            return Baseline(
                None, f"no successful run of family {family} ended in the {self.lookback_days} days before"
            )
        cached = self._baselines.get((cluster, good["job_id"]))
        if cached is None:
            cached = self._baselines[(cluster, good["job_id"])] = self._read_baseline(cluster, family, good)
        return cached

    def last_good_run(
        self, cluster: str, family: str, began: datetime, exclude: str = ""
    ) -> dict[str, Any] | None:
        """The job record of the family's last successful run that ended before ``began``, or None."""
        best: dict[str, Any] | None = None
        for back in range(self.lookback_days + 1):
            for job in self._completed_jobs(cluster, began.date() - timedelta(days=back)):
                ended = job["end_time"]
                if job["family"] != family or job["job_id"] == exclude or ended is None or ended >= began:
                    continue
                if best is None or (ended, job["job_id"]) > (best["end_time"], best["job_id"]):
                    best = job
        return best

    def _completed_jobs(self, cluster: str, day: date) -> list[dict[str, Any]]:
        from acme import lake_keys

        if (cluster, day) not in self._completed:
            key = lake_keys.jobs_partition(cluster, day)
            rows: list[dict[str, Any]] = []
            if self.lake.exists(key):
                table = self.lake.read_parquet(key)
                columns = [c for c in _JOB_COLUMNS if c in table.column_names]
                rows = [r for r in table.select(columns).to_pylist() if r.get("state") in _GOOD_STATES]
            for row in rows:
                row["family"] = family_of(row)
                row["end_time"] = _as_time(row.get("end_time"))
            self._completed[(cluster, day)] = rows
        return self._completed[(cluster, day)]

    def _cache_key(self, cluster: str, job_id: str) -> str | None:
        if self.cache_folder is None:
            return None
        safe = re.sub(r"[^A-Za-z0-9._-]+", "-", job_id)
        return f"{self.cache_folder}/baselines/cluster={cluster}/job={safe}.json"

    def _read_baseline(self, cluster: str, family: str, good: dict[str, Any]) -> Baseline:
        """The good run's templates: from the night's cache in the lake, else from its log (then cached)."""
        key = self._cache_key(cluster, good["job_id"])
        if key is not None and self.lake.exists(key):
            stored = self.lake.read_json(key)
            keys = stored.get("keys")
            return Baseline(None if keys is None else frozenset(keys), stored["note"], good["job_id"])
        found = self._baseline_from_log(cluster, family, good)
        if key is not None:
            keys = None if found.keys is None else sorted(found.keys)
            self.lake.write_json(key, {"job_id": good["job_id"], "note": found.note, "keys": keys})
        return found

    def _baseline_from_log(self, cluster: str, family: str, good: dict[str, Any]) -> Baseline:
        from acme.diagnosis.pipeline import job_submit_day, locate_logs, read_log_lines

        ended = good["end_time"].isoformat()
        which = f"the last good run of family {family}, job {good['job_id']} (ended {ended})"
        try:
            files, searched = locate_logs(self.lake, cluster, good, None, job_submit_day(good))
            if not files:
                return Baseline(None, f"{which} has no log at {searched}: no baseline", good["job_id"])
            keys = frozenset(baseline_keys(read_log_lines(files)))
        except InputError as exc:
            return Baseline(None, f"{which}: its log cannot be read ({exc}): no baseline", good["job_id"])
        return Baseline(keys, f"baseline: {which}, {len(keys)} line templates", good["job_id"])
