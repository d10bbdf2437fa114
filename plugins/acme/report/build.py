"""Build and publish reports; plan which reports a pipeline run refreshes.

``build_report`` is what the command line and the ``characterize`` DAG call: query, draw, write
the report, refresh the index. Its result is the manifest the command line prints.
"""

from __future__ import annotations

from datetime import date
from typing import TYPE_CHECKING, Any

from acme import lake_keys, settings
from acme.report.periods import Period, month_of, parse_period, previous_month

if TYPE_CHECKING:
    from acme.lake import Lake


def build_report(
    lake: Lake,
    cluster: str,
    period: str | Period,
    out_dir: str | None = None,
    definition: str | None = None,
    write_index: bool = True,
) -> dict[str, Any]:
    """Characterize ``cluster`` over ``period`` from ``lake``; publish under ``reports/`` of the lake,
    or under the local folder ``out_dir`` when given. Returns ``{"index", "report", "figures",
    "tables", "summary"}`` where ``index`` is the page listing every report (refreshed unless
    ``write_index`` is false: the DAG writes it once after all its reports)."""
    from acme.lake import Lake as LakeClass
    from acme.report.characterize import characterize
    from acme.report.publish import ReportWriter
    from acme.report.sections import render_figures

    period = period if isinstance(period, Period) else parse_period(period)
    definition = definition or settings.report().definition
    if definition not in settings.REPORT_DEFINITIONS:
        from acme.errors import ConfigError

        raise ConfigError(
            f"run-time definition {definition!r} must be one of {', '.join(settings.REPORT_DEFINITIONS)}"
        )
    report = characterize(lake, cluster, period, definition)
    pngs = render_figures(report)
    writer = ReportWriter(LakeClass(out_dir), prefix="") if out_dir else ReportWriter(lake)
    manifest = writer.write_report(report, pngs)
    index = writer.write_index() if write_index else writer.lake.url(writer.key("index.html"))
    return {
        "index": index,
        "report": manifest["index"],
        **{k: manifest[k] for k in ("figures", "tables", "summary")},
    }


def cluster_days(lake: Lake, cluster: str) -> list[date]:
    """The submit days the lake holds job partitions for."""
    from acme.report.queries import partition_day

    return sorted(
        {
            date.fromisoformat(partition_day(k))
            for k in lake.list(lake_keys.jobs_cluster(cluster))
            if k.endswith(f"/{lake_keys.JOBS_FILE}")
        }
    )


def ingested_days(extras: list[dict[str, Any]]) -> list[dict[str, str]]:
    """The (cluster, day) pairs that triggering Asset events name: a metrics event names its cluster
    and day; a diagnosis event the pairs it covered (``days``)."""
    return [
        pair
        for extra in extras
        for pair in extra.get("days") or [extra]
        if pair.get("cluster") and pair.get("day")
    ]


def plan_run(
    lake: Lake, cluster: str, extras: list[dict[str, Any]], run_day: date, period: str | None
) -> list[dict[str, str]]:
    """The reports a DAG run refreshes: ``cluster`` is a configured cluster or ``all``, ``extras``
    the triggering events' extras (see :func:`plan_reports`)."""
    from acme.clusters import load_clusters

    clusters = sorted(load_clusters()) if cluster == "all" else [cluster]
    return plan_reports(lake, clusters, ingested_days(extras), run_day, period)


def report_result(manifest: dict[str, Any]) -> dict[str, Any]:
    """What a built report tells the pipeline: its URL, figure count and headline numbers."""
    headline = {k: manifest["summary"].get(k) for k in ("cluster", "period", "gpu_jobs", "fail_rate_gpu")}
    return {"report": manifest["report"], "figures": manifest["figures"], **headline}


def plan_reports(
    lake: Lake,
    clusters: list[str],
    ingested: list[dict[str, str]],
    run_day: date,
    period: str | None = None,
) -> list[dict[str, str]]:
    """The (cluster, period) reports a run refreshes, only where the lake has jobs for them.

    - ``period`` given (a manual run): that period for each cluster (``NoJobsError`` when none has jobs
      in it);
    - after ingests (``ingested``: the Asset events' ``{"cluster", "day"}``): each ingested day,
      its month and the whole history of that cluster;
    - otherwise (the monthly schedule): the month before ``run_day`` and the whole history.
    """
    from acme.clusters import is_cluster_name
    from acme.errors import ConfigError

    strange = [c for c in clusters if not is_cluster_name(c)]
    if strange:  # a cluster Param becomes a lake path: "seren/../../x" must not leave the lake
        raise ConfigError(f"{strange[0]!r} is not a cluster name (lower-case letters, digits, '-', '_')")
    wanted: set[tuple[str, str]] = set()
    if period:
        label = parse_period(period).label  # "2023-07\n" passes the Param's pattern; the label has no "\n"
        wanted = {(c, label) for c in clusters}
    elif ingested:
        for event in ingested:
            if event.get("cluster") in clusters and event.get("day"):
                day = date.fromisoformat(event["day"])
                wanted |= {
                    (event["cluster"], day.isoformat()),
                    (event["cluster"], month_of(day).label),
                    (event["cluster"], "all"),
                }
    else:
        month = previous_month(run_day).label
        wanted = {(c, p) for c in clusters for p in (month, "all")}
    plans = []
    for cluster in sorted({c for c, _ in wanted}):
        days = cluster_days(lake, cluster)
        for label in sorted(p for c, p in wanted if c == cluster):
            chosen = parse_period(label)
            if any(chosen.contains(d) for d in days):
                plans.append({"cluster": cluster, "period": label})
    if period and not plans:
        # A period asked for by hand that no cluster has jobs in: say so (a green run that built
        # nothing would look like a report was made).
        from acme.report.queries import NoJobsError

        raise NoJobsError(
            lake.url(lake_keys.JOBS),
            f"no job partitions of {', '.join(clusters)} in {parse_period(period).title}",
        )
    return plans
