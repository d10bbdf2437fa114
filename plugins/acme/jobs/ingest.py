"""Job-trace ingest: parse a source, validate it, quarantine what fails, publish partitions.

One data path for the command line and the DAG. The parser's canonical rows become one Arrow
table; validation reads a narrow pandas frame of only the columns it checks
(:func:`acme.jobs.validate.validate_job_table`) and the accepted rows are an Arrow filter of the
table; publishing merges Arrow tables. The command line holds the table in memory; the DAG's
single ingest task per input (:func:`ingest_planned`) keeps two retry points in the lake: the
raw copy of the input and **one** staged copy of the parsed rows (``parsed.parquet``), so a
row is written three times (raw, staged, partition) instead of four.

Idempotency: a job's partition is the UTC day of its time key (submit time, else start, else
end: ``acme.jobs.schema.time_key_column``); publishing merges by job id under the partition's
lock (a terminal state replaces RUNNING, a newer record of the same rank replaces an older
one) and rewrites the partition whole, so re-runs, retries and overlapping backfills never
duplicate a job. Quarantine and validation entries are keyed by the input (its URI and day), so
they are replaced, not appended, by a re-run. A retry after a SIGKILL at any point restarts
from the last complete retry point (a marker written after its data) and converges on the
clean run's lake.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from acme import lake_keys, settings
from acme.errors import InputError, InputNotFoundError, QuarantineThresholdError
from acme.jobs.base import ParseResult, first_submit_day
from acme.jobs.formats import FORMAT_NAMES, check_cluster_source, job_format
from acme.jobs.schema import JOB_COLUMNS, canonical_job_table, job_arrow_schema
from acme.lake import Lake
from acme.rejects import REJECT_COLUMNS

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

    from acme.jobs.validate import TableOutcome

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
    for name in selected_clusters(clusters, cluster, source, FORMAT_NAMES, input_uri):
        jobs = clusters[name].jobs
        if source == "configured":
            check_cluster_source(clusters[name])
        fmt = jobs.format if source == "configured" else source
        live = jobs.command if (jobs.command and not input_uri and job_format(fmt, name).live) else None
        uri = input_uri or (f"{fmt}://" + "/".join(jobs.command) if live else jobs.input_for(name, day))
        delimiter = "|" if live else jobs.delimiter  # the live command asks for --parsable2
        job_input = JobInput(name, fmt, uri, day, jobs.fields, jobs.timezone, delimiter)
        planned.append({"input": job_input.to_dict(), "command": list(live) if live else None})
    return planned


# --- parse ----------------------------------------------------------------------------------


@dataclass
class Parsed:
    """A parsed input: the canonical rows as one Arrow table (None when they were streamed to a
    sink), the parse rejects, and the parser's accounting."""

    table: pa.Table | None
    rejects: pd.DataFrame
    layout: str
    rows_in: int
    rows_ok: int
    skipped_other_days: int
    skipped: dict[str, int]
    first_day: date | None
    notes: list[str]

    @property
    def rows_checked(self) -> int:
        """The rows the quarantine share is taken of: all but those skipped for a reason."""
        return self.rows_in - self.skipped_other_days - sum(self.skipped.values())

    def summary(self) -> dict[str, Any]:
        """JSON-ready accounting (the staged retry point's marker)."""
        return {
            "layout": self.layout,
            "rows_in": self.rows_in,
            "parsed": self.rows_ok,
            "parse_rejects": len(self.rejects),
            "skipped_other_days": self.skipped_other_days,
            "skipped": dict(self.skipped),
            "first_day": self.first_day.isoformat() if self.first_day else None,
            "notes": list(self.notes),
        }


def parse_job_input(job_input: JobInput, local_path: str | Path) -> tuple[ParseResult, str]:
    """Parse the local copy of an input with its format's parser (:mod:`acme.jobs.formats`);
    returns the result (secrets in job names and rejected records masked, see
    :mod:`acme.secrets`) and the layout to validate with."""
    from acme.secrets import redact_column

    parser = job_format(job_input.format, job_input.uri).load()
    result, layout = parser.parse_input(job_input, str(local_path))
    if _is_table(result.jobs):  # a parser that builds Arrow itself (AcmeTrace)
        result.jobs = _redact_names(result.jobs)
    else:
        result.jobs["job_name"] = redact_column(result.jobs["job_name"])
    _redact_rejects(result.rejects)
    return result, layout


