"""The report's figures, drawn with matplotlib (Agg) from the tables of a Characterization, as PNG."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import TYPE_CHECKING

from acme.report.characterize import GPU_TDP_W, UTILIZATION_METRICS, Characterization
from acme.report.ettr import draw_ettr_progress  # section 10 (issue 19)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

REFERENCE_STYLE = {"linestyle": "--", "linewidth": 1.2, "alpha": 0.8}
OWN_STYLE = {"linewidth": 2.2, "color": "black"}


def render_figures(report: Characterization) -> dict[str, bytes]:
    """PNG bytes of every drawn figure, keyed by figure name."""
    import matplotlib

    matplotlib.use("Agg", force=True)  # no display; Figure objects below never touch pyplot's state
    pngs = {}
    for spec in report.figures:
        draw = DRAWERS.get(spec.name)
        if draw is None or not spec.drawn:
            continue
        figure = draw(report)
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", dpi=90, metadata={"Software": None})
        pngs[spec.name] = buffer.getvalue()
    return pngs


def _figure(columns: int = 1, rows: int = 1, width: float = 6.0, height: float = 3.6):
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width * columns, height * rows), layout="constrained")
    axes = figure.subplots(rows, columns, squeeze=False)
    return figure, [ax for row in axes for ax in row]


def _log_axis(axis, symlog: bool = True, base: int = 10) -> None:
    """A log axis with plain tick labels ("1000", not 10³): mathtext labels cost seconds per report."""
    from matplotlib.ticker import FuncFormatter

    if symlog:
        axis.axes.set_xscale("symlog", linthresh=1.0) if axis.axis_name == "x" else axis.axes.set_yscale(
            "symlog", linthresh=1.0
        )
    else:
        axis.axes.set_xscale("log", base=base)
    axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    axis.set_minor_formatter(FuncFormatter(lambda value, _: ""))


def _cdf_panel(ax, curves, cluster: str, xlabel: str, log: bool = False, scale: float = 1.0) -> None:
    for source, curve in curves.groupby("source", sort=False):
        own = source == cluster
        label = f"{source} (this report)" if own else source
        ax.plot(
            curve["value"] / scale, curve["cdf_pct"], label=label, **(OWN_STYLE if own else REFERENCE_STYLE)
        )
    ax.set_xlabel(xlabel)
    ax.set_ylabel("CDF (%)")
    ax.set_ylim(0, 100)
    if log:
        _log_axis(ax.xaxis)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)


def draw_duration_cdf(report: Characterization) -> Figure:
    from acme.report import reference

    table = report.tables["duration_cdf"]
    figure, (ax,) = _figure()
    ax.plot(table["run_s"], 100 * table["cdf"], label=f"{report.cluster} run time (this report)", **OWN_STYLE)
    ax.plot(table["queue_s"], 100 * table["cdf"], label=f"{report.cluster} queueing", color="tab:gray")
    for (name, median), color in zip(
        reference.median_run_times().items(),
        ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple"),
        strict=False,
    ):
        ax.axvline(median, color=color, linestyle=":", label=f"{name} median {median:.0f} s")
    _log_axis(ax.xaxis)
    ax.set_xlim(left=0)
    ax.set_xlabel("seconds")
    ax.set_ylabel("CDF (%)")
    ax.set_ylim(0, 100)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return figure


def draw_gpu_util_cdf(report: Characterization) -> Figure:
    figure, (ax,) = _figure()
    _cdf_panel(ax, report.tables["gpu_util_cdf"], report.cluster, "GPU utilization (%)")
    return figure


def draw_gpu_demand_cdf(report: Characterization) -> Figure:
    table = report.tables["gpu_demand"]
    figure, (ax,) = _figure()
    ax.step(table["gpu_num"], 100 * table["cdf_jobs"], where="post", label="by job count", **OWN_STYLE)
    ax.step(table["gpu_num"], 100 * table["cdf_gpu_time"], where="post", label="by GPU time", color="tab:red")
    _log_axis(ax.xaxis, symlog=False, base=2)
    ax.set_xlabel("GPUs requested")
    ax.set_ylabel("CDF (%)")
    ax.set_ylim(0, 100)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return figure


def draw_type_shares(report: Characterization) -> Figure:
    table = report.tables["type_stats"]
    figure, (ax,) = _figure(width=7.0)
    positions = range(len(table))
    ax.bar([p - 0.2 for p in positions], 100 * table["job_share"], width=0.4, label="share of GPU jobs")
    ax.bar([p + 0.2 for p in positions], 100 * table["gpu_time_share"], width=0.4, label="share of GPU time")
    ax.set_xticks(list(positions), table["job_type"])
    ax.set_ylabel("%")
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    return figure


def draw_type_demand_duration_queue(report: Characterization) -> Figure:
    table = report.tables["type_stats"]
    figure, axes = _figure(columns=4, width=3.3)
    for ax, (column, label) in zip(
        axes,
        (
            ("avg_gpu_num", "mean GPUs per job"),
            ("med_run_s", "median run time (s)"),
            ("med_queue_s", "median queueing (s)"),
            ("avg_queue_s", "mean queueing (s)"),
        ),
        strict=True,
    ):
        ax.bar(table["job_type"], table[column].fillna(0), color="tab:blue")
        ax.set_title(label, fontsize=9)
        _log_axis(ax.yaxis)
        ax.tick_params(axis="x", labelrotation=45, labelsize=8)
        ax.grid(axis="y", alpha=0.3)
    return figure


def draw_utilization_cdf(report: Characterization) -> Figure:
    table = report.tables["utilization_cdf"]
    figure, axes = _figure(columns=3, rows=2, width=4.2, height=3.2)
    for ax, (metric, label) in zip(axes, UTILIZATION_METRICS.items(), strict=True):
        if metric.startswith("ib_"):  # B/s in the table, GB/s on the axis
            _cdf_panel(
                ax, table[table["metric"] == metric], report.cluster, label.replace("B/s", "GB/s"), scale=1e9
            )
        else:
            _cdf_panel(ax, table[table["metric"] == metric], report.cluster, label)
    return figure


def draw_power_cdf(report: Characterization) -> Figure:
    table = report.tables["power_cdf"]
    figure, (gpu_ax, server_ax) = _figure(columns=2, width=5.0)
    _cdf_panel(gpu_ax, table[table["metric"] == "gpu_power"], report.cluster, "GPU power (W)")
    gpu_ax.axvline(GPU_TDP_W, color="tab:red", linestyle=":", label="TDP")
    _cdf_panel(server_ax, table[table["metric"] == "server_power"], report.cluster, "server power (W)")
    return figure


def draw_outcomes(report: Characterization) -> Figure:
    table = report.tables["outcomes"].groupby("state_group")[["jobs", "gpu_time"]].sum()
    figure, (ax,) = _figure()
    groups = list(table.index)
    positions = range(len(groups))
    ax.bar(
        [p - 0.2 for p in positions], 100 * table["jobs"] / table["jobs"].sum(), width=0.4, label="by count"
    )
    total = table["gpu_time"].sum() or 1.0
    ax.bar([p + 0.2 for p in positions], 100 * table["gpu_time"] / total, width=0.4, label="by GPU time")
    ax.set_xticks(list(positions), groups)
    ax.set_ylabel("% of GPU jobs")
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    return figure


def draw_failure_categories(report: Characterization) -> Figure:
    table = report.tables["failure_categories"]
    figure, (ax,) = _figure()
    positions = range(len(table))
    ax.bar(
        [p - 0.2 for p in positions], 100 * table["job_share"], width=0.4, label="share of diagnosed failures"
    )
    ax.bar(
        [p + 0.2 for p in positions],
        100 * table["gpu_time_share"],
        width=0.4,
        label="share of their GPU time",
    )
    ax.set_xticks(list(positions), table["category"])
    ax.set_ylabel("%")
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    return figure


def draw_temperature_failures(report: Characterization) -> Figure:

    table = report.tables["temperature_failures"]
    days = _days(table["day"])
    figure, (ax,) = _figure(width=7.0)
    if "gpu_temp_max_c" in table:
        ax.plot(days, table["gpu_temp_max_c"], marker="o", color="tab:red", label="max GPU temperature")
        ax.plot(days, table["gpu_temp_mean_c"], marker=".", color="tab:orange", label="mean GPU temperature")
    ax.set_ylabel("°C")
    _date_axis(ax, days)
    if "infra_failures" in table:
        twin = ax.twinx()
        twin.bar(days, table["infra_failures"], alpha=0.35, color="tab:blue", label="infrastructure failures")
        twin.set_ylabel("failed jobs")
        twin.legend(fontsize=8, loc="upper right")
    ax.legend(fontsize=8, loc="upper left")
    return figure


def draw_trends(report: Characterization) -> Figure:

    usage = report.tables["daily_usage"]
    outcomes = report.tables["daily_outcomes"]
    figure, axes = _figure(columns=2, rows=2, width=5.5, height=3.2)
    jobs = usage.pivot_table(index="day", columns="job_type", values="jobs", fill_value=0)
    hours = usage.pivot_table(index="day", columns="job_type", values="gpu_hours", fill_value=0)
    for ax, frame, label in ((axes[0], jobs, "jobs per day"), (axes[1], hours, "GPU-hours per day")):
        ax.stackplot(_days(frame.index), frame.T.to_numpy(), labels=list(frame.columns))
        ax.set_title(label, fontsize=9)
        ax.legend(fontsize=6, ncols=2)
    days = _days(outcomes["day"])
    axes[2].plot(days, outcomes["med_queue_s"], marker=".", label="median queueing (s)")
    axes[2].plot(days, outcomes["avg_queue_s"], marker=".", label="mean queueing (s)")
    _log_axis(axes[2].yaxis)
    axes[2].set_title("queueing of GPU jobs", fontsize=9)
    axes[2].legend(fontsize=7)
    axes[3].plot(days, 100 * outcomes["fail_rate"], marker=".", color="tab:red", label="failure rate (%)")
    if "gpu_util_mean_pct" in outcomes:
        axes[3].plot(
            days,
            outcomes["gpu_util_mean_pct"],
            marker=".",
            color="tab:green",
            label="mean GPU utilization (%)",
        )
    axes[3].set_ylim(0, 100)
    axes[3].set_title("failures and utilization", fontsize=9)
    axes[3].legend(fontsize=7)
    for ax in axes:
        _date_axis(ax, _days(outcomes["day"]))
    return figure


def _days(column) -> list:
    """A day column as Python dates (what matplotlib's date axis handles whatever the pandas unit)."""
    import pandas as pd

    return [stamp.date() for stamp in pd.to_datetime(column)]


def _date_axis(ax, days: list) -> None:
    """Days as MM-DD, at most about ten ticks, half a day of margin on both sides."""
    from datetime import datetime, time, timedelta

    from matplotlib.dates import DateFormatter, DayLocator

    if days:
        first, last = datetime.combine(min(days), time()), datetime.combine(max(days), time())
        ax.set_xlim(first - timedelta(hours=12), last + timedelta(hours=12))
        ax.xaxis.set_major_locator(DayLocator(interval=max(1, (max(days) - min(days)).days // 9 + 1)))
    ax.xaxis.set_major_formatter(DateFormatter("%m-%d"))
    ax.tick_params(axis="x", labelrotation=30, labelsize=7)
    ax.grid(alpha=0.3)


DRAWERS: dict[str, Callable[[Characterization], Figure]] = {
    "duration_cdf": draw_duration_cdf,
    "gpu_util_cdf": draw_gpu_util_cdf,
    "gpu_demand_cdf": draw_gpu_demand_cdf,
    "type_shares": draw_type_shares,
    "type_demand_duration_queue": draw_type_demand_duration_queue,
    "utilization_cdf": draw_utilization_cdf,
    "power_cdf": draw_power_cdf,
    "outcomes": draw_outcomes,
    "failure_categories": draw_failure_categories,
    "temperature_failures": draw_temperature_failures,
    "trends": draw_trends,
    "ettr_progress": draw_ettr_progress,
}
