"""The Params every nightly ingest DAG takes for manual runs (cluster, source, day, input), the
``cluster`` Param the other DAGs share, and the ingest plan of a run (which leaves out days the
bundled sample data does not have, so a first scheduler start skips instead of retrying)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from typing import Any

from airflow.sdk import Param


def configured_cluster_names() -> list[str]:
    """The configured clusters' names, for the Params' enums.

    Read at parse time from the clusters file: a small local YAML shipped with the DAGs (no network,
    no metadata DB, cached per process). When it cannot be read or is invalid the list is empty and
    the Param stays free text; the run's start then fails at once with the configuration error."""
    from acme.clusters import load_clusters
    from acme.errors import ConfigError

    try:
        return sorted(load_clusters())
    except ConfigError:
        return []


def cluster_param() -> Param:
    """``cluster``: one of the configured clusters or ``all`` (a dropdown in the trigger form)."""
    names = configured_cluster_names()
    choice = {"enum": ["all", *names]} if names else {"type": "string"}
    return Param(
        "all",
        **choice,
        title="Cluster",
        description="A configured cluster (include/config/clusters.yaml or ACME_CLUSTERS_FILE), or all.",
    )


def params_from_schema(schema: dict[str, dict[str, Any]]) -> dict[str, Param]:
    """Params from JSON-schema properties (``{name: {"default", "type", "title", ...}}``): a property
    without ``default`` becomes a Param a run must give."""
    params = {}
    for name, spec in schema.items():
        spec = dict(spec)
        if "default" in spec:
            params[name] = Param(spec.pop("default"), **spec)
        else:
            params[name] = Param(**spec)
    return params


def manual_run_params(formats: list[str], input_description: str) -> dict[str, Param]:
    """Typed Params: a cluster or all, a source format (or the configured one), a UTC day, an input."""
    return {
        "cluster": cluster_param(),
        "source": Param(
            "configured",
            enum=["configured", *formats],
            title="Source format",
            description="configured = each cluster's own source; otherwise read `input` in this format.",
        ),
        "day": Param(
            None,
            type=["null", "string"],
            format="date",
            title="Day (UTC)",
            description="Empty = the run's data interval (or yesterday for a manual run).",
        ),
        "input": Param(None, type=["null", "string"], title="Input location", description=input_description),
    }


def plan_run_inputs(plan: Callable[..., list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """An ingest DAG's plan: ``plan(clusters, day, cluster, source, input)`` with the configured clusters,
    the run's UTC day and the Params above. Bad Params or configuration fail the task without a retry."""
    from airflow.sdk import get_current_context

    from acme.clusters import load_clusters
    from acme_airflow.context import run_day
    from acme_airflow.failures import no_retry_for_bad_input

    context = get_current_context()
    params = context["params"]
    day = run_day(context)
    with no_retry_for_bad_input():
        planned = plan(load_clusters(), day, params["cluster"], params["source"], params.get("input"))
    return without_missing_sample_days(planned, day)


def without_missing_sample_days(planned: list[dict[str, Any]], day: date) -> list[dict[str, Any]]:
    """The planned inputs less those that name a bundled sample file (``include/sample_data``) that
    does not exist: with the bundled configuration only the sample days have input, and a retry
    cannot change that. When nothing is left the task is skipped with the reason and how to
    configure a source, so a first scheduler start ends in one quick skipped run instead of a
    retry loop. Inputs elsewhere are kept: a missing export may still arrive and the extract's
    retries wait for it."""
    import logging
    import os

    from airflow.sdk.exceptions import AirflowSkipException

    from acme import settings

    samples = os.path.join(os.path.abspath(settings.project().include_dir), "sample_data") + os.sep
    kept, missing = [], {}
    for item in planned:
        uri = item["input"]["uri"] if isinstance(item["input"], dict) else item["input"]
        cluster = item["input"]["cluster"] if isinstance(item["input"], dict) else item["cluster"]
        path = os.path.abspath(str(uri))
        if path.startswith(samples) and not os.path.exists(path):
            missing[cluster] = path
        else:
            kept.append(item)
    if not missing:
        return kept
    folders = sorted({os.path.dirname(p) for p in missing.values()})
    bundled = sorted(name[:10] for folder in folders if os.path.isdir(folder) for name in os.listdir(folder))
    reason = (
        f"no bundled sample for {day.isoformat()} ({', '.join(sorted(missing))}): the bundled configuration "
        f"only has the sample days {bundled[0] if bundled else '–'} to {bundled[-1] if bundled else '–'} "
        "under include/sample_data. Configure each cluster's source in include/config/clusters.yaml "
        "(or point ACME_CLUSTERS_FILE at your own file), or trigger a run with a sample day."
    )
    if not kept:
        raise AirflowSkipException(reason)
    logging.getLogger(__name__).warning("left out: %s", reason)
    return kept
