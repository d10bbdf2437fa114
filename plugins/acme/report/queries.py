"""The report's SQL (``include/sql/report``) run by DuckDB directly over the lake's Parquet files.

DuckDB scans only the columns a query needs and aggregates as it streams, so memory stays flat
however many days a period holds; only the small results (tens to thousands of rows) reach
pandas. A local lake is read by path; an S3 lake through the lake's own fsspec filesystem,
registered with DuckDB (its httpfs extension cannot be downloaded here, and the credentials then
are exactly the lake's).
"""

from __future__ import annotations

import re
from functools import cache
from typing import TYPE_CHECKING, Any

from acme import config
from acme.errors import InputError
from acme.report import settings
from acme.report.periods import Period

if TYPE_CHECKING:
    import pandas as pd

    from acme.lake import Lake

_DATE = re.compile(r"/date=(\d{4}-\d{2}-\d{2})/")


class NoJobsError(InputError):
    """The lake holds no job partition of the cluster in the period: there is nothing to report."""


@cache
def sql_text(name: str) -> str:
    return (config.sql_dir() / "report" / f"{name}.sql").read_text()


def partition_keys(lake: Lake, area: str, period: Period, filename: str) -> list[str]:
    """Keys of ``<area>/.../date=<d>/<filename>`` whose day lies in the period, sorted by day."""
    from datetime import date

    keys = []
    for key in lake.list(area):
        match = _DATE.search(key)
        if key.endswith(f"/{filename}") and match and period.contains(date.fromisoformat(match.group(1))):
            keys.append(key)
    return sorted(keys, key=partition_day)


def partition_day(key: str) -> str:
    match = _DATE.search(key)
    if match is None:
        raise ValueError(f"{key}: not a partition key (no date=YYYY-MM-DD in it)")
    return match.group(1)


class ReportQueries:
    """One DuckDB connection over the partitions of a cluster and period."""

    def __init__(self, lake: Lake, cluster: str, period: Period, definition: str = "run"):
        import duckdb

        self.lake, self.cluster, self.period = lake, cluster, period
        self.paper = definition == "paper"
        self.job_keys = partition_keys(lake, f"jobs/cluster={cluster}", period, "jobs.parquet")
        if not self.job_keys:
            raise NoJobsError(lake.url(f"jobs/cluster={cluster}"), f"no job partitions in {period.title}")
        self.diagnosis_keys = partition_keys(
            lake, f"diagnoses/cluster={cluster}", period, "diagnoses.parquet"
        )
        self.con = duckdb.connect(
            config={
                "threads": settings.duckdb_threads(),
                "memory_limit": settings.duckdb_memory_limit(),
                "TimeZone": "UTC",
                "autoinstall_known_extensions": False,
            }
        )
        self.con.execute("SET enable_progress_bar = false")
        if not lake.is_local:
            self.con.register_filesystem(lake.fs)
        self.con.execute(sql_text("create_report_macros"))

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> ReportQueries:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def location(self, key: str) -> str:
        """What DuckDB opens for a lake key: a local path, or a URL of the registered filesystem."""
        if self.lake.is_local:
            return self.lake.path(key)
        protocol = self.lake.fs.protocol
        protocol = protocol[0] if isinstance(protocol, tuple | list) else protocol
        return f"{protocol}://{self.lake.path(key)}"

    @property
    def job_files(self) -> list[str]:
        return [self.location(k) for k in self.job_keys]

    @property
    def diagnosis_files(self) -> list[str]:
        return [self.location(k) for k in self.diagnosis_keys]

    @property
    def days(self) -> list[str]:
        return [partition_day(k) for k in self.job_keys]

    def run(self, name: str, **params: Any) -> pd.DataFrame:
        """Run ``include/sql/report/<name>.sql`` with bind parameters; the (small) result as a frame."""
        return self.con.execute(sql_text(name), params).df()

    def jobs(self, name: str, paper: bool | None = None, **params: Any) -> pd.DataFrame:
        """A job query over the period's partitions with the report's run-time definition
        (or the one ``paper`` asks for)."""
        return self.run(name, files=self.job_files, paper=self.paper if paper is None else paper, **params)

    def diagnosed(self, name: str) -> pd.DataFrame | None:
        """A query joining jobs with diagnosis records; None while there are no records."""
        if not self.diagnosis_keys:
            return None
        return self.run(name, files=self.job_files, paper=self.paper, diagnoses=self.diagnosis_files)

    def metric_keys(self, area: str, metric: str, filename: str) -> list[str]:
        return partition_keys(
            self.lake, f"{area}/metric={metric}/cluster={self.cluster}", self.period, filename
        )

    def metric_histogram(self, metric: str):
        """The metric's histogram merged over the period (``acme.metrics.storage.Histogram``), or None."""
        from acme.metrics.storage import Histogram

        keys = self.metric_keys("metrics_hist", metric, "hist.parquet")
        if not keys:
            return None
        frame = self.run("select_metric_histogram", files=[self.location(k) for k in keys])
        low, high = frame["bin_low"].to_numpy(), frame["bin_high"].to_numpy()
        counts = frame["count"].to_numpy().astype("int64")
        return Histogram(
            metric, float(high[0]), float(low[-1]), counts[1:-1].copy(), int(counts[0]), int(counts[-1])
        )

    def metric_daily(self, metric: str) -> pd.DataFrame | None:
        """Per day: the metric's mean and maximum (from the daily histograms), or None."""
        keys = self.metric_keys("metrics_hist", metric, "hist.parquet")
        if not keys:
            return None
        return self.run("select_metric_daily", files=[self.location(k) for k in keys])
