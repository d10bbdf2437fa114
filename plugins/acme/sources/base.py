"""What every job-source parser returns, and helpers to build it.

A parser never drops a record silently: each input record ends up either as a canonical
row in ``jobs`` or as a row in ``rejects`` with the reason, so that
``rows_in == len(jobs) + len(rejects) + skipped_other_days`` always holds.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from acme.schema import JOB_COLUMNS, STATE_GROUPS

if TYPE_CHECKING:
    import pandas as pd

REJECT_COLUMNS = {"source_file": "str", "source_line": "Int64", "reason": "str", "record": "str"}


@dataclass
class ParseResult:
    jobs: pd.DataFrame  # canonical columns, see acme.schema.JOB_COLUMNS
    rejects: pd.DataFrame  # REJECT_COLUMNS: the record as text and why it could not be parsed
    rows_in: int  # records seen (jobs, after folding Slurm steps into their job)
    skipped_other_days: int = 0  # records for other days when a day was asked for
    notes: list[str] = field(default_factory=list)  # warnings worth showing to the operator

    def __post_init__(self) -> None:
        accounted = len(self.jobs) + len(self.rejects) + self.skipped_other_days
        if accounted != self.rows_in:
            raise AssertionError(
                f"parser lost records: rows_in={self.rows_in} but jobs={len(self.jobs)}, "
                f"rejects={len(self.rejects)}, skipped_other_days={self.skipped_other_days}"
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
    frame["gpu_time"] = frame["gpu_time"].fillna(frame["gpu_num"].astype("float64") * frame["run_s"])
    return frame[list(JOB_COLUMNS)]


def rejects_frame(records: list[dict[str, Any]]) -> pd.DataFrame:
    """Rejects DataFrame from dicts with source_file, source_line, reason, record."""
    import pandas as pd

    frame = pd.DataFrame.from_records(records, columns=list(REJECT_COLUMNS))
    return frame.astype(REJECT_COLUMNS)


def first_submit_day(jobs: pd.DataFrame):
    """UTC day of the earliest submit time, or None when there is none."""
    first = jobs["submit_time"].min() if len(jobs) else None
    return None if first is None or first != first else first.date()


def record_text(fields: dict[str, Any]) -> str:
    """A rejected record as JSON text, for the quarantine."""
    return json.dumps(fields, default=str, ensure_ascii=False, sort_keys=True)