def _is_table(jobs: Any) -> bool:
    import pyarrow as pa

    return isinstance(jobs, pa.Table)


def _redact_names(table: pa.Table) -> pa.Table:
    """:func:`acme.secrets.redact_column` over an Arrow table's job names (none: no work)."""
    import pyarrow as pa

    from acme.secrets import redact_column

    names = table["job_name"]
    if names.null_count == len(names):
        return table
    redacted = redact_column(names.cast(pa.large_string()).to_pandas())
    index = table.schema.get_field_index("job_name")
    return table.set_column(index, job_arrow_schema().field(index), pa.array(redacted, pa.large_string()))


def _first_day(table: pa.Table) -> date | None:
    """UTC day of the earliest time key (submit, else start, else end), or None."""
    import pyarrow.compute as pc

    if table.num_rows == 0:
        return None
    first = pc.min(pc.coalesce(table["submit_time"], table["start_time"], table["end_time"])).as_py()
    return None if first is None else first.date()


def _time_key(table: pa.Table, day: date | None):
    """Each row's time key (submit, else start, else end); a row with no time at all (a sacct
    export whose only time is Elapsed) takes the input's ``day`` (validation refuses it without)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    key = pc.coalesce(table["submit_time"], table["start_time"], table["end_time"])
    if day is None or key.null_count == 0:
        return key
    return pc.coalesce(key, pa.scalar(datetime.combine(day, time(0), tzinfo=UTC), key.type))


def _redact_rejects(rejects: pd.DataFrame) -> None:
    from acme.secrets import redact_column

    rejects["record"] = redact_column(rejects["record"])
    rejects["reason"] = redact_column(rejects["reason"])


def parse_to_table(job_input: JobInput, local_path: str | Path, sink: Any = None) -> Parsed:
    """Parse an input into Arrow. With ``sink`` (anything with ``write_table``, e.g. a Parquet
    writer) the rows go there (in batches when the format can stream, so the day's rows are
    never all in memory) and ``Parsed.table`` is None; without, they are returned."""
    parser = job_format(job_input.format, job_input.uri).load()
    if sink is not None and hasattr(parser, "stream_input"):
        return _stream_to_sink(parser, job_input, local_path, sink)
    result, layout = parse_job_input(job_input, local_path)
    table = result.jobs if _is_table(result.jobs) else _jobs_table(result.jobs)
    result.jobs = None  # the table is the one copy of the rows from here on
    if sink is not None:
        sink.write_table(canonical_job_table(table))
    return Parsed(
        None if sink is not None else table, result.rejects, layout, result.rows_in, table.num_rows,
        result.skipped_other_days, dict(result.skipped), _first_day(table), list(result.notes),
    )  # fmt: skip


def _stream_to_sink(parser: Any, job_input: JobInput, local_path: str | Path, sink: Any) -> Parsed:
    """Batches of masked rows (:mod:`acme.secrets`) appended to ``sink`` (the row order may differ
    from :func:`parse_job_input`'s for a job id seen twice; validation and publishing do not
    depend on it)."""
    from acme.secrets import redact_column

    first_day: list[date] = []

    def stage(jobs: pd.DataFrame) -> None:
        jobs["job_name"] = redact_column(jobs["job_name"])
        day = first_submit_day(jobs)
        if day is not None:
            first_day[:] = [min([day, *first_day])]
        sink.write_table(_jobs_table(jobs))

    summary, layout = parser.stream_input(job_input, str(local_path), stage)
    _redact_rejects(summary.rejects)
    return Parsed(
        None, summary.rejects, layout, summary.rows_in, summary.rows_ok, summary.skipped_other_days,
        dict(summary.skipped), first_day[0] if first_day else None, list(summary.notes),
    )  # fmt: skip


# --- validate, quarantine, publish ------------------------------------------------------------


def quarantine_frame(job_input: JobInput, rejects: pd.DataFrame, stage: str) -> pd.DataFrame:
    return rejects.assign(
        cluster=job_input.cluster, source=job_input.format, input=job_input.uri, stage=stage
    )[QUARANTINE_COLUMNS]


def input_artifact_key(area: str, job_input: JobInput, first_day: date | None, suffix: str) -> str:
    """Where a per-input artifact (quarantine, validation report) lives: by the run's day."""
    return lake_keys.job_input_artifact(
        area, job_input.cluster, job_input.day or first_day, job_input.key + suffix
    )


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
    max_share = settings.jobs().quarantine_max_share if max_share is None else max_share
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


