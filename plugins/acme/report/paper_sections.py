"""Sections 1-9 of the report, the paper's characterization: each a ``(report, inputs)`` function named by its
entry in :mod:`acme.report.sections`, adding its tables (small frames from SQL) and each figure's one-line finding.

Nothing here draws or writes: :mod:`acme.report.figures` draws these sections' figures and
:mod:`acme.report.publish` writes the page. Findings are computed from the tables, never typed in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from acme.report import reference
from acme.report.model import Characterization, FigureSpec, ReportInputs, pct, seconds

if TYPE_CHECKING:
    import pandas as pd


# Catalog metrics of section 6 and how they are labelled.
UTILIZATION_METRICS = {
    "sm_active": "SM activity (%)",
    "tensor_active": "Tensor-core activity (%)",
    "fb_used": "GPU memory used (MiB)",
    "node_cpu_util": "CPU utilization (%)",
    "node_mem_util": "Host memory utilization (%)",
    "ib_tx": "InfiniBand send (B/s)",
}
GPU_TDP_W = 400.0  # A100-SXM4-80GB board power limit (Acme's GPUs)
IDLE_POWER_MAX_W = 70.0  # "idle at about 60 W": samples at or below this count as idle draw
CDF_POINTS = [i / 200 for i in range(201)]
# Below this many diagnosed failures, category shares are not a finding: the table shows counts.
MIN_DIAGNOSED_FOR_SHARES = 20
UNCATEGORIZED = "Unknown"  # the category shown for a diagnosis without one (reason Unknown, or none given)
PERCENTS = list(range(101))


# --- formatting helpers -------------------------------------------------------------------------


def _number(value: Any) -> Any:
    """A JSON-friendly scalar (numpy -> Python, NaN -> None)."""
    if value is None:
        return None
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and value != value:
        return None
    return value


# --- 1. summary ---------------------------------------------------------------------------------


def summary(report: Characterization, inputs: ReportInputs) -> None:
    queries = inputs.queries
    import pandas as pd

    # Both definitions: the table shows this cluster under each, where they differ.
    run_row = queries.jobs("select_summary", paper=False)
    paper_row = queries.jobs("select_summary", paper=True)
    own = paper_row if queries.paper else run_row
    rows = [
        _summary_row(f"{report.cluster} (this report, run time = end − start)", run_row),
        _summary_row(f"{report.cluster} (paper-compatible: source duration)", paper_row),
    ]
    refs = reference.summary_rows()
    refs["id"] = refs["id"] + " (paper)"
    table = pd.concat([pd.DataFrame(rows), refs[["id", *reference.SUMMARY_COLUMNS]]], ignore_index=True)
    report.tables["summary"] = table
    row = own.iloc[0]
    paper = paper_row.iloc[0]
    report.summary = {
        "cluster": report.cluster,
        "period": report.period.label,
        "definition": report.definition,
        "days": len(report.days),
        "first_day": report.days[0],
        "last_day": report.days[-1],
        "jobs": _number(row["job_num"]),
        "cpu_jobs": _number(row["cpu_job_num"]),
        "gpu_jobs": _number(row["gpu_job_num"]),
        "gpu_hours": _number(row["gpu_hours"]),
        "median_run_time_gpu_s": _number(row["med_run_time_gpu"]),
        "mean_run_time_gpu_s": _number(row["avg_run_time_gpu"]),
        "median_run_time_gpu_paper_s": _number(paper["med_run_time_gpu"]),
        "median_queue_time_gpu_s": _number(row["med_que_time_gpu"]),
        "mean_queue_time_gpu_s": _number(row["avg_que_time_gpu"]),
        "mean_gpus": _number(row["avg_gpu_num"]),
        "median_gpus": _number(row["med_gpu_num"]),
        "share_gt8_gpus": _number(row["share_gt8_gpus"]),
        "complete_rate_gpu": _number(row["complete_rate_gpu"]),
        "cancel_rate_gpu": _number(row["cancel_rate_gpu"]),
        "fail_rate_gpu": _number(row["fail_rate_gpu"]),
        "complete_rate_gpu_time": _number(row["complete_rate_gpu_time"]),
        "cancel_rate_gpu_time": _number(row["cancel_rate_gpu_time"]),
        "fail_rate_gpu_time": _number(row["fail_rate_gpu_time"]),
        "median_run_time_cpu_s": _number(row["med_run_time_cpu"]),
        "median_queue_time_cpu_s": _number(row["med_que_time_cpu"]),
        "complete_rate_cpu": _number(row["complete_rate_cpu"]),
    }
    refs_median = reference.median_run_times()
    finding = (
        f"{int(row['gpu_job_num']):,} GPU jobs and {int(row['cpu_job_num']):,} CPU jobs; median GPU-job run "
        f"time {seconds(row['med_run_time_gpu'])} ({_definition_words(report.definition)}); "
        f"under the paper's definition {seconds(paper['med_run_time_gpu'])} against the paper's "
        f"Seren {seconds(refs_median['Seren'])} and Kalos {seconds(refs_median['Kalos'])}; median queueing "
        f"{seconds(row['med_que_time_gpu'])}, {pct(row['fail_rate_gpu'])} of finished GPU jobs failed"
    )
    report.figures.append(
        FigureSpec("summary", "Summary beside the paper's clusters", finding, ["summary"], False)
    )


def _definition_words(definition: str) -> str:
    return "paper-compatible: the source's duration" if definition == "paper" else "end − start"


def _summary_row(label: str, frame: pd.DataFrame) -> dict[str, Any]:
    row = frame.iloc[0]
    return {"id": label, **{c: _number(row[c]) for c in reference.SUMMARY_COLUMNS}}


# --- 2. duration and GPU utilization CDFs -------------------------------------------------------


def duration_and_utilization(report: Characterization, inputs: ReportInputs) -> None:
    queries = inputs.queries
    quantiles = queries.jobs("select_time_quantiles", q=CDF_POINTS)
    report.tables["duration_cdf"] = quantiles
    medians = reference.median_run_times()
    own = report.summary["median_run_time_gpu_s"]
    # The reference medians follow each trace's own duration column: compare the paper-compatible median.
    comparable = report.summary["median_run_time_gpu_paper_s"]
    if own:
        ratios = ", ".join(
            f"{name} {medians[name] / comparable:.1f}×" for name in ("Philly", "Helios", "PAI")
        ) if comparable else "n/a"  # fmt: skip
        finding = (
            f"median GPU-job run time {seconds(own)} ({_definition_words(report.definition)}); under the "
            f"paper's definition ({seconds(comparable)}) the earlier DL clusters' medians are {ratios} as long"
        )
    else:
        finding = "no finished GPU job in this period"
    report.figures.append(
        FigureSpec(
            "duration_cdf",
            "CDF of GPU-job run time and queueing delay",
            finding,
            ["duration_cdf"],
            bool(own),
        )
    )

    curves = _metric_curves(queries, "gpu_util")
    report.tables["gpu_util_cdf"] = curves
    own_curve = curves[curves["source"] == report.cluster]
    if len(own_curve):
        hist = queries.metric_histogram("gpu_util")
        from acme.metrics.storage import cdf

        at_zero = float(cdf(hist, [0.5])[0])
        above_90 = 1 - float(cdf(hist, [90.0])[0])
        finding = (
            f"GPU utilization is polarized: {pct(at_zero)} of samples at 0%, {pct(above_90)} above 90% "
            f"(median {own_curve.loc[own_curve['cdf_pct'] == 50, 'value'].iloc[0]:.0f}%)"
        )
    else:
        finding = "no GPU telemetry in this period: only the reference curves are shown"
    report.figures.append(
        FigureSpec("gpu_util_cdf", "CDF of GPU utilization against Philly and PAI", finding, ["gpu_util_cdf"])
    )


def _metric_curves(queries, metric: str, sources: tuple[str, ...] | None = None) -> pd.DataFrame:
    """The cluster's quantile curve of a metric (from merged histograms) beside the reference curves."""
    import pandas as pd

    from acme.metrics.storage import quantiles

    parts = []
    hist = queries.metric_histogram(metric)
    if hist is not None and hist.total:
        values = quantiles(hist, [p / 100 for p in PERCENTS])
        parts.append(pd.DataFrame({"source": queries.cluster, "cdf_pct": PERCENTS, "value": values}))
    for source, curve in reference.curves(metric).items():
        if sources is None or source in sources:
            parts.append(curve.assign(source=source)[["source", "cdf_pct", "value"]])
    frame = (
        pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=["source", "cdf_pct", "value"])
    )
    frame.insert(0, "metric", metric)
    return frame


