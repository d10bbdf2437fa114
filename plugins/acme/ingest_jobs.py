"""Job-trace ingest: parse a source, validate it, quarantine what fails, publish partitions.

The steps are separate functions so the Airflow tasks (extract → parse → validate →
publish) and the command line (all at once, in memory) run the same code.

Idempotency: a job's partition is the UTC day of its time key (submit time, else start, else
end: ``acme.schema.time_key_column``); publishing merges by
job id under the partition's lock (a terminal state replaces RUNNING, a newer record of the
same rank replaces an older one) and rewrites the partition whole, so re-runs, retries and
overlapping backfills never duplicate a job. Quarantine and validation entries are keyed by
the input (its URI and day), so they are replaced, not appended, by a re-run.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

from acme import config
from acme.errors import InputError, QuarantineThresholdError
from acme.lake import Lake
from acme.schema import JOB_COLUMNS, SOURCES, job_arrow_schema
from acme.sources.base import REJECT_COLUMNS, ParseResult, first_submit_day

if TYPE_CHECKING:
    import pandas as pd

    from acme.validate import ValidationOutcome

FORMATS = SOURCES  # the input formats are the sources of the canonical record
QUARANTINE_COLUMNS = ["cluster", "source", "input", "stage", *REJECT_COLUMNS]


@dataclass(frozen=True)
class JobInput:
    """One input of one run: which cluster, which source format, where, for which day."""

    cluster: str
    format: str
    uri: str  # where the input came from (shown to people, part of the input key)
    day: date | None = None
    fields: tuple[str, ...] | None = None  # sacct header-less field list
    timezone: str = "UTC"  # sacct prints naive local times in the cluster's zone
    delimiter: str = "|"  # sacct --delimiter of the export

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form, for handing an input from one Airflow task to the next."""
        return {
            "cluster": self.cluster,
            "format": self.format,
            "uri": self.uri,
            "day": self.day.isoformat() if self.day else None,
            "fields": list(self.fields) if self.fields else None,
            "timezone": self.timezone,
            "delimiter": self.delimiter,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JobInput:
        return cls(
            cluster=data["cluster"],
            format=data["format"],
            uri=data["uri"],
            day=date.fromisoformat(data["day"]) if data.get("day") else None,
            fields=tuple(data["fields"]) if data.get("fields") else None,
            timezone=data.get("timezone") or "UTC",
            delimiter=data.get("delimiter") or "|",
        )

    @property
    def key(self) -> str:
        """Stable identity of this input: re-running it replaces what it wrote before."""
        digest = hashlib.sha1(f"{self.format}|{self.uri}|{self.day}".encode()).hexdigest()[:16]
        return f"{self.format}-{digest}"


def plan_job_inputs(
    clusters: dict, day: date, cluster: str = "all", source: str = "configured", input_uri: str | None = None
) -> list[dict[str, Any]]:
    """The inputs of one run: one per selected cluster, as dicts (with the live command, if any).

    ``source`` other than ``configured`` overrides the cluster's format (with ``input_uri``
    giving the location), for manual runs over a file someone exported by hand.
    """
    from acme.clusters import selected_clusters

    planned = []
    for name in selected_clusters(clusters, cluster, source, FORMATS, input_uri):
        jobs = clusters[name].jobs
        fmt = jobs.format if source == "configured" else source
        live = jobs.command if (jobs.command and not input_uri and fmt == "sacct") else None
        uri = input_uri or ("sacct://" + "/".join(jobs.command) if live else jobs.input_for(name, day))
        delimiter = "|" if live else jobs.delimiter  # the live command asks for --parsable2
        job_input = JobInput(name, fmt, uri, day, jobs.fields, jobs.timezone, delimiter)
        planned.append({"input": job_input.to_dict(), "command": list(live) if live else None})
    return planned


def parse_job_input(job_input: JobInput, local_path: str | Path) -> tuple[ParseResult, str]:
    """Parse the local copy of an input; returns the result (secrets in job names and rejected
    records masked, see :mod:`acme.secrets`) and the layout to validate with."""
    from acme.secrets import redact_column

    result, layout = _parse_job_input(job_input, local_path)
    result.jobs["job_name"] = redact_column(result.jobs["job_name"])
    _redact_rejects(result.rejects)
    return result, layout


def _redact_rejects(rejects: pd.DataFrame) -> None:
    from acme.secrets import redact_column

    rejects["record"] = redact_column(rejects["record"])
    rejects["reason"] = redact_column(rejects["reason"])


def _parse_job_input(job_input: JobInput, local_path: str | Path) -> tuple[ParseResult, str]:
    if job_input.format not in FORMATS:
        raise InputError(
            job_input.uri, f"unknown format {job_input.format!r}; expected one of {', '.join(FORMATS)}"
        )
    local_path = str(local_path)
    if job_input.format == "acmetrace":
        from acme.sources.acmetrace import detect_layout, parse_acmetrace

        layout = detect_layout(local_path, job_input.uri)
        result = parse_acmetrace(
            local_path, job_input.cluster, source_file=job_input.uri, day=job_input.day, layout=layout
        )
        return result, layout
    if job_input.format == "sacct":
        from acme.sources.sacct import parse_sacct_file

        result = parse_sacct_file(  # streamed: neither the text nor its lines are held
            local_path,
            job_input.cluster,
            source_file=job_input.uri,
            fields=job_input.fields,
            day=job_input.day,
            tz=job_input.timezone,
            delimiter=job_input.delimiter,
        )
        return result, "sacct"
    from acme.sources.base import check_input_size
    from acme.sources.kubernetes import parse_kubernetes

    check_input_size(local_path, job_input.uri)  # a JSON document is parsed whole: refuse a huge one unread
    data = Path(local_path).read_bytes()
    return parse_kubernetes(data, job_input.cluster, source_file=job_input.uri, day=job_input.day), "k8s"


def quarantine_frame(job_input: JobInput, rejects: pd.DataFrame, stage: str) -> pd.DataFrame:
    return rejects.assign(
        cluster=job_input.cluster, source=job_input.format, input=job_input.uri, stage=stage
    )[QUARANTINE_COLUMNS]


def input_artifact_key(area: str, job_input: JobInput, first_day: date | None, suffix: str) -> str:
    """Where a per-input artifact (quarantine, validation report) lives: by the run's day."""
    day = job_input.day or first_day
    return f"{area}/jobs/cluster={job_input.cluster}/date={day or 'undated'}/{job_input.key}{suffix}"


def write_quarantine(
    lake: Lake, job_input: JobInput, quarantined: pd.DataFrame, first_day: date | None
) -> str | None:
    """Replace this input's quarantine file (removing a stale one when nothing failed now)."""
    import pyarrow as pa

    key = input_artifact_key("quarantine", job_input, first_day, ".parquet")
    if quarantined.empty:
        if lake.exists(key):
            lake.delete_prefix(key)
        return None
    table = pa.Table.from_pandas(quarantined.reset_index(drop=True), preserve_index=False)
    return lake.write_parquet(key, table)


def check_quarantine_share(
    job_input: JobInput, rows_in: int, quarantined: pd.DataFrame, max_share: float | None = None
) -> None:
    """Fail the input when more than the allowed share of its rows was quarantined."""
    max_share = config.quarantine_max_share() if max_share is None else max_share
    if rows_in == 0 or quarantined.empty:
        return
    share = len(quarantined) / rows_in
    if share <= max_share:
        return
    examples = "; ".join(
        f"line {row.source_line}: {row.reason}" for row in quarantined.head(3).itertuples(index=False)
    )
    raise QuarantineThresholdError(
        f"{job_input.uri}: {len(quarantined)} of {rows_in} rows ({share:.1%}) failed validation, "
        f"above the allowed {max_share:.1%} (--max-quarantine-share, ACME_QUARANTINE_MAX_SHARE); "
        f"nothing was published. First: {examples}"
    )


def publish_jobs(
    lake: Lake, job_input: JobInput, accepted: pd.DataFrame, report: dict[str, Any]
) -> list[str]:
    """Merge accepted jobs into their submit-day partitions; returns the partition URLs.

    Each day is a zero-copy slice of the table, reordered by day first only when the input
    is not in submit order.
    """
    import numpy as np
    import pyarrow.compute as pc

    if accepted.empty:
        return []
    table = _jobs_table(accepted)
    time_key = pc.coalesce(table["submit_time"], table["start_time"], table["end_time"])
    days = pc.cast(time_key, "date32").to_numpy()
    if (days[1:] < days[:-1]).any():  # traces are usually in submit order: then no reordering at all
        order = np.argsort(days, kind="stable")
        table, days = table.take(order), days[order]
    starts = _run_starts(days)
    bounds = list(zip(starts, [*starts[1:], len(days)], strict=True))

    def publish_day(bound: tuple[int, int]) -> str:
        start, stop = bound
        day_text = str(days[start])
        rows = table.slice(start, stop - start)
        partition = f"jobs/cluster={job_input.cluster}/date={day_text}"
        with lake.lock(f"jobs-{job_input.cluster}-{day_text}"):
            key = f"{partition}/jobs.parquet"
            existing = lake.read_parquet(key) if lake.exists(key) else None
            merged = merge_job_tables(existing, rows)
            url = lake.write_parquet(key, merged)
            _record_validation(lake, partition, job_input, report, rows.num_rows, merged.num_rows)
        return url

    return [publish_day(bound) for bound in bounds]


def _run_starts(values) -> list[int]:
    """Indexes where a run of equal values begins in a sorted array."""
    import numpy as np

    if len(values) == 0:
        return []
    return [0, *(np.flatnonzero(values[1:] != values[:-1]) + 1).tolist()]


def merge_job_tables(existing, incoming):
    """One row per job id: terminal states beat RUNNING; otherwise the incoming record wins."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    order = [("submit_time", "ascending"), ("job_id", "ascending")]
    if existing is None or existing.num_rows == 0:
        if pc.count_distinct(incoming["job_id"]).as_py() == incoming.num_rows:
            return incoming.sort_by(order)  # a new partition of unique jobs: nothing to merge
        combined = incoming.append_column("_incoming", pa.array([1] * incoming.num_rows, pa.int8()))
    else:
        from acme.schema import with_current_columns

        existing = with_current_columns(existing).cast(incoming.schema)
        combined = pa.concat_tables(
            [
                existing.append_column("_incoming", pa.array([0] * existing.num_rows, pa.int8())),
                incoming.append_column("_incoming", pa.array([1] * incoming.num_rows, pa.int8())),
            ]
        )
    terminal = pc.cast(pc.not_equal(combined["state"], "RUNNING"), pa.int8())
    combined = combined.append_column("_terminal", terminal)
    ranked = combined.sort_by(
        [("job_id", "ascending"), ("_terminal", "descending"), ("_incoming", "descending")]
    )
    job_ids = ranked["job_id"].to_numpy(zero_copy_only=False)
    first = np.ones(len(job_ids), dtype=bool)
    first[1:] = job_ids[1:] != job_ids[:-1]
    kept = ranked.filter(pa.array(first)).drop_columns(["_incoming", "_terminal"])
    return kept.sort_by(order)


def _record_validation(
    lake: Lake, partition: str, job_input: JobInput, report: dict[str, Any], rows: int, partition_rows: int
) -> None:
    """Note in the partition's ``_validation.json`` which input wrote what, and its report."""
    key = f"{partition}/_validation.json"
    document = lake.read_json(key, default={"inputs": {}})
    document["inputs"][job_input.key] = {
        "input": job_input.uri,
        "format": job_input.format,
        "day": job_input.day,
        "rows_published_here": rows,
        "suite": report.get("suite"),
        "success": report.get("success"),
        "rows_validated": report.get("rows_validated"),
        "rows_rejected": report.get("rows_rejected"),
        "report": report.get("url"),
    }
    document["partition_rows"] = partition_rows
    lake.write_json(key, document)


def ingest_job_file(
    lake: Lake, job_input: JobInput, local_path: str | Path, max_quarantine_share: float | None = None
) -> dict[str, Any]:
    """Everything at once, in memory (the command line): returns the run's summary."""
    from acme.validate import preload_in_background, validate_jobs

    preloading = preload_in_background()
    parsed, layout = parse_job_input(job_input, local_path)
    preloading.join()
    outcome = validate_jobs(parsed.jobs, layout=layout, source_file=job_input.uri)
    quarantined, quarantine_url = record_input_outcome(
        lake, job_input, parsed.rejects, outcome, first_submit_day(parsed.jobs),
        parsed.rows_in - parsed.skipped_other_days - sum(parsed.skipped.values()), max_quarantine_share,
    )  # fmt: skip
    if outcome.accepted.empty and quarantined.empty:
        refuse_empty_input(job_input, parsed.rows_in, parsed.skipped, parsed.skipped_other_days)
    partitions = publish_jobs(lake, job_input, outcome.accepted, outcome.report)
    return {
        "rows_in": parsed.rows_in,
        "rows": len(outcome.accepted),
        "quarantined": len(quarantined),
        "skipped": dict(parsed.skipped),
        "skipped_other_days": parsed.skipped_other_days,
        "partitions": partitions,
        "quarantine": quarantine_url,
        "notes": parsed.notes,
    }


def refuse_empty_input(job_input: JobInput, rows_in: int, skipped: dict[str, int], other_days: int) -> None:
    """The command line never exits 0 having stored nothing: one line saying why there is nothing."""
    if rows_in == 0:
        raise InputError(job_input.uri, "no job records in the input: nothing to store")
    reasons = ", ".join(f"{reason}: {count}" for reason, count in sorted(skipped.items()))
    if other_days:
        reasons = ", ".join(filter(None, [reasons, f"submitted on other days than --day: {other_days}"]))
    raise InputError(job_input.uri, f"all {rows_in} record(s) skipped ({reasons}): nothing to store")


def record_input_outcome(
    lake: Lake,
    job_input: JobInput,
    parse_rejects: pd.DataFrame,
    outcome: ValidationOutcome,
    first_day: date | None,
    rows_in: int,
    max_quarantine_share: float | None,
) -> tuple[pd.DataFrame, str | None]:
    """Write the input's quarantine and validation report, then fail it if too much is bad.

    The report's URL is added to ``outcome.report`` so the partitions can point at it.
    """
    import pandas as pd

    quarantined = pd.concat(
        [
            quarantine_frame(job_input, parse_rejects, "parse"),
            quarantine_frame(job_input, outcome.rejected, "validate"),
        ],
        ignore_index=True,
    ).sort_values("source_line", kind="stable")
    url = write_quarantine(lake, job_input, quarantined, first_day)
    report = {**outcome.report, "input": job_input.uri, "rows_in": rows_in, "quarantined": len(quarantined)}
    outcome.report["url"] = lake.write_json(
        input_artifact_key("validation", job_input, first_day, ".json"), report
    )
    check_quarantine_share(job_input, rows_in, quarantined, max_quarantine_share)
    return quarantined, url


# --- the same steps as separate Airflow tasks, handing over through the lake -------------


def staging_prefix(run_id: str, job_input: JobInput) -> str:
    safe_run = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in run_id)
    return f"staging/ingest_jobs/{safe_run}/{job_input.key}"


