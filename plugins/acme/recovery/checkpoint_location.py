"""Where a crashed job's checkpoints and a hung job's Flight Recorder dumps are, and which setting said so.

Checkpoints, in this order: the run's ``checkpoint_uri`` (the diagnosis passes the job record's), then the
``checkpoint_uri_pattern`` of the job's cluster in the cluster configuration
(``include/config/clusters.yaml``, ``ACME_CLUSTERS_FILE``), then ``ACME_CHECKPOINT_URI_PATTERN``, then
that setting's default ``{lake}/checkpoints/cluster={cluster}/job={job_id}``. The source goes with the
location into the action log, so "no healthy checkpoint" names the setting to change.

Flight Recorder dumps (:func:`flight_recorder_location`), for a run that names none: the cluster's
``flight_recorder_uri_pattern``, then ``ACME_FLIGHT_RECORDER_URI_PATTERN``; neither set: none are looked for.
So a recovery the diagnosis starts after a hang reads the dumps the job's watchdog wrote there.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from acme.errors import ConfigError

PARAM = "the checkpoint_uri Param"
SETTING = "ACME_CHECKPOINT_URI_PATTERN"


@dataclass(frozen=True)
class CheckpointLocation:
    """A location (of checkpoints, or of Flight Recorder dumps) and the setting it came from."""

    uri: str
    source: str  # the setting it came from, as an error message names it


def cluster_pattern(cluster: str, name: str, clusters_file: Path | None = None) -> tuple[str, str] | None:
    """The cluster's location pattern ``name`` (``checkpoint_uri_pattern``, ``flight_recorder_uri_pattern``)
    and where it is written, or None when the cluster is not configured or has none. A configuration that
    cannot be read is a ConfigError: a recovery does not silently look elsewhere than the operator said."""
    from acme import settings
    from acme.clusters import load_clusters

    path = clusters_file or settings.project().clusters_file
    if not path.exists():
        return None
    entry = load_clusters(path).get(cluster)
    pattern = None if entry is None else getattr(entry, name)
    return None if pattern is None else (pattern, f"{name} of cluster {cluster} in {path}")


def _filled(pattern: str, lake_uri: str, cluster: str, job_id: str) -> str:
    return pattern.format(lake=lake_uri.rstrip("/"), cluster=cluster, job_id=job_id)


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
    found = cluster_pattern(cluster, "checkpoint_uri_pattern", clusters_file)
    if found is not None:
        pattern, source = found
    else:
        configured = recovery().checkpoint_uri_pattern
        pattern = configured or DEFAULT_CHECKPOINT_URI_PATTERN
        source = SETTING if configured else f"{SETTING} (unset: its default {DEFAULT_CHECKPOINT_URI_PATTERN})"
    return CheckpointLocation(_filled(pattern, lake_uri, cluster, job_id), source)


FLIGHT_RECORDER_SETTING = "ACME_FLIGHT_RECORDER_URI_PATTERN"


def flight_recorder_location(
    cluster: str, job_id: str, lake_uri: str, clusters_file: Path | None = None
) -> CheckpointLocation | None:
    """Where ``job_id``'s Flight Recorder dumps are written by the cluster's configuration or the setting
    (module docstring), or None when neither says."""
    from acme.settings import recovery

    found = cluster_pattern(cluster, "flight_recorder_uri_pattern", clusters_file)
    if found is None:
        configured = recovery().flight_recorder_uri_pattern
        found = (configured, FLIGHT_RECORDER_SETTING) if configured else None
    if found is None:
        return None
    pattern, source = found
    return CheckpointLocation(_filled(pattern, lake_uri, cluster, job_id), source)
