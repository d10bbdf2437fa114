"""The monitoring-input formats, named once: the cluster configuration (``metrics.format`` in
``clusters.yaml``), the command line (``ingest-metrics --format``), the DAG's ``source`` Param and the
ingest's readers (``acme.metrics.ingest``, one reader per name) all read this table.

This module imports no reader: the command line and the DAG read it at parse time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from acme.errors import ConfigError

if TYPE_CHECKING:
    from acme.clusters import Cluster

# name → what an input of that format is
FORMATS: dict[str, str] = {
    "prometheus": "a Prometheus server's base URL: every catalog metric with PromQL, fetched for the day",
    "prometheus-json": "a saved /api/v1/query_range (or, as a snapshot, /api/v1/query) answer",
    "exporter-text": "a dcgm-exporter (or node, IPMI, BMC) scrape file, or a folder of them",
    "acmetrace-csv": "an AcmeTrace wide CSV, or a folder of them, one metric per file",
}
FORMAT_NAMES: tuple[str, ...] = tuple(FORMATS)


def check_cluster_source(cluster: Cluster) -> None:
    """A cluster's configured ``metrics`` source names a format of this table; else a ConfigError naming
    the configuration file and the cluster."""
    if cluster.metrics is not None and cluster.metrics.format not in FORMATS:
        raise ConfigError(
            f"{cluster.where}: metrics.format must be one of {', '.join(FORMAT_NAMES)}, "
            f"got {cluster.metrics.format!r}"
        )
