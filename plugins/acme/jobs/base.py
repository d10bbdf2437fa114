"""What every job-source parser returns, and helpers to build it.

A parser never drops a record silently: each input record ends up either as a canonical
row in ``jobs`` or as a row in ``rejects`` with the reason, or as a count in ``skipped`` under the reason it is not a job record (a pending job, a comment
line, a Kubernetes object that is not a job), so that
``rows_in == len(jobs) + len(rejects) + skipped_other_days + sum(skipped.values())`` always holds.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any, NamedTuple

from acme.errors import InputError
from acme.jobs.schema import JOB_COLUMNS, STATE_GROUPS

if TYPE_CHECKING:
    import pandas as pd

REJECT_COLUMNS = {"source_file": "str", "source_line": "Int64", "reason": "str", "record": "str"}


@dataclass
class ParseResult:
    jobs: pd.DataFrame  # canonical columns, see acme.jobs.schema.JOB_COLUMNS
    rejects: pd.DataFrame  # REJECT_COLUMNS: the record as text and why it could not be parsed
    rows_in: int  # records seen (jobs, after folding Slurm steps into their job)
    skipped_other_days: int = 0  # records for other days when a day was asked for
    notes: list[str] = field(default_factory=list)  # warnings worth showing to the operator
    skipped: dict[str, int] = field(default_factory=dict)  # records that are not jobs, by reason

    def __post_init__(self) -> None:
        check_accounting(
            self.rows_in,
            len(self.jobs),
            len(self.rejects),
            self.skipped_other_days,
            sum(self.skipped.values()),
        )


@dataclass
class ParseSummary:
    """A parse whose canonical rows were handed over in batches: a :class:`ParseResult` without
    ``jobs`` (``rows_ok`` of them), with the same accounting."""

    rejects: pd.DataFrame
    rows_in: int
    rows_ok: int
    skipped_other_days: int = 0
    notes: list[str] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_accounting(
            self.rows_in, self.rows_ok, len(self.rejects), self.skipped_other_days, sum(self.skipped.values())
        )


def check_accounting(
    rows_in: int, jobs: int, rejects: int, skipped_other_days: int, skipped: int = 0
) -> None:
    """Every record seen is a job, a reject, a record of another day or skipped with a reason:
    a parser that loses one fails."""
    if jobs + rejects + skipped_other_days + skipped != rows_in:
        raise AssertionError(
            f"parser lost records: rows_in={rows_in} but jobs={jobs}, "
            f"rejects={rejects}, skipped_other_days={skipped_other_days}, skipped={skipped}"
        )


def jobs_frame(records: list[dict[str, Any]]) -> pd.DataFrame:
    """Canonical DataFrame from dicts keyed by JOB_COLUMNS (missing keys become null).

    ``state_group``, ``queue_s``, ``run_s`` and ``gpu_time`` are derived here when absent so
    every parser computes them the same way.
    """
    import pandas as pd

    frame = pd.DataFrame.from_records(records, columns=list(JOB_COLUMNS))
    return finish_jobs_frame(frame)


def finish_jobs_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """Cast to canonical dtypes and derive the computed columns where they are null."""
    import pandas as pd

    for name in ("submit_time", "start_time", "end_time"):
        frame[name] = pd.to_datetime(frame[name], utc=True).astype("datetime64[us, UTC]")
    for name, dtype in JOB_COLUMNS.items():
        if name in ("submit_time", "start_time", "end_time"):
            continue
        if dtype == "str":
            frame[name] = frame[name].astype("str").where(frame[name].notna(), None)
        else:
            frame[name] = frame[name].astype(dtype)
    frame["state_group"] = frame["state_group"].fillna(frame["state"].map(STATE_GROUPS))
    frame["queue_s"] = frame["queue_s"].fillna(
        (frame["start_time"] - frame["submit_time"]).dt.total_seconds()
    )
    frame["run_s"] = frame["run_s"].fillna((frame["end_time"] - frame["start_time"]).dt.total_seconds())
    gpus = frame["gpu_share"].fillna(frame["gpu_num"].astype("float64"))
    frame["gpu_time"] = frame["gpu_time"].fillna(gpus * frame["run_s"])
    return frame[list(JOB_COLUMNS)]


def rejects_frame(records: list[dict[str, Any]]) -> pd.DataFrame:
    """Rejects DataFrame from dicts with source_file, source_line, reason, record."""
    import pandas as pd

    frame = pd.DataFrame.from_records(records, columns=list(REJECT_COLUMNS))
    return frame.astype(REJECT_COLUMNS)


def first_submit_day(jobs: pd.DataFrame):
    """UTC day of the earliest time key (submit, else start, else end), or None when there is none."""
    from acme.jobs.schema import time_key_column

    first = time_key_column(jobs).min() if len(jobs) else None
    return None if first is None or first != first else first.date()


def record_text(fields: dict[str, Any]) -> str:
    """A rejected record as JSON text, for the quarantine."""
    return json.dumps(fields, default=str, ensure_ascii=False, sort_keys=True)


# --- reading inputs in bounded memory --------------------------------------------------------

CHUNK_BYTES = 8 * 1024 * 1024  # read this much of a file at a time
MAX_LINE_BYTES = 1024 * 1024  # a longer line is rejected (its first bytes kept), never held whole
LONG_LINE_HEAD_BYTES = 1024  # what is kept of a line above the limit, for the reject's record


def max_input_bytes() -> int:
    """Largest input a parser that holds its input whole accepts (``ACME_MAX_INPUT_BYTES``, 1 GiB)."""
    from acme import settings

    return settings.jobs().max_input_bytes


def check_input_size(path: str | os.PathLike, source_file: str, limit: int | None = None) -> int:
    """The input's size in bytes; :class:`InputError` naming the file, its size and the limit when
    it is larger than ``limit`` (default :func:`max_input_bytes`), before anything is read."""
    try:
        size = os.path.getsize(path)
    except OSError as exc:
        raise InputError(source_file, f"cannot read: {exc.strerror or exc}") from exc
    refuse_above_limit(size, source_file, limit)
    return size


def refuse_above_limit(size: int, source_file: str, limit: int | None = None) -> None:
    """:class:`InputError` naming the input, its size and the limit when ``size`` is above it."""
    limit = max_input_bytes() if limit is None else limit
    if size > limit:
        raise InputError(
            source_file,
            f"input is {size:,} bytes, above the limit of {limit:,} bytes (ACME_MAX_INPUT_BYTES); "
            "refused before reading: split the input or raise the limit",
        )


class RawLine(NamedTuple):
    """One physical line of an input, without its ``\\n``."""

    number: int  # 1-based
    data: bytes  # the line, or its first LONG_LINE_HEAD_BYTES when ``too_long``
    offset: int  # byte offset of the line's start in the input
    length: int  # the line's full length in bytes
    too_long: bool  # longer than the limit: only its head was kept


def iter_raw_lines(
    handle: IO[bytes], *, chunk_bytes: int = CHUNK_BYTES, max_line_bytes: int = MAX_LINE_BYTES
) -> Iterator[RawLine]:
    """The lines of a binary stream split on ``\\n`` only (as ``text.split("\\n")``, without the
    empty piece after a final newline), reading ``chunk_bytes`` at a time. Memory stays below
    ``chunk_bytes`` + ``max_line_bytes`` whatever the input: a longer line is skipped through
    and yielded with ``too_long`` and its head only. Bytes are not decoded, so a multi-byte
    character split between two reads is whole in its line."""
    number = 0
    offset = 0  # of the start of ``pending``
    pending = b""
    long_line: RawLine | None = None  # a line above the limit being skipped through
    while True:
        chunk = handle.read(chunk_bytes)
        if not chunk:
            break
        if long_line is not None:
            end = chunk.find(b"\n")
            head = long_line.data
            if len(head) < LONG_LINE_HEAD_BYTES:  # (only when the limit is below the head's size)
                head += chunk[: min(LONG_LINE_HEAD_BYTES - len(head), len(chunk) if end < 0 else end)]
            if end < 0:
                long_line = long_line._replace(data=head, length=long_line.length + len(chunk))
                continue
            yield long_line._replace(data=head, length=long_line.length + end)
            offset = long_line.offset + long_line.length + end + 1
            long_line = None
            chunk = chunk[end + 1 :]
        buffer = pending + chunk if pending else chunk
        start = 0
        while True:
            end = buffer.find(b"\n", start)
            if end < 0:
                break
            number += 1
            length = end - start
            if length > max_line_bytes:
                yield RawLine(
                    number, buffer[start : min(end, start + LONG_LINE_HEAD_BYTES)], offset, length, True
                )
            else:
                yield RawLine(number, buffer[start:end], offset, length, False)
            offset += length + 1
            start = end + 1
        pending = buffer[start:]
        if len(pending) > max_line_bytes:
            number += 1
            long_line = RawLine(number, pending[:LONG_LINE_HEAD_BYTES], offset, len(pending), True)
            pending = b""
    if long_line is not None:
        yield long_line
    elif pending:
        number += 1
        too_long = len(pending) > max_line_bytes
        yield RawLine(
            number, pending[:LONG_LINE_HEAD_BYTES] if too_long else pending, offset, len(pending), too_long
        )


def long_line_reason(length: int, kept: int, max_line_bytes: int) -> str:
    """The reject reason for a line of ``length`` bytes above the limit, ``kept`` of them kept."""
    return (
        f"line of {length:,} bytes is longer than the limit of {max_line_bytes:,} bytes; "
        f"only its first {kept:,} bytes are kept in the record"
    )
