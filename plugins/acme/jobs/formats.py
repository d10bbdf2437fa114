"""The registry of job-input formats: a new format is one module plus one entry in ``FORMATS``.

A format module provides:

- ``parse_input(job_input, local_path) -> (ParseResult, layout)``: the whole input at once;
- optionally ``stream_input(job_input, local_path, on_jobs) -> (ParseSummary, layout)``: the same
  rows handed to ``on_jobs`` in batches, for inputs too large to hold (sacct);
- optionally ``live_export(job_input, command) -> bytes``: run the cluster's own command for
  the input's day (live sacct); the entry then says ``live=True``.

The entry names the layouts the parser can report and what validation expects of each
(:class:`LayoutRules`). Nothing else in the code branches on a format's name.

This module imports no parser: the cluster configuration and the DAG read it at parse time.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING

from acme.errors import ConfigError, InputError

if TYPE_CHECKING:
    from acme.clusters import Cluster


@dataclass(frozen=True)
class LayoutRules:
    """What validation expects of one source layout.

    ``duration_basis``: what the source's own ``duration`` column measures: ``run`` = end −
    start, ``submit`` = end − submit (Kalos includes queueing), ``run_at_most`` = at most end −
    start (sacct's Elapsed leaves out the time a job was suspended), None = no such column.
    ``required``: columns the layout always fills (AcmeTrace has a user, a GPU count and a submit
    time on every row; sacct and Kubernetes exports legitimately lack them).
    ``source_gpu_time``: the source carries its own GPU time, checked against GPUs × duration.
    """

    duration_basis: str | None = None
    required: tuple[str, ...] = ()
    source_gpu_time: bool = False


@dataclass(frozen=True)
class JobFormat:
    name: str  # the --format / clusters.yaml jobs.format value, and the rows' ``source``
    module: str  # the parser module (see the module docstring)
    raw_suffix: str  # file suffix of the lake's raw copy when the input's name has none
    layouts: dict[str, LayoutRules] = field(default_factory=dict)
    live: bool = False  # has ``live_export`` (clusters.yaml jobs.command, --command)

    def load(self) -> ModuleType:
        return importlib.import_module(self.module)


_ACMETRACE_REQUIRED = ("user", "gpu_num", "submit_time")

FORMATS: dict[str, JobFormat] = {
    spec.name: spec
    for spec in (
        JobFormat(
            "acmetrace",
            "acme.jobs.acmetrace",
            ".csv",
            {
                "seren": LayoutRules("run", _ACMETRACE_REQUIRED, source_gpu_time=True),
                "kalos": LayoutRules("submit", _ACMETRACE_REQUIRED, source_gpu_time=True),
            },
        ),
        JobFormat("sacct", "acme.jobs.sacct", ".txt", {"sacct": LayoutRules("run_at_most")}, live=True),
        JobFormat("k8s", "acme.jobs.kubernetes", ".json", {"k8s": LayoutRules()}),
    )
}
FORMAT_NAMES = tuple(FORMATS)


def job_format(name: str, where: str) -> JobFormat:
    """The registry entry of ``name``; an :class:`InputError` naming ``where`` if there is none."""
    try:
        return FORMATS[name]
    except KeyError:
        raise InputError(where, f"unknown format {name!r}; expected one of {', '.join(FORMATS)}") from None


def check_cluster_source(cluster: Cluster) -> JobFormat:
    """The format of a cluster's configured ``jobs`` source, checked: a name of this registry, and one
    with a live mode when the source is a ``command``; a ConfigError naming the file and cluster."""
    spec = FORMATS.get(cluster.jobs.format)
    if spec is None:
        raise ConfigError(
            f"{cluster.where}: jobs.format must be one of {', '.join(FORMAT_NAMES)}, got {cluster.jobs.format!r}"
        )
    if cluster.jobs.command and not spec.live:
        live = ", ".join(name for name, entry in FORMATS.items() if entry.live)
        raise ConfigError(f"{cluster.where}: jobs.command (live mode) exists for {live} only")
    return spec


def layout_rules(layout: str) -> LayoutRules:
    """The validation rules of a layout any format reports (none known: the canonical checks only)."""
    for spec in FORMATS.values():
        if layout in spec.layouts:
            return spec.layouts[layout]
    return LayoutRules()
