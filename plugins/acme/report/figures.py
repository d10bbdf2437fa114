"""The figures of sections 1-9, drawn with matplotlib from the tables of a Characterization (each named by its
section's entry in :mod:`acme.report.sections`, which renders them as PNG)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from acme.report.model import Characterization
from acme.report.paper_sections import GPU_TDP_W, UTILIZATION_METRICS

if TYPE_CHECKING:
    from matplotlib.figure import Figure

from acme.report.style import FIGURE_WIDTH_IN, LEGEND_FONT, OWN_STYLE, REFERENCE_STYLE

# One colour per job type on every page and cluster (matplotlib's tab10, fixed by type).
JOB_TYPE_COLORS = {
    "Eval": "tab:blue",
    "Pretrain": "tab:red",
    "SFT": "tab:green",
    "MLLM": "tab:purple",
    "Debug": "tab:orange",
    "Other": "tab:gray",
    "CPU": "tab:brown",
}
# Reference medians of the duration figure: a marker each, so that close values (Seren 122 s,
# Kalos 124 s) stay visible side by side.
MEDIAN_MARKERS = {
    "Seren": ("o", "tab:blue", 11),
    "Kalos": ("^", "tab:orange", 7),
    "Philly": ("s", "tab:green", 8),
    "Helios": ("D", "tab:red", 7),
    "PAI": ("v", "tab:purple", 8),
}


def _figure(columns: int = 1, rows: int = 1, height: float = 4.2):
    """A figure as wide as the page, ``height`` inches per row of panels."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(FIGURE_WIDTH_IN, height * rows), layout="constrained")
    axes = figure.subplots(rows, columns, squeeze=False)
    return figure, [ax for row in axes for ax in row]


def type_color(job_type: str) -> str:
    return JOB_TYPE_COLORS.get(job_type, "tab:cyan")


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
    if xlabel.endswith("(%)"):  # a percentage ends at 100 (Kalos's CPU reference has one outlier at 239 %)
        ax.set_xlim(0, 100)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=LEGEND_FONT)


def draw_duration_cdf(report: Characterization) -> Figure:
    """Run time and queueing CDFs on a log axis from 1 s (shorter times are drawn at 1 s), with
    the reference clusters' medians as markers on the 50 % line."""
    from acme.report import reference

    table = report.tables["duration_cdf"]
    figure, (ax,) = _figure(height=4.6)
    ax.plot(
        table["run_s"].clip(lower=1), 100 * table["cdf"],
        label=f"{report.cluster} run time (this report)", **OWN_STYLE,
    )  # fmt: skip
    ax.plot(
        table["queue_s"].clip(lower=1),
        100 * table["cdf"],
        label=f"{report.cluster} queueing",
        color="tab:gray",
    )
    for name, median in reference.median_run_times().items():
        marker, color, size = MEDIAN_MARKERS.get(name, ("x", "black", 8))
        ax.plot(
            [median], [50], linestyle="none", marker=marker, markersize=size, markerfacecolor="none",
            markeredgewidth=2, color=color, label=f"{name} median {median:,.0f} s (paper)",
        )  # fmt: skip
    ax.axhline(50, color="black", linewidth=0.6, alpha=0.4)
    right = 1.5 * max(
        table["run_s"].max(), table["queue_s"].max(), *reference.median_run_times().values(), 10
    )
    _time_log_axis(ax.xaxis, right)
    ax.set_xlabel("time (log scale; 1 s and less at the left edge)")
    ax.set_ylabel("CDF (%)")
    ax.set_ylim(0, 100)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=LEGEND_FONT, loc="lower right")
    return figure


TIME_TICKS = [(1, "1 s"), (10, "10 s"), (60, "1 min"), (600, "10 min"), (3600, "1 h"), (6 * 3600, "6 h"),
              (86400, "1 d"), (7 * 86400, "1 w"), (30 * 86400, "30 d")]  # fmt: skip


def _time_log_axis(axis, largest: float) -> None:
    """Seconds on a log axis from 1 s to ``largest`` with ticks in readable units (1 s, 1 min, 1 h, …);
    values under 1 s are drawn at 1 s by the caller."""
    from matplotlib.ticker import NullFormatter

    largest = largest if largest >= 10 else 10  # also when NaN: no finished job
    vertical = axis.axis_name == "y"
    (axis.axes.set_yscale if vertical else axis.axes.set_xscale)("log")
    shown = [(t, label) for t, label in TIME_TICKS if t <= largest]
    axis.set_ticks([t for t, _ in shown], [label for _, label in shown])
    axis.set_minor_formatter(NullFormatter())
    (axis.axes.set_ylim if vertical else axis.axes.set_xlim)(1, largest)


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
    ax.legend(fontsize=LEGEND_FONT)
    return figure


def draw_type_shares(report: Characterization) -> Figure:
    table = report.tables["type_stats"]
    figure, (ax,) = _figure()
    positions = range(len(table))
    colors = [type_color(t) for t in table["job_type"]]
    ax.bar([p - 0.2 for p in positions], 100 * table["job_share"], width=0.4, color=colors, alpha=0.55,
           edgecolor="black", label="share of GPU jobs (light)")  # fmt: skip
    ax.bar([p + 0.2 for p in positions], 100 * table["gpu_time_share"], width=0.4, color=colors,
           edgecolor="black", label="share of GPU time (dark)")  # fmt: skip
    ax.set_xticks(list(positions), table["job_type"])
    ax.set_ylabel("% of GPU jobs / of GPU time")
    ax.legend(fontsize=LEGEND_FONT)
    ax.grid(axis="y", alpha=0.3)
    return figure