# --- 3. GPU demand ------------------------------------------------------------------------------


def gpu_demand(report: Characterization, inputs: ReportInputs) -> None:
    queries = inputs.queries
    demand = queries.jobs("select_gpu_demand")
    jobs, gpu_time = demand["jobs"].sum(), demand["gpu_time"].sum()
    demand["cdf_jobs"] = demand["jobs"].cumsum() / jobs if jobs else 0.0
    demand["cdf_gpu_time"] = demand["gpu_time"].cumsum() / gpu_time if gpu_time else 0.0
    report.tables["gpu_demand"] = demand
    if jobs:
        big = demand.loc[demand["gpu_num"] > 8, "jobs"].sum() / jobs
        large_time = (
            demand.loc[demand["gpu_num"] >= 256, "gpu_time"].sum() / gpu_time if gpu_time else float("nan")
        )
        single = demand.loc[demand["gpu_num"] == 1, "jobs"].sum() / jobs
        finding = (
            f"{pct(single)} of GPU jobs use one GPU and {pct(big)} more than 8; "
            f"jobs of ≥256 GPUs take {pct(large_time)} of GPU time"
        )
    else:
        finding = "no GPU job in this period"
    report.figures.append(
        FigureSpec(
            "gpu_demand_cdf",
            "CDF of GPU demand by job count and by GPU time",
            finding,
            ["gpu_demand"],
            bool(jobs),
        )
    )


