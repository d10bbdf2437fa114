"""Where a crashed job's checkpoints are, and which setting said so.

In this order: the run's ``checkpoint_uri`` (the diagnosis passes the job record's), then the
``checkpoint_uri_pattern`` of the job's cluster in the cluster configuration
(``include/config/clusters.yaml``, ``ACME_CLUSTERS_FILE``), then ``ACME_CHECKPOINT_URI_PATTERN``, then
that setting's default ``{lake}/checkpoints/cluster={cluster}/job={job_id}``. The source goes with the
location into the action log, so "no healthy checkpoint" names the setting to change.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from acme.errors import ConfigError

PARAM = "the checkpoint_uri Param"
SETTING = "ACME_CHECKPOINT_URI_PATTERN"


@dataclass(frozen=True)
class CheckpointLocation:
    uri: str
    source: str  # the setting it came from, as an error message names it


def cluster_checkpoint_pattern(cluster: str, clusters_file: Path | None = None) -> tuple[str, str] | None:
    """The cluster's ``checkpoint_uri_pattern`` and where it is written, or None when the cluster is not
    configured or has none. A configuration that cannot be read is a ConfigError: a recovery does not
    silently look elsewhere than the operator said."""
    from acme import settings
    from acme.clusters import load_clusters

    path = clusters_file or settings.project().clusters_file
    if not path.exists():
        return None
    entry = load_clusters(path).get(cluster)
    if entry is None or entry.checkpoint_uri_pattern is None:
        return None
    return entry.checkpoint_uri_pattern, f"checkpoint_uri_pattern of cluster {cluster} in {path}"


def checkpoint_location(
    cluster: str, job_id: str, lake_uri: str, given: str | None = None, clusters_file: Path | None = None
) -> CheckpointLocation:
    """The location of ``job_id``'s checkpoints (module docstring); ``given`` is the run's
    ``checkpoint_uri`` (blank: not given), ``{lake}`` is ``lake_uri``."""
    from acme.settings import DEFAULT_CHECKPOINT_URI_PATTERN, recovery

    if given is not None and not isinstance(given, str):
        raise ConfigError(f"checkpoint_uri must be a string, got {given!r}")
    if given and given.strip():
        return CheckpointLocation(given.strip(), PARAM)
    found = cluster_checkpoint_pattern(cluster, clusters_file)
    if found is not None:
        pattern, source = found
    else:
        configured = recovery().checkpoint_uri_pattern
        pattern = configured or DEFAULT_CHECKPOINT_URI_PATTERN
        source = SETTING if configured else f"{SETTING} (unset: its default {DEFAULT_CHECKPOINT_URI_PATTERN})"
    return CheckpointLocation(
        pattern.format(lake=lake_uri.rstrip("/"), cluster=cluster, job_id=job_id), source
    )