def raw_key(job_input: JobInput) -> str:
    suffix = "".join(Path(job_input.uri.split("?")[0]).suffixes[-2:]) or {
        "sacct": ".txt", "k8s": ".json", "acmetrace": ".csv"
    }[job_input.format]  # fmt: skip
    day = job_input.day.isoformat() if job_input.day else "undated"
    return f"raw/jobs/cluster={job_input.cluster}/date={day}/{job_input.key}{suffix}"


def extract_job_input(lake: Lake, job_input: JobInput, command: Sequence[str] | None = None) -> str:
    """Copy the day's input (or run live sacct) into the lake's raw area; returns its key."""
    key = raw_key(job_input)
    if command:
        from acme.sources.sacct import DEFAULT_FIELDS, run_sacct

        if job_input.day is None:
            raise InputError(job_input.uri, "live sacct needs a day")
        text = run_sacct(
            job_input.day, command, fields=job_input.fields or DEFAULT_FIELDS, tz=job_input.timezone
        )
        lake.write_bytes(key, text.encode())
        return key
    import fsspec

    from acme.sources.base import refuse_above_limit

    try:
        fs, path = fsspec.core.url_to_fs(job_input.uri)
        size = fs.size(path)  # None when the server does not say (HTTP without a length)
        if size is not None:
            refuse_above_limit(size, job_input.uri)  # the copy below holds the input whole
        with fs.open(path, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        raise InputError(job_input.uri, f"no input for {job_input.cluster} on {job_input.day}") from None
    except OSError as exc:
        raise InputError(job_input.uri, f"cannot read: {exc}") from exc
    lake.write_bytes(key, data)
    return key


def parse_staged(lake: Lake, job_input: JobInput, raw: str, staging: str) -> dict[str, Any]:
    """Parse the raw copy; stage the canonical rows and the parse rejects."""
    import pyarrow as pa

    if job_input.format == "sacct":
        with lake.local_file(raw) as local_path:
            return _parse_sacct_staged(lake, job_input, local_path, staging)
    with lake.local_file(raw) as local_path:
        parsed, layout = parse_job_input(job_input, local_path)
    lake.write_parquet(f"{staging}/parsed.parquet", _jobs_table(parsed.jobs))
    lake.write_parquet(
        f"{staging}/parse_rejects.parquet", pa.Table.from_pandas(parsed.rejects, preserve_index=False)
    )
    return {
        "layout": layout,
        "rows_in": parsed.rows_in,
        "parsed": len(parsed.jobs),
        "parse_rejects": len(parsed.rejects),
        "skipped_other_days": parsed.skipped_other_days,
        "skipped": dict(parsed.skipped),
        "first_day": first_submit_day(parsed.jobs),
        "notes": parsed.notes,
    }


def _parse_sacct_staged(lake: Lake, job_input: JobInput, local_path: str, staging: str) -> dict[str, Any]:
    """:func:`parse_staged` for sacct in bounded memory: the rows come in batches, each masked
    (:mod:`acme.secrets`) and appended to a local Parquet file that is then uploaded, so the
    day's rows are never all in memory (the row order may differ from :func:`parse_job_input`'s
    for a job id seen twice; validation and publishing do not depend on it)."""
    import os
    import tempfile

    import pyarrow as pa
    import pyarrow.parquet as pq

    from acme.secrets import redact_column
    from acme.sources.sacct import parse_sacct_file

    first_day: list[date] = []

    def stage(jobs: pd.DataFrame) -> None:
        jobs["job_name"] = redact_column(jobs["job_name"])
        day = first_submit_day(jobs)
        if day is not None:
            first_day[:] = [min([day, *first_day])]
        writer.write_table(_jobs_table(jobs))

    with tempfile.TemporaryDirectory(prefix="acme-parse-") as folder:
        local = os.path.join(folder, "parsed.parquet")
        with pq.ParquetWriter(local, job_arrow_schema(), compression="zstd", write_statistics=True) as writer:
            summary = parse_sacct_file(
                local_path, job_input.cluster, source_file=job_input.uri, fields=job_input.fields,
                day=job_input.day, tz=job_input.timezone, delimiter=job_input.delimiter, on_jobs=stage,
            )  # fmt: skip
        lake.upload_file(local, f"{staging}/parsed.parquet")
    _redact_rejects(summary.rejects)
    lake.write_parquet(
        f"{staging}/parse_rejects.parquet", pa.Table.from_pandas(summary.rejects, preserve_index=False)
    )
    return {
        "layout": "sacct",
        "rows_in": summary.rows_in,
        "parsed": summary.rows_ok,
        "parse_rejects": len(summary.rejects),
        "skipped_other_days": summary.skipped_other_days,
        "skipped": dict(summary.skipped),
        "first_day": first_day[0] if first_day else None,
        "notes": summary.notes,
    }


def validate_staged(
    lake: Lake,
    job_input: JobInput,
    staging: str,
    parsed: dict[str, Any],
    max_quarantine_share: float | None = None,
) -> dict[str, Any]:
    """Validate the staged rows; write the input's quarantine; stage the accepted rows."""
    from acme.schema import jobs_from_arrow
    from acme.validate import validate_jobs

    jobs = jobs_from_arrow(lake.read_parquet(f"{staging}/parsed.parquet"))
    parse_rejects = lake.read_parquet(f"{staging}/parse_rejects.parquet").to_pandas().astype(REJECT_COLUMNS)
    outcome = validate_jobs(jobs, layout=parsed["layout"], source_file=job_input.uri)
    first_day = date.fromisoformat(str(parsed["first_day"])) if parsed.get("first_day") else None
    quarantined, quarantine_url = record_input_outcome(
        lake, job_input, parse_rejects, outcome, first_day,
        parsed["rows_in"] - parsed["skipped_other_days"] - sum((parsed.get("skipped") or {}).values()),
        max_quarantine_share,
    )  # fmt: skip
    lake.write_parquet(f"{staging}/accepted.parquet", _jobs_table(outcome.accepted))
    lake.write_json(f"{staging}/validation.json", outcome.report)
    return {"accepted": len(outcome.accepted), "quarantined": len(quarantined), "quarantine": quarantine_url}


def publish_staged(lake: Lake, job_input: JobInput, staging: str) -> list[str]:
    """Merge the staged accepted rows into their partitions, then drop the staging area.

    A retry whose earlier try published but died while or after dropping the staging area (a killed
    worker) finds nothing staged: it returns the partitions that record this input in their
    ``_validation.json`` and finishes the drop.
    """
    from acme.schema import jobs_from_arrow

    if not lake.exists(f"{staging}/accepted.parquet"):
        partitions = partitions_holding(lake, job_input)
        if not partitions:
            raise InputError(
                lake.url(staging),
                "nothing staged and no partition holds this input: run its validate task again",
            )
        lake.delete_prefix(staging)
        return partitions
    accepted = jobs_from_arrow(lake.read_parquet(f"{staging}/accepted.parquet"))
    report = lake.read_json(f"{staging}/validation.json", default={})
    partitions = publish_jobs(lake, job_input, accepted, report)
    # The staged rows go first: while they exist, the rest of the staging area (the report) does too.
    lake.delete_prefix(f"{staging}/accepted.parquet")
    lake.delete_prefix(staging)
    return partitions


def partitions_holding(lake: Lake, job_input: JobInput) -> list[str]:
    """URLs of the cluster's job partitions whose ``_validation.json`` records ``job_input``, by day."""
    found = []
    for key in lake.list(f"jobs/cluster={job_input.cluster}"):
        if key.endswith("/_validation.json") and job_input.key in lake.read_json(key, {}).get("inputs", {}):
            found.append(lake.url(key.removesuffix("_validation.json") + "jobs.parquet"))
    return found


def _jobs_table(jobs: pd.DataFrame):
    import pyarrow as pa

    return pa.Table.from_pandas(jobs[list(JOB_COLUMNS)], schema=job_arrow_schema(), preserve_index=False)
