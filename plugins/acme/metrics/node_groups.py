"""A day of telemetry split by node group: each group stored on its own, then its rollups merged.

A datacenter-size day (Acme: 4,704 GPUs on 588 nodes, about 290 M samples of the catalog's 16
metrics) is too much for one task within minutes. The nightly DAG then splits each input into
``node_groups`` groups (the cluster's ``metrics.node_groups`` setting or the run's Param; 1, the
default, keeps the single-task path of :func:`acme.metrics.storage.publish_day`). Node ``n`` belongs
to group ``crc32(n) mod N``: stable across days and runs, known without reading the input first, and
even enough at the sizes that need groups (588 nodes in 8 groups: 73 ± 9).

Group ``g`` of ``N`` (``acme.metrics.ingest`` with ``node_group=(g, N)``) reads only its nodes
(the wide-CSV reader converts only its nodes' columns; the other formats are read whole and
filtered), validates and quarantines them, and writes, each object whole (a retry rewrites it)::

    metrics/metric=<m>/cluster=<c>/date=<d>/samples.group-<g>-of-<N>.parquet   the group's samples
    staging/metrics_node_groups/metric=<m>/cluster=<c>/date=<d>/rollup.group-<g>-of-<N>.parquet
    staging/metrics_node_groups/metric=<m>/cluster=<c>/date=<d>/hist.group-<g>-of-<N>.parquet

:func:`merge_node_groups` (the DAG's reduce step, after every group succeeded) then writes the day's
``rollup.parquet`` and ``hist.parquet`` from the groups' parts: the rollup rows put back in the
single-task order (series by node, GPU, UUID, instance; then time), the histogram counts summed, so
both hold exactly what a single-task run stores. It removes the day's sample files of any other
layout (``samples.parquet`` of a single-task run, the files of another group count) and the stale
staging parts. Readers (:func:`acme.metrics.storage.read_samples`) read every sample file of a
partition.
"""

from __future__ import annotations

import zlib
from collections import defaultdict
from datetime import date
from typing import TYPE_CHECKING, Any

from acme import lake_keys
from acme.errors import ConfigError, InputError

if TYPE_CHECKING:
    import pyarrow as pa

    from acme.lake import Lake
    from acme.metrics.catalog import MetricSpec
    from acme.metrics.storage import Samples

NodeGroup = tuple[int, int]  # (index, count)
GROUP_AREA = "staging/metrics_node_groups"
ROLLUP_DICTIONARIES = ("node", "uuid", "gpu_instance")


def node_group_of(node: str, groups: int) -> int:
    """The group (0 .. groups - 1) a node belongs to."""
    return zlib.crc32(node.encode()) % groups


def check_node_groups(value: Any, where: str) -> int:
    """A node-group count from a setting or Param: a positive integer (1 = one task per input)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{where}: node_groups must be a positive integer (1 = one task), got {value!r}")
    return value


def group_label(group: NodeGroup) -> str:
    return f"group-{group[0]:03d}-of-{group[1]:03d}"


def group_samples_key(metric: str, cluster: str, day: date | str, group: NodeGroup) -> str:
    return f"{lake_keys.metric_partition(metric, cluster, day)}/samples.{group_label(group)}.parquet"


def _part_key(kind: str, metric: str, cluster: str, day: date | str, group: NodeGroup) -> str:
    return (
        f"{lake_keys.metric_partition(metric, cluster, day, GROUP_AREA)}/{kind}.{group_label(group)}.parquet"
    )


def select_node_group(samples: Samples, group: NodeGroup) -> Samples:
    """The samples of the group's nodes, with a series table of those nodes only."""
    import numpy as np

    from acme.metrics.storage import Samples

    keep = np.array([node_group_of(str(n), group[1]) == group[0] for n in samples.series["node"]], dtype=bool)
    new_id = np.cumsum(keep) - 1
    mask = keep[samples.series_id] if len(samples.series_id) else np.zeros(0, dtype=bool)
    return Samples(
        samples.metric,
        samples.series[keep].reset_index(drop=True),
        new_id[samples.series_id[mask]].astype(np.int32),
        samples.ts_ms[mask],
        samples.value[mask],
        samples.is_sorted,
        list(samples.notes),
    )


def publish_group_day(
    lake: Lake, spec: MetricSpec, cluster: str, day: date, samples: Samples, source: str, group: NodeGroup
) -> dict[str, Any]:
    """Replace the group's sample file of the day and its rollup and histogram parts; the manifest of
    :func:`acme.metrics.storage.publish_day`."""
    from acme.metrics.storage import (
        canonicalize,
        encode_parquet,
        histogram,
        histogram_table,
        rollup_5m,
        samples_table,
        stored_outcome,
    )

    samples = canonicalize(samples)
    meta = {"acme.cluster": cluster, "acme.source": source, "acme.node_group": group_label(group)}
    data = encode_parquet(samples_table(samples, spec), spec, meta)
    url = lake.write_bytes(group_samples_key(spec.name, cluster, day, group), data)
    lake.write_parquet(_part_key("rollup", spec.name, cluster, day, group), rollup_5m(samples, day))
    hist = histogram_table(histogram(samples.value, spec))
    lake.write_parquet(_part_key("hist", spec.name, cluster, day, group), hist)
    return stored_outcome(spec, day, url, samples, data)


