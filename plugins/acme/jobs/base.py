"""What every job-source parser returns, and helpers to build it.

A parser never drops a record silently: each input record ends up either as a canonical
row in ``jobs`` or as a row in ``rejects`` with the reason, or as a count in ``skipped`` under the reason it is not a job record (a pending job, a comment
line, a Kubernetes object that is not a job), so that
``rows_in == len(jobs) + len(rejects) + skipped_other_days + sum(skipped.values())`` always holds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from acme.jobs.schema import JOB_COLUMNS, STATE_GROUPS

if TYPE_CHECKING:
    import pandas as pd


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


def first_submit_day(jobs: pd.DataFrame):
    """UTC day of the earliest time key (submit, else start, else end), or None when there is none."""
    from acme.jobs.schema import time_key_column

    first = time_key_column(jobs).min() if len(jobs) else None
    return None if first is None or first != first else first.date()