def validate_and_publish(
    lake: Lake,
    job_input: JobInput,
    table: pa.Table,
    parsed: Parsed,
    max_quarantine_share: float | None = None,
    on_nothing: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Validate the parsed rows, write the input's quarantine and report, publish the accepted
    rows; ``on_nothing`` is called (to refuse the input) when nothing was accepted or quarantined."""
    from acme.jobs.validate import validate_job_table

    _release_freed_memory()  # the parse's temporaries are gone: validation starts from a smaller heap
    outcome = validate_job_table(table, layout=parsed.layout, source_file=job_input.uri, day=job_input.day)
    del table
    return record_and_publish(lake, job_input, parsed, outcome, max_quarantine_share, on_nothing)


def record_and_publish(
    lake: Lake,
    job_input: JobInput,
    parsed: Parsed,
    outcome: TableOutcome,
    max_quarantine_share: float | None = None,
    on_nothing: Callable[[], None] | None = None,
    prepared: dict[str, tuple[int, bytes]] | None = None,
) -> dict[str, Any]:
    """The second half of :func:`validate_and_publish`: quarantine, report and partitions of a
    validation's outcome (``prepared``: partitions encoded ahead, see :func:`prepare_partitions`)."""
    publisher, quarantined, quarantine_url = record_outcome(
        lake, job_input, parsed, outcome, max_quarantine_share, on_nothing, prepared
    )
    return _summary(parsed, outcome, quarantined, quarantine_url, publisher.publish_rest())


def record_outcome(
    lake: Lake,
    job_input: JobInput,
    parsed: Parsed,
    outcome: TableOutcome,
    max_quarantine_share: float | None = None,
    on_nothing: Callable[[], None] | None = None,
    prepared: dict[str, tuple[int, bytes]] | None = None,
    day_slices: SharedDaySlices | None = None,
) -> tuple[DayPublisher, pd.DataFrame, str | None]:
    """Write the quarantine and report of a validation's outcome (failing the input when too much is
    bad, or when nothing is left), then return the publisher of its accepted rows."""
    quarantined, quarantine_url = record_input_outcome(
        lake, job_input, parsed.rejects, outcome, parsed.first_day, parsed.rows_checked, max_quarantine_share
    )
    if on_nothing is not None and outcome.accepted.num_rows == 0 and quarantined.empty:
        on_nothing()
    _release_freed_memory()  # validation's frames are gone: publishing starts from a smaller heap
    return (
        DayPublisher(lake, job_input, outcome.accepted, outcome.report, prepared, day_slices),
        quarantined,
        quarantine_url,
    )


def _summary(
    parsed: Parsed,
    outcome: TableOutcome,
    quarantined: pd.DataFrame,
    quarantine_url: str | None,
    partitions: list[str],
) -> dict[str, Any]:
    return {
        "rows_in": parsed.rows_in,
        "rows": outcome.accepted.num_rows,
        "quarantined": len(quarantined),
        "skipped": dict(parsed.skipped),
        "skipped_other_days": parsed.skipped_other_days,
        "partitions": partitions,
        "quarantine": quarantine_url,
        "notes": parsed.notes,
    }


def _release_freed_memory() -> None:
    """Hand memory freed since the last call back to the OS (Arrow's pool asks its allocator to)."""
    import pyarrow as pa

    pa.default_memory_pool().release_unused()


class DayPublisher:
    """Merges accepted jobs (an Arrow table, or a canonical frame) into their time-key-day
    partitions, each day once: on its own (:meth:`publish_day`, as soon as its partition is
    encoded) or with the days left (:meth:`publish_rest`, which returns every day's URL).

    Each day is a zero-copy slice of the table, reordered by day first only when the input
    is not in submit order. Days are merged and encoded one after another: doing two at a time on
    threads added about 25 MB to the peak memory of a million-job command line (a heap per thread).

    ``prepared`` (:func:`prepare_partitions`): a day's partition already encoded from the parsed
    rows, written as it is when the partition does not exist yet and the day kept all its rows.
    Then publishing is mostly creating, syncing and renaming files (or PUTs to S3), which release
    the GIL, so the days are published :data:`PUBLISH_THREADS` at a time (each holds only its own
    day's lock).
    """

    def __init__(
        self,
        lake: Lake,
        job_input: JobInput,
        accepted: Any,
        report: dict[str, Any],
        prepared: dict[str, tuple[int, bytes]] | None = None,
        day_slices: SharedDaySlices | None = None,
    ) -> None:
        import pyarrow as pa

        self.lake, self.job_input, self.report = lake, job_input, report
        self.prepared = prepared if prepared is not None else {}
        table = accepted if isinstance(accepted, pa.Table) else _jobs_table(accepted)
        self.bounds: dict[str, tuple[int, int]] = {}
        if table.num_rows:
            slices = day_slices.take(table) if day_slices is not None else None
            table, days, bounds = slices if slices is not None else _day_slices(table, job_input.day)
            self.bounds = {str(days[start]): (start, stop) for start, stop in bounds}
        self.table = table
        self.urls: dict[str, str] = {}

    def kept_every_row(self, day_text: str) -> bool:
        """Whether the day's prepared partition holds exactly its accepted rows."""
        bound, encoded = self.bounds.get(day_text), self.prepared.get(day_text)
        # the day's accepted rows are a subsequence of its parsed rows: as many means the same
        return bound is not None and encoded is not None and encoded[0] == bound[1] - bound[0]

    def publish_day(self, day_text: str) -> str:
        start, stop = self.bounds[day_text]
        lake, job_input = self.lake, self.job_input
        with lake.lock(f"jobs-{job_input.cluster}-{day_text}"):
            key = lake_keys.jobs_partition(job_input.cluster, day_text)
            existing = lake.read_parquet(key) if lake.exists(key) else None
            if existing is None and self.kept_every_row(day_text):
                url, partition_rows = lake.write_bytes(key, self.prepared[day_text][1]), stop - start
            else:
                merged = merge_job_tables(
                    existing, canonical_job_table(self.table.slice(start, stop - start))
                )
                url, partition_rows = lake.write_bytes(key, partition_bytes(merged)), merged.num_rows
            record = lake_keys.jobs_validation_record(job_input.cluster, day_text)
            _record_validation(lake, record, job_input, self.report, stop - start, partition_rows)
        self.urls[day_text] = url
        return url

    def publish_rest(self) -> list[str]:
        """Publish the days not published yet; returns every day's partition URL, in day order."""
        left = [day for day in self.bounds if day not in self.urls]
        if not self.prepared or len(left) <= 1:
            for day in left:
                self.publish_day(day)
        else:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(PUBLISH_THREADS, thread_name_prefix="publish-jobs") as pool:
                list(pool.map(self.publish_day, left))  # the first failure is raised
        return [self.urls[day] for day in self.bounds]


# Days published at a time when their partitions were encoded ahead: 184 days of a million-job
# trace took 0.56-1.18 s one at a time (file creation, fsync and directory creation: 0.6 s of it)
# on this machine's disk.
PUBLISH_THREADS = 4


class SharedDaySlices:
    """The day slices of the parsed rows (:func:`_day_slices`), computed once by
    :func:`prepare_partitions` and taken by the :class:`DayPublisher` of the same table (the accepted
    rows, when validation kept every row). Computing them again took 0.3-0.4 s of ten million jobs, on
    the validation's thread between its end and the first publish."""

    def __init__(self) -> None:
        import threading

        self._ready = threading.Event()
        self._slices: tuple[pa.Table, tuple[pa.Table, Any, list[tuple[int, int]]]] | None = None

    def offer(self, table: pa.Table, slices: tuple[pa.Table, Any, list[tuple[int, int]]]) -> None:
        self._slices = (table, slices)

    def close(self) -> None:
        """Nothing more will be offered: :meth:`take` stops waiting."""
        self._ready.set()

    def take(self, table: pa.Table) -> tuple[pa.Table, Any, list[tuple[int, int]]] | None:
        """The slices if they were computed of ``table`` itself, else None; released either way."""
        self._ready.wait()
        found, self._slices = self._slices, None
        return found[1] if found is not None and found[0] is table else None


def _day_slices(table: pa.Table, day: date | None) -> tuple[pa.Table, Any, list[tuple[int, int]]]:
    """The table in time-key-day order (itself when it already is: traces usually are in submit
    order), each row's day, and the (start, stop) rows of each day."""
    import numpy as np
    import pyarrow.compute as pc

    days = pc.cast(_time_key(table, day), "date32").to_numpy(zero_copy_only=False)
    if (days[1:] < days[:-1]).any():
        order = np.argsort(days, kind="stable")
        table, days = table.take(order), days[order]
    starts = _run_starts(days)
    return table, days, list(zip(starts, [*starts[1:], len(days)], strict=True))


# Columns with few distinct values, dictionary-encoded in the partitions' Parquet; the others
# (ids, times, durations, line numbers) are nearly unique per row and stored plain: trying a
# dictionary on them costs a hash per value for nothing.
_DICTIONARY_COLUMNS = [
    "cluster", "job_name", "user", "job_type", "state", "state_group", "node_list", "source",
    "source_file", "gpu_num", "gpu_share", "cpu_num", "node_num", "exit_code",
]  # fmt: skip


def partition_bytes(table: pa.Table) -> bytes:
    """A job partition as Parquet (zstd, with statistics).

    Written into Arrow's own buffer, not a Python one: each page written to an ``io.BytesIO`` waits
    for the GIL, which the validation's thread holds most of the time while the days are encoded."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    buffer = pa.BufferOutputStream()
    pq.write_table(
        table, buffer, compression="zstd", write_statistics=True, use_dictionary=_DICTIONARY_COLUMNS
    )
    return buffer.getvalue().to_pybytes()


def prepare_partitions(
    table: pa.Table,
    day: date | None,
    keep_going: Callable[[], bool],
    second_hand_after: Callable[[], Any] | None = None,
    prepared: dict[str, tuple[int, bytes]] | None = None,
    on_encoded: Callable[[str], None] | None = None,
    day_slices: SharedDaySlices | None = None,
) -> dict[str, tuple[int, bytes]]:
    """Encode the day partitions of the parsed rows ahead of validation, while ``keep_going()``:
    ``{day: (rows, Parquet bytes)}`` (filled into ``prepared`` when given, and ``on_encoded(day)``
    called after each), as :class:`DayPublisher` would write them into an empty
    partition. With ``second_hand_after``, a second thread joins in once that call returns (the
    validation's end: the core it used is free). A day that loses rows in validation is encoded
    again from its accepted rows; nothing is prepared for a table whose schema or time keys
    validation refuses. ``day_slices``: where the days' slices are offered to the publisher."""
    import threading

    slices = _partition_slices(table, day, day_slices)
    if slices is None:
        return {}
    table, days, bounds = slices
    presorted = _in_partition_order(table, days)
    work, taking = iter(bounds), threading.Lock()
    prepared = {} if prepared is None else prepared

    def encode_days() -> None:
        while keep_going():
            with taking:
                bound = next(work, None)
            if bound is None:
                return
            start, stop = bound
            # A day with a job id twice loses both rows in validation, so its bytes are never used:
            # sorting is all merge_job_tables would do to a day that keeps all its rows.
            rows = canonical_job_table(table.slice(start, stop - start))
            day_text = str(days[start])
            prepared[day_text] = (
                stop - start,
                partition_bytes(rows if presorted else rows.sort_by(PARTITION_ORDER)),
            )
            if on_encoded is not None:
                on_encoded(day_text)

    def second_hand() -> None:
        if second_hand_after is not None:
            second_hand_after()
        encode_days()

    helper = threading.Thread(target=second_hand, name="encode-partitions") if second_hand_after else None
    if helper is not None:
        helper.start()
    encode_days()
    if helper is not None:
        helper.join()
    return prepared


def _partition_slices(
    table: pa.Table, day: date | None, shared: SharedDaySlices | None
) -> tuple[pa.Table, Any, list[tuple[int, int]]] | None:
    """The day slices :func:`prepare_partitions` encodes (None when it encodes nothing), offered to
    ``shared``, which is closed whatever happens here."""
    from acme.jobs.schema import job_schema_drift, with_current_columns

    try:
        table = with_current_columns(table)
        if table.num_rows == 0 or job_schema_drift(table.schema) or _time_key(table, day).null_count:
            return None
        slices = _day_slices(table, day)
        if shared is not None:
            shared.offer(table, slices)
        return slices
    finally:
        if shared is not None:
            shared.close()


def _in_partition_order(table: pa.Table, days) -> bool:
    """Whether rows in day order (``days``: each row's day) are also in :data:`PARTITION_ORDER`
    within each day, as a trace written in submit order is: then no day needs sorting. Rows
    without a submit time or job id are left to the sort (it places them last)."""
    import numpy as np
    import pyarrow.compute as pc

    submitted, job_ids = table["submit_time"], table["job_id"]
    if submitted.null_count or job_ids.null_count:
        return False
    times = submitted.to_numpy()
    same_day = days[1:] == days[:-1]
    if (same_day & (times[1:] < times[:-1])).any():
        return False
    ties = np.flatnonzero(same_day & (times[1:] == times[:-1]))  # same day and second: by job id
    return len(ties) == 0 or pc.all(pc.less_equal(job_ids.take(ties), job_ids.take(ties + 1))).as_py()


def _run_starts(values) -> list[int]:
    """Indexes where a run of equal values begins in a sorted array."""
    import numpy as np

    if len(values) == 0:
        return []
    return [0, *(np.flatnonzero(values[1:] != values[:-1]) + 1).tolist()]


# The order of the rows in a job partition.
PARTITION_ORDER = [("submit_time", "ascending"), ("job_id", "ascending")]


def merge_job_tables(existing, incoming):
    """One row per job id: terminal states beat RUNNING; otherwise the incoming record wins."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if existing is None or existing.num_rows == 0:
        if pc.count_distinct(incoming["job_id"]).as_py() == incoming.num_rows:
            return incoming.sort_by(PARTITION_ORDER)  # a new partition of unique jobs: nothing to merge
        combined = incoming.append_column("_incoming", pa.array([1] * incoming.num_rows, pa.int8()))
    else:
        from acme.jobs.schema import with_current_columns

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
    return kept.sort_by(PARTITION_ORDER)


def _record_validation(
    lake: Lake, key: str, job_input: JobInput, report: dict[str, Any], rows: int, partition_rows: int
) -> None:
    """Note in the partition's ``_validation.json`` (``key``) which input wrote what, and its report."""
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
    import pyarrow as pa

    from acme.jobs.validate import preload_in_background

    # A large file makes many short-lived column-sized buffers (parse, encoding, validation): the
    # system allocator returns them to the OS when freed. With mimalloc (Arrow's default) the peak
    # of a million-job file was 670-700 MB against 630-645 MB, 3 runs each (at ten million jobs
    # neither was faster).
    pa.set_memory_pool(pa.system_memory_pool())
    preloading = preload_in_background()
    parsed = parse_to_table(job_input, local_path)
    table, parsed.table = parsed.table, None
    assert table is not None

    def refuse() -> None:
        refuse_empty_input(job_input, parsed.rows_in, parsed.skipped, parsed.skipped_other_days)

    return validate_while_preparing(
        lake, job_input, table, parsed, max_quarantine_share, on_nothing=refuse, after=preloading.join
    )


# The interpreter's thread switch interval while the partitions are encoded beside the validation
# (Python's default: 5 ms). On the 1M-job trace py-spy counted about 2.5 s of the encoding threads
# waiting for the GIL on returning from Arrow's casts and Parquet writes; with 0.2 ms the encoding
# ended 0.25 s sooner (medians of 4 alternated runs: 1.85 against 2.1 s).
ENCODING_SWITCH_INTERVAL_S = 0.0002


def validate_while_preparing(
    lake: Lake,
    job_input: JobInput,
    table: pa.Table,
    parsed: Parsed,
    max_quarantine_share: float | None = None,
    on_nothing: Callable[[], None] | None = None,
    after: Callable[[], None] | None = None,
    prepare_all: bool = False,
) -> dict[str, Any]:
    """:func:`validate_and_publish` with the validation on a thread (its suite run after ``after()``:
    the import of great-expectations; the frame it reads is built before) while this one encodes
    the partitions of the parsed rows (:func:`prepare_partitions`, two threads once the validation
    is done; stopped if it fails; ``prepare_all``: every day on this thread, whatever the
    validation does).

    Validation is mostly Python, encoding mostly Arrow, which releases the GIL: on two cores they
    overlap. The outcome decides as in :func:`validate_and_publish`, and nothing is published
    before its quarantine and report are written and its share of bad rows is allowed. From then
    on each day encoded is published while the others are still being encoded (on
    :data:`PUBLISH_THREADS` threads: publishing is file or S3 I/O), and the days left after.

    Meanwhile the interpreter switches threads every :data:`ENCODING_SWITCH_INTERVAL_S`: each
    Arrow call of the encoding releases the GIL and then waits for the validation's thread to
    hand it back.
    """
    import sys
    import threading
    from concurrent.futures import Future, ThreadPoolExecutor

    prepared: dict[str, tuple[int, bytes]] = {}
    day_slices = SharedDaySlices()
    validated, guard = threading.Event(), threading.Lock()
    publisher: list[DayPublisher] = []  # set once the outcome is recorded
    submitted: dict[str, Future] = {}
    early = ThreadPoolExecutor(PUBLISH_THREADS, thread_name_prefix="publish-jobs")

    def publish_early(day_text: str) -> None:  # with guard held
        if publisher and day_text not in submitted and publisher[0].kept_every_row(day_text):
            submitted[day_text] = early.submit(publisher[0].publish_day, day_text)

    def on_encoded(day_text: str) -> None:
        with guard:
            publish_early(day_text)

    def validate_and_record(rows: pa.Table) -> tuple[TableOutcome, pd.DataFrame, str | None]:
        try:
            outcome = _validate_after(after, rows, parsed.layout, job_input)
        finally:
            validated.set()
        recorded, quarantined, url = record_outcome(
            lake, job_input, parsed, outcome, max_quarantine_share, on_nothing, prepared, day_slices
        )
        with guard:
            publisher.append(recorded)
            for day_text in list(prepared):  # the days encoded so far
                publish_early(day_text)
        return outcome, quarantined, url

    switch_interval = sys.getswitchinterval()
    sys.setswitchinterval(ENCODING_SWITCH_INTERVAL_S)
    try:
        with ThreadPoolExecutor(1, thread_name_prefix="validate-jobs") as pool:
            validating = pool.submit(validate_and_record, table)
            prepare_partitions(
                table,
                job_input.day,
                lambda: prepare_all or not (validating.done() and validating.exception() is not None),
                second_hand_after=None if prepare_all else validated.wait,
                prepared=prepared,
                on_encoded=on_encoded,
                day_slices=day_slices,
            )
            outcome, quarantined, quarantine_url = validating.result()
        for future in list(submitted.values()):
            future.result()  # the first failure is raised
    finally:
        early.shutdown(wait=True, cancel_futures=True)
        sys.setswitchinterval(switch_interval)
    del table
    return _summary(parsed, outcome, quarantined, quarantine_url, publisher[0].publish_rest())


def _validate_after(
    after: Callable[[], None] | None, table: pa.Table, layout: str, job_input: JobInput
) -> TableOutcome:
    from acme.jobs.validate import validate_job_table

    return validate_job_table(
        table, layout=layout, source_file=job_input.uri, day=job_input.day, before_suite=after
    )


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
    outcome: TableOutcome,
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


# --- the DAG's one ingest task per input, with its two retry points in the lake --------------


def staging_prefix(run_id: str, job_input: JobInput) -> str:
    return f"{lake_keys.staging('ingest_jobs', run_id)}/{job_input.key}"


def raw_key(job_input: JobInput) -> str:
    suffix = "".join(Path(job_input.uri.split("?")[0]).suffixes[-2:])
    suffix = suffix or job_format(job_input.format, job_input.uri).raw_suffix
    return lake_keys.raw_jobs(job_input.cluster, job_input.day, job_input.key + suffix)


def extract_job_input(lake: Lake, job_input: JobInput, command: Sequence[str] | None = None) -> str:
    """Copy the day's input (or run the format's live command) into the lake's raw area; returns its key."""
    key = raw_key(job_input)
    if command:
        lake.write_bytes(
            key, job_format(job_input.format, job_input.uri).load().live_export(job_input, command)
        )
        return key
    import fsspec

    from acme.text_input import refuse_above_limit

    try:
        fs, path = fsspec.core.url_to_fs(job_input.uri)
        size = fs.size(path)  # None when the server does not say (HTTP without a length)
        if size is not None:
            refuse_above_limit(size, job_input.uri)  # the copy below holds the input whole
        with fs.open(path, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        raise InputNotFoundError(
            job_input.uri, f"no input for {job_input.cluster} on {job_input.day}"
        ) from None
    except OSError as exc:
        raise InputError(job_input.uri, f"cannot read: {exc}") from exc
    lake.write_bytes(key, data)
    return key


def parse_staged(lake: Lake, job_input: JobInput, raw: str, staging: str) -> dict[str, Any]:
    """Parse the raw copy into the one staged copy (``parsed.parquet``, written from a local
    Parquet file the rows stream into) and the parse rejects; returns the parse's accounting."""
    import os
    import tempfile

    import pyarrow as pa
    import pyarrow.parquet as pq

    with tempfile.TemporaryDirectory(prefix="acme-parse-") as folder, lake.local_file(raw) as local_path:
        local = os.path.join(folder, "parsed.parquet")
        with pq.ParquetWriter(local, job_arrow_schema(), compression="zstd", write_statistics=True) as writer:
            parsed = parse_to_table(job_input, local_path, sink=writer)
        lake.upload_file(local, f"{staging}/parsed.parquet")
    lake.write_parquet(
        f"{staging}/parse_rejects.parquet", pa.Table.from_pandas(parsed.rejects, preserve_index=False)
    )
    return parsed.summary()


def publish_parsed(
    lake: Lake,
    job_input: JobInput,
    staging: str,
    summary: dict[str, Any],
    max_quarantine_share: float | None = None,
) -> dict[str, Any]:
    """Validate the staged rows, write the input's quarantine and report, publish, drop the staging."""
    table = lake.read_parquet(f"{staging}/parsed.parquet")
    rejects = lake.read_parquet(f"{staging}/parse_rejects.parquet").to_pandas().astype(REJECT_COLUMNS)
    first_day = date.fromisoformat(summary["first_day"]) if summary.get("first_day") else None
    parsed = Parsed(
        None, rejects, summary["layout"], summary["rows_in"], summary["parsed"],
        summary["skipped_other_days"], dict(summary.get("skipped") or {}), first_day, list(summary.get("notes") or []),
    )  # fmt: skip
    done = validate_and_publish(lake, job_input, table, parsed, max_quarantine_share)
    # The marker goes first: a retry never trusts a half-dropped staging area (it parses the raw copy again).
    lake.delete_prefix(f"{staging}/parsed.json")
    lake.delete_prefix(staging)
    return done


def ingest_planned(
    lake: Lake, planned: dict[str, Any], run_id: str, max_quarantine_share: float | None = None
) -> dict[str, Any]:
    """The DAG's ingest task for one planned input: extract → parse → validate → publish.

    Retry points: ``raw.json`` (after the raw copy) and ``parsed.json`` (after the staged rows
    and rejects), each written after the data it stands for; a retry resumes after the last one
    present. Validation and publishing are redone whole by a retry (they replace what they
    wrote), and the staging area is dropped last. A missing input raises
    :class:`~acme.errors.InputNotFoundError`, which Airflow retries (the data may not have
    arrived yet); bad input raises an :class:`~acme.errors.InputError`, final.
    """
    job_input = JobInput.from_dict(planned["input"])
    staging = staging_prefix(run_id, job_input)
    summary = lake.read_json(f"{staging}/parsed.json")
    if summary is None:
        raw = (lake.read_json(f"{staging}/raw.json") or {}).get("raw")
        if raw is None:
            raw = extract_job_input(lake, job_input, planned.get("command"))
            lake.write_json(f"{staging}/raw.json", {"raw": raw})
        summary = parse_staged(lake, job_input, raw, staging)
        lake.write_json(f"{staging}/parsed.json", summary)
    done = publish_parsed(lake, job_input, staging, summary, max_quarantine_share)
    return {"cluster": job_input.cluster, "day": job_input.day.isoformat() if job_input.day else None, **done}


def _jobs_table(jobs: pd.DataFrame) -> pa.Table:
    import pyarrow as pa

    return pa.Table.from_pandas(jobs[list(JOB_COLUMNS)], schema=job_arrow_schema(), preserve_index=False)
