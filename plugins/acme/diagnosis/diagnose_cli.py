"""``python -m acme diagnose LOG [--job JSON] [--lake URI] [--baseline-log PATH]``: the diagnosis of one log.

Prints ``{"reason", "category", "attribution", "confidence", "source", "evidence": [{"line", "text"}],
"mitigation"}`` as JSON. Offline by default: the bundled rules (and the LLM agent when an endpoint is
configured). With ``--lake`` the lake's learned rules, family filter rules and retrieval of similar past cases
join in; the command line only reads the lake, it never stores a case or learns a rule.

The diff against the last good run (``acme.diagnosis.baseline``): ``--baseline-log`` names that run's log;
without it, with ``--lake`` and a job id, the family's last good run is looked up in the lake (the job's name,
user and times from ``--job``, completed from its record in the lake when the job's ``cluster`` and
``submit_time`` say where it is). The answer then also holds ``"baseline"``: which run it was, or why none.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from acme.errors import InputError

if TYPE_CHECKING:
    from acme.diagnosis.baseline import Baseline
    from acme.lake import Lake


def read_job_argument(job_json: str | Path | None) -> dict[str, Any] | None:
    """Job metadata from a JSON object given inline or as a file; a clear InputError otherwise."""
    if not job_json:
        return None
    raw = str(job_json)
    try:
        job = json.loads(Path(raw).read_text(encoding="utf-8") if Path(raw).is_file() else raw)
    except (OSError, json.JSONDecodeError) as exc:
        raise InputError(raw, f"job metadata is not a JSON object: {exc}") from exc
    if not isinstance(job, dict):
        raise InputError(raw, "job metadata is not a JSON object")
    return job


def job_with_lake_record(lake: Lake, cluster: str, job: dict[str, Any]) -> dict[str, Any]:
    """``job`` completed with its record in the lake's jobs partition of its submit day (the fields given on
    the command line win); unchanged when it gives no ``submit_time`` or the partition does not hold it."""
    from acme import lake_keys
    from acme.diagnosis.pipeline import job_submit_day, json_safe_job

    if not job.get("job_id") or not (job.get("submit_time") or job.get("date")):
        return job
    key = lake_keys.jobs_partition(cluster, job_submit_day(job))
    if not lake.exists(key):
        return job
    wanted = str(job["job_id"])
    rows = [row for row in lake.read_parquet(key).to_pylist() if str(row.get("job_id")) == wanted]
    return {**json_safe_job(rows[0]), **job} if rows else job


def find_baseline(
    lake: Lake | None, cluster: str, job: dict[str, Any], baseline_log: str | Path | None
) -> Baseline | None:
    """The baseline the command line uses: the ``--baseline-log`` file, else the lake's last good run of the
    job's family (with a lake and a job id), else none."""
    from acme.diagnosis.baseline import Baseline, baseline_keys_of_log
    from acme.diagnosis.baseline_lookup import BaselineFinder

    if baseline_log:
        path = Path(baseline_log)
        if not path.is_file():
            raise InputError(str(path), "baseline log (the last good run's log) not found")
        keys = frozenset(baseline_keys_of_log(path))
        return Baseline(keys, f"baseline: the log {path} ({len(keys)} line templates)")
    if lake is None or not job.get("job_id"):
        return None
    return BaselineFinder(lake).for_job(cluster, job_with_lake_record(lake, cluster, job))


def diagnose_log_cli(
    log_path: str | Path,
    job_json: str | Path | None = None,
    lake_uri: str | None = None,
    baseline_log: str | Path | None = None,
) -> dict[str, Any]:
    """Diagnose the log file at ``log_path``; see the module docstring for what is used."""
    from acme.diagnosis.pipeline import diagnose_log_lines

    path = Path(log_path)
    if not path.is_file():
        raise InputError(str(path), "log file not found")
    job = read_job_argument(job_json) or {}
    cluster = str(job.get("cluster") or "adhoc")
    lake = None
    if lake_uri:
        from acme.lake import open_lake

        lake = open_lake(lake_uri)
    baseline = find_baseline(lake, cluster, job, baseline_log)
    record = diagnose_log_lines(
        path, job, cluster=cluster, lake=lake, learn=False, store_case=False, baseline=baseline
    )
    output = record.to_output()
    if baseline is not None:
        output["baseline"] = baseline.note
    return output