# --- 4. workload types ----------------------------------------------------------------------------


def workload_types(report: Characterization, inputs: ReportInputs) -> None:
    queries = inputs.queries
    types = queries.jobs("select_type_stats")
    report.tables["type_stats"] = types
    report.summary["job_share"] = {
        t: _number(v) for t, v in zip(types["job_type"], types["job_share"], strict=True)
    }
    report.summary["gpu_time_share"] = {
        t: _number(v) for t, v in zip(types["job_type"], types["gpu_time_share"], strict=True)
    }
    if len(types):
        by_jobs = types.sort_values("jobs", ascending=False).iloc[0]
        by_time = types.sort_values("gpu_time", ascending=False).iloc[0]
        parts = [
            f"{by_time['job_type']}: {pct(by_time['job_share'])} of jobs, {pct(by_time['gpu_time_share'])} of GPU time"
        ]
        if by_jobs["job_type"] != by_time["job_type"]:
            parts.insert(
                0,
                f"{by_jobs['job_type']}: {pct(by_jobs['job_share'])} of jobs, {pct(by_jobs['gpu_time_share'])} of GPU time",
            )
        finding = "; ".join(parts)
    else:
        finding = "no GPU job in this period"
    report.figures.append(
        FigureSpec(
            "type_shares",
            "Workload types: share of jobs and of GPU time",
            finding,
            ["type_stats"],
            bool(len(types)),
        )
    )


# --- 5. demand, duration and queueing per workload type (from section 4's table) ------------------


def workload_types_detail(report: Characterization, inputs: ReportInputs) -> None:
    types = report.tables["type_stats"]
    if len(types):
        queue = types.set_index("job_type")["med_queue_s"].dropna()
        longest = queue.idxmax() if len(queue) else None
        others = queue.drop(longest).max() if len(queue) > 1 else float("nan")
        shortest_run = types.set_index("job_type")["med_run_s"].dropna()
        finding = (
            f"{longest} jobs wait longest (median queueing {seconds(queue.max())}, next {seconds(others)}); "
            f"shortest median run time: {shortest_run.idxmin()} ({seconds(shortest_run.min())})"
            if longest is not None and len(shortest_run)
            else "no queueing delays recorded"
        )
    else:
        finding = "no GPU job in this period"
    report.figures.append(
        FigureSpec(
            "type_demand_duration_queue",
            "GPU demand, run time and queueing delay per workload type",
            finding,
            ["type_stats"],
            bool(len(types)),
        )  # fmt: skip
    )