def merge_rollups(parts: list[pa.Table]) -> pa.Table:
    """The groups' 5-minute rollups as one table in the single-task order and dictionaries."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    table = pa.concat_tables([_decoded(part) for part in parts])
    order = np.lexsort(
        (
            pc.cast(table["bucket_start"], pa.int64()).to_numpy(),
            table["gpu_instance"].fill_null("").to_numpy(zero_copy_only=False).astype(str),
            table["uuid"].fill_null("").to_numpy(zero_copy_only=False).astype(str),
            table["gpu"].fill_null(-1).to_numpy().astype(np.int64),
            table["node"].to_numpy(zero_copy_only=False).astype(str),
        )
    )
    table = table.take(pa.array(order)).combine_chunks()
    for name in ROLLUP_DICTIONARIES:
        index = table.schema.get_field_index(name)
        table = table.set_column(index, name, pc.dictionary_encode(table[name]).combine_chunks())
    return table


def _decoded(table: pa.Table) -> pa.Table:
    """A rollup with its dictionary columns as plain strings (the groups' dictionaries differ)."""
    import pyarrow as pa

    for name in ROLLUP_DICTIONARIES:
        index = table.schema.get_field_index(name)
        table = table.set_column(index, name, table[name].cast(pa.string()))
    return table


def merge_histograms(parts: list[pa.Table]) -> pa.Table:
    """The groups' histograms of one metric and day summed (same bins)."""
    import numpy as np
    import pyarrow as pa

    first = parts[0]
    counts = np.zeros(first.num_rows, dtype=np.int64)
    for part in parts:
        if part.num_rows != first.num_rows or part["bin_low"] != first["bin_low"]:
            raise InputError("node-group histograms", f"bins differ between groups ({part.schema.metadata})")
        counts += part["count"].to_numpy()
    table = pa.table({"bin_low": first["bin_low"], "bin_high": first["bin_high"], "count": pa.array(counts)})
    return table.replace_schema_metadata(first.schema.metadata)


def merge_node_groups(lake: Lake, manifests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The DAG's reduce step: one manifest per input; the grouped inputs' rollups and histograms merged.

    ``manifests`` are what :func:`acme.metrics.ingest.ingest_planned_input` returned for every planned
    input (a single-task input passes through unchanged). Every group of an input must be there.
    """
    by_input: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    merged: list[dict[str, Any]] = []
    for manifest in manifests:
        if manifest.get("node_group") is None:
            merged.append(manifest)
        else:
            by_input[(manifest["cluster"], manifest["day"], manifest["input_key"])].append(manifest)
    for groups in by_input.values():
        merged.append(_merge_input(lake, sorted(groups, key=lambda m: m["node_group"][0])))
    return merged


def _merge_input(lake: Lake, groups: list[dict[str, Any]]) -> dict[str, Any]:
    cluster, day, count = groups[0]["cluster"], groups[0]["day"], groups[0]["node_group"][1]
    present = [m["node_group"][0] for m in groups]
    if present != list(range(count)):
        missing = sorted(set(range(count)) - set(present))
        raise InputError(f"{cluster} {day}", f"node groups {missing} of {count} have no manifest: not merged")
    metrics = sorted({name for m in groups for name in m["metrics"]})
    for metric in metrics:  # a group stored a metric when it wrote a sample file of it
        stored = [
            m["node_group"][0] for m in groups if any(f"/metric={metric}/" in p for p in m["partitions"])
        ]
        if stored:
            _merge_metric(lake, metric, cluster, day, [(g, count) for g in stored])
    samples = sum(m["samples"] for m in groups)
    if not samples:
        raise InputError(f"{cluster} {day}", "no node group stored a sample of a catalog metric")
    stored_bytes = sum(m["bytes"] for m in groups)
    return {
        "cluster": cluster, "day": day, "mode": groups[0]["mode"], "samples": samples,
        "series": sum(m["series"] for m in groups), "quarantined": sum(m["quarantined"] for m in groups),
        "metrics": metrics, "partitions": [p for m in groups for p in m["partitions"]],
        "node_groups": count, "bytes": stored_bytes, "bytes_per_sample": round(stored_bytes / samples, 3),
    }  # fmt: skip


def _merge_metric(lake: Lake, metric: str, cluster: str, day: str, groups: list[NodeGroup]) -> None:
    """Write one metric-day's rollup and histogram from its groups' parts; drop other layouts' files."""
    rollups = [lake.read_parquet(_part_key("rollup", metric, cluster, day, g)) for g in groups]
    hists = [lake.read_parquet(_part_key("hist", metric, cluster, day, g)) for g in groups]
    with lake.lock(f"metrics-{metric}-{cluster}-{day}"):
        lake.write_parquet(lake_keys.metric_rollup(metric, cluster, day), merge_rollups(rollups))
        lake.write_parquet(lake_keys.metric_histogram(metric, cluster, day), merge_histograms(hists))
        current = {group_samples_key(metric, cluster, day, g) for g in groups}
        current |= {_part_key(kind, metric, cluster, day, g) for g in groups for kind in ("rollup", "hist")}
        for area in (lake_keys.METRICS, GROUP_AREA):
            for key in lake.list(lake_keys.metric_partition(metric, cluster, day, area)):
                if key.endswith(".parquet") and key not in current:
                    lake.remove(key)
