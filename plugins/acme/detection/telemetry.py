"""A set of nodes' recent telemetry on one time grid: what the detectors read.

The detectors need, per step of ``step_s`` seconds, each GPU's SM activity, tensor-core activity and
utilization (``sm_active``, ``tensor_active``, ``gpu_util``, in %), each node's InfiniBand traffic
(``ib_tx`` + ``ib_rx``, B/s) and, when the cluster publishes it, each node's writes to the shared
(checkpoint) file system (``storage_write``, B/s: what tells a checkpoint write and the barrier wait that
ends it from a hung collective; without it the detectors fall back to the GPU and RDMA signals). They come
from the metrics lake (``metrics/metric=/cluster=/date=``, the
nightly ingest's partitions, or anything else that publishes there) or from Prometheus through the
catalog's PromQL (``acme.metrics.prometheus``), as :class:`acme.metrics.storage.Samples`; here they are
put on a grid, missing samples as NaN (missing data is never read as idleness).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

    from acme.lake import Lake
    from acme.metrics.catalog import MetricSpec
    from acme.metrics.storage import Samples

GPU_METRICS = ("sm_active", "tensor_active", "gpu_util")
NODE_METRICS = ("ib_tx", "ib_rx", "storage_write")
METRICS = GPU_METRICS + NODE_METRICS


@dataclass
class Telemetry:
    """Nodes' metrics over ``steps`` steps from ``start_ms``: GPU rows (node index, gpu) and node rows."""

    start_ms: int
    step_s: int
    steps: int
    nodes: list[str]
    gpu_node: np.ndarray  # (gpus,) index into nodes
    gpu_index: np.ndarray  # (gpus,) the GPU's number on its node
    sm: np.ndarray  # (gpus, steps) %
    tensor: np.ndarray
    util: np.ndarray
    ib: np.ndarray  # (nodes, steps) B/s, tx + rx; NaN where neither is known
    write: np.ndarray  # (nodes, steps) B/s written to the shared file system; NaN where unknown

    @property
    def gpus(self) -> int:
        return len(self.gpu_node)

    def span(self, begin: int, end: int) -> Telemetry:
        """Steps [begin, end) (what a detection whose window ends at step ``end`` sees)."""
        return Telemetry(
            self.time_ms(begin), self.step_s, end - begin, self.nodes, self.gpu_node, self.gpu_index,
            self.sm[:, begin:end], self.tensor[:, begin:end], self.util[:, begin:end], self.ib[:, begin:end],
            self.write[:, begin:end],
        )  # fmt: skip

    def time_ms(self, step: int) -> int:
        return self.start_ms + step * self.step_s * 1000

    def iso(self, step: int) -> str:
        return datetime.fromtimestamp(self.time_ms(step) / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    def since(self, when_ms: int) -> Telemetry:
        """The steps from ``when_ms`` on (a job's window never reaches back before the job started)."""
        first = min(self.steps, max(0, -(-(when_ms - self.start_ms) // (self.step_s * 1000))))
        return self.span(first, self.steps)

    def select(self, nodes: Sequence[str]) -> Telemetry:
        """The rows of ``nodes`` (in that order; a node without telemetry gets no GPU rows, NaN IB)."""
        import numpy as np

        position = {n: i for i, n in enumerate(self.nodes)}
        order = [position.get(n, -1) for n in nodes]
        gpu_rows = [r for i in order if i >= 0 for r in np.flatnonzero(self.gpu_node == i)]
        new_index = {old: new for new, old in enumerate(order)}
        ib = np.full((len(nodes), self.steps), np.nan)
        write = np.full((len(nodes), self.steps), np.nan)
        for new, old in enumerate(order):
            if old >= 0:
                ib[new], write[new] = self.ib[old], self.write[old]
        return Telemetry(
            self.start_ms, self.step_s, self.steps, list(nodes),
            np.array([new_index[self.gpu_node[r]] for r in gpu_rows], dtype=np.int64),
            self.gpu_index[gpu_rows], self.sm[gpu_rows], self.tensor[gpu_rows], self.util[gpu_rows], ib, write,
        )  # fmt: skip


def telemetry_from_samples(
    samples: dict[str, Samples], nodes: Sequence[str], start_ms: int, end_ms: int, step_s: int
) -> Telemetry:
    """Put samples of the nodes within [start, end) on the grid (the last sample of a step wins)."""
    import numpy as np

    steps = max(1, int((end_ms - start_ms) // (step_s * 1000)))
    node_set = {n: i for i, n in enumerate(nodes)}
    gpu_keys: dict[tuple[int, int], int] = {}
    for metric in GPU_METRICS:
        part = samples.get(metric)
        if part is None or not part.n_series:
            continue
        for node, gpu in zip(part.series["node"], part.series["gpu"], strict=True):
            if node in node_set and gpu is not None and gpu == gpu:
                gpu_keys.setdefault((node_set[node], int(gpu)), len(gpu_keys))
    keys = sorted(gpu_keys)
    row_of = {k: r for r, k in enumerate(keys)}

    def grid(metric: str, rows: int, row_of_series) -> np.ndarray:
        values = np.full((rows, steps), np.nan)
        part = samples.get(metric)
        if part is None or not len(part):
            return values
        series_row = np.array(
            [row_of_series(part.series.iloc[i]) for i in range(part.n_series)], dtype=np.int64
        )
        row = series_row[part.series_id]
        step = (part.ts_ms - start_ms) // (step_s * 1000)
        keep = (row >= 0) & (step >= 0) & (step < steps) & (part.ts_ms < end_ms)
        order = np.argsort(part.ts_ms[keep], kind="stable")  # later samples overwrite earlier ones
        values[row[keep][order], step[keep][order]] = part.value[keep][order]
        return values

    def gpu_row(series) -> int:
        node, gpu = series["node"], series["gpu"]
        if node not in node_set or gpu is None or gpu != gpu:
            return -1
        return row_of.get((node_set[node], int(gpu)), -1)

    def node_row(series) -> int:
        return node_set.get(series["node"], -1)

    tx, rx = grid("ib_tx", len(nodes), node_row), grid("ib_rx", len(nodes), node_row)
    ib = np.where(np.isnan(tx) & np.isnan(rx), np.nan, np.nan_to_num(tx) + np.nan_to_num(rx))
    return Telemetry(
        start_ms, step_s, steps, list(nodes),
        np.array([k[0] for k in keys], dtype=np.int64), np.array([k[1] for k in keys], dtype=np.int64),
        grid("sm_active", len(keys), gpu_row), grid("tensor_active", len(keys), gpu_row),
        grid("gpu_util", len(keys), gpu_row), ib, grid("storage_write", len(nodes), node_row),
    )  # fmt: skip


def read_lake_samples(lake: Lake, cluster: str, start_ms: int, end_ms: int) -> dict[str, Samples]:
    """The detectors' metrics of [start, end) from the metrics lake (every UTC day the window touches)."""
    from acme.metrics.storage import concat_samples, read_samples

    days = utc_days(start_ms, end_ms)
    found: dict[str, Samples] = {}
    for metric in METRICS:
        parts = [read_samples(lake, metric, cluster, day) for day in days]
        parts = [p for p in parts if len(p)]
        if parts:
            merged = concat_samples(parts)
            found[metric] = merged.take((merged.ts_ms >= start_ms) & (merged.ts_ms < end_ms))
    return found


def prometheus_specs(storage_write_promql: str = "") -> dict[str, MetricSpec]:
    """The spec of each metric the detectors read from Prometheus. ``storage_write`` has no PromQL in the
    catalog (the nightly ingest does not fetch it: which exporter serves it depends on the file system), so
    its query is ``storage_write_promql`` (``ACME_DETECT_STORAGE_WRITE_PROMQL``); empty: not read."""
    import dataclasses

    from acme.metrics.catalog import load_catalog

    catalog = load_catalog()
    specs = {metric: catalog[metric] for metric in METRICS if catalog[metric].promql}
    if storage_write_promql:
        specs["storage_write"] = dataclasses.replace(
            catalog["storage_write"], promql=storage_write_promql, shard_label="instance"
        )
    return specs


def read_prometheus_samples(
    base_url: str,
    start_ms: int,
    end_ms: int,
    step_s: int,
    client_options: dict[str, Any] | None = None,
    storage_write_promql: str = "",
) -> dict[str, Samples]:
    """The detectors' metrics of [start, end) from Prometheus, through the catalog's PromQL."""
    from acme.metrics.prometheus import PrometheusClient, matrix_to_samples

    client = PrometheusClient(base_url, **(client_options or {}))
    end_s = (end_ms - 1) / 1000
    return {
        metric: matrix_to_samples(client.fetch(spec, start_ms / 1000, end_s, step_s), spec)
        for metric, spec in prometheus_specs(storage_write_promql).items()
    }


def utc_days(start_ms: int, end_ms: int) -> list[date]:
    first = datetime.fromtimestamp(start_ms / 1000, UTC).date()
    last = datetime.fromtimestamp((end_ms - 1) / 1000, UTC).date()
    return [first + timedelta(days=i) for i in range((last - first).days + 1)]


def telemetry_from_synth(synth: Any, write: np.ndarray | None = None) -> Telemetry:
    """The grid of a synthesized cluster (``acme.metrics.synth.SynthCluster``), for the benchmark and tests:
    the same values its writers would publish, without the round trip through files. ``write``: the nodes'
    storage writes (:func:`acme.detection.scenario.storage_writes`); None: not known (NaN)."""
    import numpy as np

    gpus = synth.gpus
    if write is None:
        write = np.full((len(synth.nodes), synth.steps), np.nan)
    return Telemetry(
        synth.start_ms, synth.step_s, synth.steps, list(synth.nodes),
        np.arange(gpus, dtype=np.int64) // 8, np.arange(gpus, dtype=np.int64) % 8,
        synth.values("sm_active"), synth.values("tensor_active"), synth.values("gpu_util"),
        synth.values("ib_tx") + synth.values("ib_rx"), write,
    )  # fmt: skip