# --- 6. infrastructure utilization --------------------------------------------------------------


def infrastructure(report: Characterization, inputs: ReportInputs) -> None:
    queries = inputs.queries
    import pandas as pd

    curves = pd.concat([_metric_curves(queries, m) for m in UTILIZATION_METRICS], ignore_index=True)
    report.tables["utilization_cdf"] = curves
    own = curves[curves["source"] == report.cluster]
    medians = own[own["cdf_pct"] == 50].set_index("metric")["value"]
    if len(medians):
        parts = []
        if "sm_active" in medians:
            parts.append(f"median SM activity {medians['sm_active']:.0f}%")
        if "tensor_active" in medians:
            parts.append(f"tensor cores {medians['tensor_active']:.0f}%")
        if "fb_used" in medians:
            parts.append(f"GPU memory {medians['fb_used'] / 1024:.0f} GiB")
        if "node_cpu_util" in medians:
            parts.append(f"CPU {medians['node_cpu_util']:.0f}%")
        if "node_mem_util" in medians:
            parts.append(f"host memory {medians['node_mem_util']:.0f}%")
        finding = "; ".join(parts) + f" ({len(medians)} of {len(UTILIZATION_METRICS)} metrics have telemetry)"
    else:
        finding = "no node or GPU telemetry in this period: only the reference curves are shown"
    report.figures.append(
        FigureSpec("utilization_cdf", "Infrastructure utilization CDFs", finding, ["utilization_cdf"])
    )


# --- 7. power -----------------------------------------------------------------------------------


def power(report: Characterization, inputs: ReportInputs) -> None:
    queries = inputs.queries
    import pandas as pd

    from acme.metrics.storage import cdf

    gpu = _metric_curves(queries, "gpu_power")
    server = _metric_curves(queries, "server_power")
    report.tables["power_cdf"] = pd.concat([gpu, server], ignore_index=True)
    parts = []
    hist = queries.metric_histogram("gpu_power")
    if hist is not None and hist.total:
        above = 1 - float(cdf(hist, [GPU_TDP_W])[0])
        idle = float(cdf(hist, [IDLE_POWER_MAX_W])[0])
        parts.append(
            f"{pct(idle)} of GPU samples idle at ≤{IDLE_POWER_MAX_W:.0f} W, {pct(above)} above the {GPU_TDP_W:.0f} W TDP"
        )
    own_server = server[server["source"] == report.cluster]
    cpu_servers = server[server["source"] == "Seren CPU servers"]
    if len(own_server) and len(cpu_servers):
        median = own_server.loc[own_server["cdf_pct"] == 50, "value"].iloc[0]
        cpu_median = cpu_servers.loc[cpu_servers["cdf_pct"] == 50, "value"].iloc[0]
        parts.append(f"median server power {median:.0f} W, {median / cpu_median:.1f}× Seren's CPU servers")
    finding = "; ".join(parts) or "no power telemetry in this period: only the reference curves are shown"
    report.figures.append(FigureSpec("power_cdf", "GPU and server power", finding, ["power_cdf"]))


# --- 8. outcomes and failures -------------------------------------------------------------------


def failures(report: Characterization, inputs: ReportInputs) -> None:
    queries = inputs.queries
    _outcomes(report, queries)
    _failure_categories(report, queries)
    _temperature_failures(report, queries)


