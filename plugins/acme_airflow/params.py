"""The Params every nightly ingest DAG takes for manual runs (cluster, source, day, input)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from airflow.sdk import Param


def manual_run_params(formats: list[str], input_description: str) -> dict[str, Param]:
    """Typed Params: a cluster or all, a source format (or the configured one), a UTC day, an input."""
    return {
        "cluster": Param("all", type="string", title="Cluster", description="A configured cluster, or all."),
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
    with no_retry_for_bad_input():
        return plan(
            load_clusters(), run_day(context), params["cluster"], params["source"], params.get("input")
        )
