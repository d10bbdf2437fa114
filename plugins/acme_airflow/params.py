"""The Params every nightly ingest DAG takes for manual runs (cluster, source, day, input)."""

from __future__ import annotations

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