def draw_type_demand_duration_queue(report: Characterization) -> Figure:
    """Four bar charts on linear axes, each bar labelled with its value (a log axis over values from
    seconds to days leaves too few ticks to read)."""
    from acme.report.model import seconds

    table = report.tables["type_stats"]
    figure, axes = _figure(columns=2, rows=2, height=3.0)
    colors = [type_color(t) for t in table["job_type"]]
    for ax, (column, label, unit) in zip(
        axes,
        (
            ("avg_gpu_num", "mean GPUs per job", "gpus"),
            ("med_run_s", "median run time", "time"),
            ("med_queue_s", "median queueing delay", "time"),
            ("avg_queue_s", "mean queueing delay", "time"),
        ),
        strict=True,
    ):
        values = table[column].fillna(0)
        scale, axis_unit = _time_unit(values.max()) if unit == "time" else (1.0, "GPUs")
        bars = ax.barh(table["job_type"], values / scale, color=colors)
        ax.bar_label(
            bars, [seconds(v) if unit == "time" else f"{v:,.1f}" for v in values], padding=3, fontsize=9
        )
        ax.set_title(label, fontsize=10)
        ax.set_xlabel(axis_unit)
        ax.set_xlim(0, max(values.max() / scale, 1e-9) * 1.25)
        ax.invert_yaxis()
        ax.grid(axis="x", alpha=0.3)
    return figure


def _time_unit(largest: float) -> tuple[float, str]:
    """The unit a time axis reads best in, from its largest value: (seconds per unit, name)."""
    if largest >= 2 * 3600:
        return 3600.0, "hours"
    if largest >= 120:
        return 60.0, "minutes"
    return 1.0, "seconds"


def draw_utilization_cdf(report: Characterization) -> Figure:
    table = report.tables["utilization_cdf"]
    figure, axes = _figure(columns=2, rows=3, height=3.2)
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
    figure, (gpu_ax, server_ax) = _figure(columns=2)
    _cdf_panel(gpu_ax, table[table["metric"] == "gpu_power"], report.cluster, "GPU power (W)")
    gpu_ax.axvline(GPU_TDP_W, color="tab:red", linestyle=":", label="TDP")
    gpu_ax.legend(fontsize=LEGEND_FONT)
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
    ax.set_ylabel("% of GPU jobs / of their GPU time")
    ax.legend(fontsize=LEGEND_FONT)
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
    ax.legend(fontsize=LEGEND_FONT)
    ax.grid(axis="y", alpha=0.3)
    return figure


def draw_temperature_failures(report: Characterization) -> Figure:
    """Daily GPU temperature, with the day's infrastructure failures as bars on a second axis; only
    the series that have data are drawn (characterize does not draw the figure when neither has)."""
    table = report.tables["temperature_failures"]
    days = _days(table["day"])
    figure, (ax,) = _figure()
    has_temp = "gpu_temp_max_c" in table and table["gpu_temp_max_c"].notna().any()
    has_infra = "infra_failures" in table and table["infra_failures"].sum() > 0
    bars_ax = ax
    if has_temp:
        ax.plot(days, table["gpu_temp_max_c"], marker="o", color="tab:red", label="max GPU temperature")
        ax.plot(days, table["gpu_temp_mean_c"], marker=".", color="tab:orange", label="mean GPU temperature")
        ax.set_ylabel("°C")
        ax.legend(fontsize=LEGEND_FONT, loc="upper left")
        bars_ax = ax.twinx() if has_infra else None
    _date_axis(ax, days)
    if has_infra:
        bars_ax.bar(
            days, table["infra_failures"], alpha=0.35, color="tab:blue", label="infrastructure failures"
        )
        bars_ax.set_ylabel("failed jobs (infrastructure)")
        bars_ax.set_ylim(bottom=0)
        bars_ax.legend(fontsize=LEGEND_FONT, loc="upper right")
    return figure


def draw_trends(report: Characterization) -> Figure:

    usage = report.tables["daily_usage"]
    outcomes = report.tables["daily_outcomes"]
    figure, axes = _figure(columns=2, rows=2, height=3.4)
    jobs = usage.pivot_table(index="day", columns="job_type", values="jobs", fill_value=0)
    hours = usage.pivot_table(index="day", columns="job_type", values="gpu_hours", fill_value=0)
    for ax, frame, label in ((axes[0], jobs, "jobs per day"), (axes[1], hours, "GPU-hours per day")):
        ax.stackplot(
            _days(frame.index), frame.T.to_numpy(), labels=list(frame.columns),
            colors=[type_color(t) for t in frame.columns],
        )  # fmt: skip
        ax.set_title(label, fontsize=10)
        ax.legend(fontsize=LEGEND_FONT - 1, ncols=2)
    days = _days(outcomes["day"])
    axes[2].plot(days, outcomes["med_queue_s"].clip(lower=1), marker=".", label="median")
    axes[2].plot(days, outcomes["avg_queue_s"].clip(lower=1), marker=".", label="mean")
    _time_log_axis(axes[2].yaxis, 2 * max(outcomes[["med_queue_s", "avg_queue_s"]].max().max(), 10))
    axes[2].set_title("queueing delay of GPU jobs (log scale; 1 s and less at the bottom)", fontsize=10)
    axes[2].legend(fontsize=LEGEND_FONT)
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
    axes[3].set_ylabel("%")
    axes[3].set_title("failures and utilization", fontsize=10)
    axes[3].legend(fontsize=LEGEND_FONT)
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
    ax.tick_params(axis="x", labelrotation=30, labelsize=9)
    ax.grid(alpha=0.3)
