"""The comparison rows and curves bundled under ``include/report/reference`` (sources in SOURCES.md)."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from acme import settings

if TYPE_CHECKING:
    import pandas as pd

# The paper's summary columns, in the order of reference/cluster_summary.csv.
SUMMARY_COLUMNS = (
    "job_num", "cpu_job_num", "gpu_job_num", "avg_run_time_gpu", "avg_que_time_gpu", "avg_gpu_num",
    "med_run_time_gpu", "med_que_time_gpu", "med_gpu_num", "max_run_time_gpu", "max_gpu",
    "complete_rate_gpu", "cancel_rate_gpu", "fail_rate_gpu", "complete_gpu_time", "cancel_gpu_time",
    "fail_gpu_time", "complete_rate_gpu_time", "cancel_rate_gpu_time", "fail_rate_gpu_time",
    "avg_run_time_cpu", "avg_que_time_cpu", "med_run_time_cpu", "med_que_time_cpu", "complete_rate_cpu",
    "cancel_rate_cpu", "fail_rate_cpu",
)  # fmt: skip


def reference_dir() -> Path:
    return settings.project().include_dir / "report" / "reference"


@cache
def _summary() -> pd.DataFrame:
    import pandas as pd

    return pd.read_csv(reference_dir() / "cluster_summary.csv")


def summary_rows() -> pd.DataFrame:
    """The paper's per-cluster summary (Seren, Kalos, Philly, Helios, PAI), indexed by ``id``."""
    return _summary().copy()


def median_run_times() -> dict[str, float]:
    """Median GPU-job run time per reference cluster, seconds."""
    rows = _summary()
    return dict(zip(rows["id"], rows["med_run_time_gpu"], strict=True))


@cache
def _curves() -> pd.DataFrame:
    import pandas as pd

    return pd.read_csv(reference_dir() / "quantiles.csv")


def curves(metric: str) -> dict[str, pd.DataFrame]:
    """Reference quantile curves of a catalog metric: source -> frame (cdf_pct, value), in its unit."""
    frame = _curves()
    chosen = frame[frame["metric"] == metric]
    return {
        source: group[["cdf_pct", "value"]].reset_index(drop=True)
        for source, group in chosen.groupby("source", sort=False)
    }