def _outcomes(report: Characterization, queries) -> None:
    outcomes = queries.jobs("select_outcomes")
    report.tables["outcomes"] = outcomes
    groups = outcomes.groupby("state_group")[["jobs", "gpu_time"]].sum()
    finished = groups.drop(index="running", errors="ignore")
    if len(finished):
        job_share = finished["jobs"] / finished["jobs"].sum()
        time_share = (
            groups["gpu_time"] / groups["gpu_time"].sum() if groups["gpu_time"].sum() else groups["gpu_time"]
        )
        finding = (
            f"{pct(job_share.get('failed', 0.0))} of finished GPU jobs failed, "
            f"{pct(job_share.get('cancelled', 0.0))} were cancelled; completed jobs used "
            f"{pct(time_share.get('completed', 0.0))} of GPU time, cancelled ones {pct(time_share.get('cancelled', 0.0))}"
        )
    else:
        finding = "no finished GPU job in this period"
    report.figures.append(
        FigureSpec(
            "outcomes",
            "Final states by job count and GPU time",
            finding,
            ["outcomes"],
            bool(len(finished)),
        )
    )


def _failure_categories(report: Characterization, queries) -> None:
    failed_jobs = int(queries.jobs("select_failed_jobs")["failed_jobs"].iloc[0])
    reasons = queries.diagnosed("select_failure_reasons")
    report.tables["failure_reasons"], categories = _failure_tables(reasons)
    diagnosed = int(categories["jobs"].sum())
    report.summary["failed_jobs"] = failed_jobs
    report.summary["diagnosed_failed_jobs"] = diagnosed
    coverage = f"{diagnosed:,} of {failed_jobs:,} failed jobs diagnosed"
    if reasons is None:
        report.failure_note = f"no diagnosis records yet (0 of {failed_jobs:,} failed jobs diagnosed)"
        finding = report.failure_note
    elif not diagnosed:
        report.failure_note = f"no diagnosed failed job in this period (0 of {failed_jobs:,})"
        finding = report.failure_note
    elif diagnosed < MIN_DIAGNOSED_FOR_SHARES:
        counts = ", ".join(
            f"{c} {int(n)}" for c, n in zip(categories["category"], categories["jobs"], strict=True)
        )
        finding = f"{coverage} ({counts}): too few for shares to be a finding"
        report.failure_note = finding
    else:
        top = categories.iloc[0]
        finding = (
            f"{coverage}; {top['category']}: {pct(top['job_share'])} of them, "
            f"{pct(top['gpu_time_share'])} of their GPU time"
        )
    report.tables["failure_categories"] = categories
    report.figures.append(
        FigureSpec(
            "failure_categories",
            "Failures by root-cause category (the paper's Table 3)",
            finding,
            ["failure_reasons", "failure_categories"],
            diagnosed >= MIN_DIAGNOSED_FOR_SHARES,
        )  # fmt: skip
    )


def _temperature_failures(report: Characterization, queries) -> None:
    import pandas as pd

    temperature = queries.metric_daily("gpu_temp")
    infra = queries.diagnosed("select_daily_infra_failures")
    days = pd.DataFrame({"day": pd.to_datetime(report.days).astype("datetime64[us]")})
    frame = days
    if temperature is not None:
        frame = frame.merge(
            temperature.rename(columns={"mean": "gpu_temp_mean_c", "max": "gpu_temp_max_c"})[
                ["day", "gpu_temp_mean_c", "gpu_temp_max_c"]
            ],
            on="day", how="left",
        )  # fmt: skip
    if infra is not None:
        frame = frame.merge(infra, on="day", how="left").fillna(
            {"infra_failures": 0, "diagnosed_failures": 0}
        )
    report.tables["temperature_failures"] = frame
    has_temp = "gpu_temp_mean_c" in frame and frame["gpu_temp_mean_c"].notna().any()
    has_infra = "infra_failures" in frame and bool(frame["infra_failures"].sum())
    parts = []
    if has_temp:
        parts.append(_extreme_days(frame, "gpu_temp_max_c", "hottest GPU (daily maximum)", " °C"))
    if has_infra:
        parts.append(_extreme_days(frame, "infra_failures", "most infrastructure failures", ""))
        if has_temp and frame["infra_failures"].std() and frame["gpu_temp_max_c"].std():
            corr = frame[["gpu_temp_max_c", "infra_failures"]].corr().iloc[0, 1]
            parts.append(f"daily correlation {corr:+.2f}")
    elif infra is not None:
        parts.append("no diagnosed infrastructure failure")
    if not has_temp:
        parts.insert(0, "no GPU temperature telemetry for this period")
    report.figures.append(
        FigureSpec(
            "temperature_failures",
            "GPU temperature and infrastructure failures per day",
            "; ".join(parts),
            ["temperature_failures"],
            has_temp or has_infra,
        )  # fmt: skip
    )


def _extreme_days(frame: pd.DataFrame, column: str, what: str, unit: str) -> str:
    """ "hottest: 2023-07-02 (71 °C)": every day that ties for the maximum is named, and when all
    days are equal the finding says so instead of presenting one of them as the extreme."""
    values = frame[column].dropna().round(0)  # ties as shown: whole units
    top = values.max()
    tied = frame.loc[values[values == top].index, "day"]
    if len(values) > 1 and len(tied) == len(values):
        return f"{what}: the same on all {len(values)} days ({top:,.0f}{unit})"
    return f"{what}: {', '.join(f'{d:%Y-%m-%d}' for d in tied)} ({top:,.0f}{unit})"


def _failure_tables(reasons: pd.DataFrame | None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The per-reason table as queried and its per-category sums. A diagnosis without a category
    (reason Unknown, or one outside the taxonomy) is its own row under ``UNCATEGORIZED``: every
    diagnosed job is counted, none is dropped."""
    import pandas as pd

    if reasons is None or reasons.empty:
        empty = pd.DataFrame(
            columns=["category", "reason", "jobs", "job_share", "gpu_time", "gpu_time_share",
                     "med_time_to_failure_s", "avg_time_to_failure_s", "med_gpu_num", "avg_gpu_num"]
        )  # fmt: skip
        return empty, pd.DataFrame(columns=["category", "jobs", "job_share", "gpu_time", "gpu_time_share"])
    reasons = reasons.copy()
    reasons["category"] = reasons["category"].fillna(UNCATEGORIZED)
    reasons["reason"] = reasons["reason"].fillna(UNCATEGORIZED)
    categories = reasons.groupby("category", as_index=False, dropna=False)[["jobs", "gpu_time"]].sum()
    categories["job_share"] = categories["jobs"] / categories["jobs"].sum()
    total = categories["gpu_time"].sum()
    categories["gpu_time_share"] = categories["gpu_time"] / total if total else 0.0
    categories = categories.sort_values(["gpu_time", "jobs"], ascending=False)[
        ["category", "jobs", "job_share", "gpu_time", "gpu_time_share"]
    ]
    return reasons, categories.reset_index(drop=True)


# --- 9. trends ----------------------------------------------------------------------------------


def trends(report: Characterization, inputs: ReportInputs) -> None:
    queries = inputs.queries
    usage = queries.jobs("select_daily_usage")
    outcomes = queries.jobs("select_daily_outcomes")
    utilization = queries.metric_daily("gpu_util")
    if utilization is not None:
        outcomes = outcomes.merge(
            utilization.rename(columns={"mean": "gpu_util_mean_pct"})[["day", "gpu_util_mean_pct"]],
            on="day",
            how="left",
        )
    report.tables["daily_usage"] = usage
    report.tables["daily_outcomes"] = outcomes
    per_day = usage.groupby("day")[["jobs", "gpu_hours"]].sum()
    if len(per_day) > 1:
        finding = (
            f"{len(per_day)} days: {per_day['jobs'].mean():,.0f} jobs and {per_day['gpu_hours'].mean():,.0f} "
            f"GPU-hours a day on average; "
            + _extreme_days(per_day.reset_index(), "gpu_hours", "most GPU-hours", " GPU-h")
        )
    else:  # nothing to draw across nights: the month and history reports show the trends
        finding = (
            f"1 day: {per_day['jobs'].sum():,.0f} jobs, {per_day['gpu_hours'].sum():,.0f} GPU-hours; "
            "trends need more than one day (see the month's report)"
        )
    if len(outcomes) and outcomes["fail_rate"].notna().any():
        finding += (
            f"; daily failure rate {pct(outcomes['fail_rate'].min())}–{pct(outcomes['fail_rate'].max())}"
        )
    report.figures.append(
        FigureSpec(
            "trends", "Trends across nights", finding, ["daily_usage", "daily_outcomes"], len(per_day) > 1
        )
    )
