"""Monitoring samples in the lake: the canonical long form, its compact Parquet encoding, rollups.

The canonical long form of a sample is ``(cluster, metric, node, gpu, uuid, timestamp, value,
unit)`` (``gpu`` and ``uuid`` null for node-level metrics). In memory a metric's samples are a
:class:`Samples`: a small table of series (node, gpu, uuid, model, gpu_instance) and three long arrays
(series id, epoch milliseconds, value), so that tens of millions of samples never become
Python objects or string columns (``tests/metrics_support.to_frame`` gives the long form as a DataFrame).

Layout (one file per metric, cluster and UTC day; cluster and metric are Hive partitions)::

    metrics/metric=<m>/cluster=<c>/date=<d>/samples.parquet     the samples
    metrics_snapshots/metric=<m>/cluster=<c>/date=<d>/<input>.parquet  one-off scrapes (snapshot mode)
    metrics_5m/metric=<m>/cluster=<c>/date=<d>/rollup.parquet   per series and 5 minutes: min/mean/max/count
    metrics_hist/metric=<m>/cluster=<c>/date=<d>/hist.parquet   fixed-bin histogram of the day (all devices)

Encoding of ``samples.parquet`` (what keeps a sample at about one byte; see the benchmark):

- rows sorted by (node, gpu, uuid, gpu_instance, timestamp), so series keys are long runs: ``node``,
  ``uuid``, ``gpu_instance``, ``model`` and ``unit`` are dictionary-encoded strings and ``gpu`` a
  dictionary-encoded int16, each run costing a few bytes per page. ``gpu_instance`` names a MIG or
  vGPU instance of the GPU (``GPU_I_PROFILE=1g.6gb/GPU_I_ID=3``; null for a whole GPU): several
  instances share their GPU's index and UUID, so it is part of a series' identity;
- ``timestamp`` (ms, UTC) with DELTA_BINARY_PACKED: a regular 15 s series has constant deltas,
  which pack into almost nothing;
- ``value`` rounded to the metric's precision and stored as the smallest exact type: an integer
  type for integral metrics (utilization %, °C, MiB) or a DECIMAL(p, s) stored as INT32/INT64
  (``store_decimal_as_integer``) when the precision is 0.1, 0.01, ...; DELTA_BINARY_PACKED, which
  suits slowly varying telemetry; then zstd. Readers (DuckDB, pyarrow) see exact values.

Rollups are written with the samples, from the same arrays, so later steps (CDFs, per-GPU
timelines) never need a month of raw samples: a month's CDF is the sum of 30 histograms of
``bins`` counts each (summed in SQL by the report; :func:`quantiles` and :func:`cdf` read the sum).

Idempotency: a partition is replaced, never appended to. When the incoming samples of a day
cover only part of it (e.g. a wide CSV in local time spans two UTC days), the existing samples
outside the incoming time span are kept and the rest replaced, under the partition's lock; a
re-run of the same input therefore always gives the same partition.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import TYPE_CHECKING, Any

from acme import lake_keys
from acme.metrics.catalog import MetricSpec

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
    import pyarrow as pa

    from acme.lake import Lake

DAY_MS = 86_400_000
SERIES_COLUMNS = ("node", "gpu", "uuid", "model", "gpu_instance")  # all but model: a series' identity
ROLLUP_WIDTH_S = 300


@dataclass
class Samples:
    """One metric's samples: ``series`` (node, gpu, uuid, model, gpu_instance; row i is series i) and arrays.

    ``series_id`` (int32), ``ts_ms`` (int64, epoch ms UTC) and ``value`` (float64) have one entry
    per sample. ``is_sorted`` says the arrays are sorted by (series, time) and the series table
    by (node, gpu, uuid, gpu_instance), which :func:`canonicalize` ensures.
    """

    metric: str
    series: pd.DataFrame
    series_id: np.ndarray
    ts_ms: np.ndarray
    value: np.ndarray
    is_sorted: bool = False
    notes: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.value)

    @property
    def n_series(self) -> int:
        return len(self.series)

    def take(self, index) -> Samples:
        """The samples at ``index`` (a boolean mask or positions), same series table."""
        return Samples(
            self.metric, self.series, self.series_id[index], self.ts_ms[index], self.value[index],
            self.is_sorted, list(self.notes),
        )  # fmt: skip


def series_frame(rows: list[tuple] | None = None, **columns) -> pd.DataFrame:
    """A series table from (node, gpu, uuid, model[, gpu_instance]) tuples or from columns; gpu
    -1/None = node-level, gpu_instance None = the whole GPU."""
    import numpy as np
    import pandas as pd

    if rows is not None:
        rows = [row if len(row) == len(SERIES_COLUMNS) else (*row, None) for row in rows]
        frame = pd.DataFrame.from_records(rows, columns=list(SERIES_COLUMNS))
    else:
        frame = pd.DataFrame({name: columns.get(name) for name in SERIES_COLUMNS})
    gpu = pd.to_numeric(frame["gpu"], errors="coerce").astype("float64").to_numpy()
    frame["gpu"] = pd.array(np.where(np.isnan(gpu) | (gpu < 0), np.nan, gpu), dtype="float64").astype("Int16")
    frame["node"] = frame["node"].astype("str")
    for name in ("uuid", "model", "gpu_instance"):
        frame[name] = frame[name].astype("object").where(frame[name].notna(), None)
    return frame.reset_index(drop=True)


def empty_samples(metric: str) -> Samples:
    import numpy as np

    return Samples(
        metric, series_frame([]), np.zeros(0, np.int32), np.zeros(0, np.int64), np.zeros(0), is_sorted=True
    )


def canonicalize(samples: Samples) -> Samples:
    """Series ordered by (node, gpu, uuid, gpu_instance), samples by (series, time); stable for equal keys."""
    import numpy as np

    if samples.is_sorted:
        return samples
    series = samples.series
    order = np.lexsort(
        (
            series["gpu_instance"].fillna("").to_numpy(dtype=str),
            series["uuid"].fillna("").to_numpy(dtype=str),
            series["gpu"].fillna(-1).to_numpy(dtype=np.int64),
            series["node"].to_numpy(dtype=str),
        )
    )
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    new_series = series.iloc[order].reset_index(drop=True)
    series_id = rank[samples.series_id] if len(samples.series_id) else samples.series_id.astype(np.int64)
    if len(samples.value):
        t0 = int(samples.ts_ms.min())
        span = int(samples.ts_ms.max()) - t0 + 1
        if span * max(len(order), 1) < 2**62:
            key = series_id * span + (samples.ts_ms - t0)
            perm = np.argsort(key, kind="stable")
        else:
            perm = np.lexsort((samples.ts_ms, series_id))
        series_id = series_id[perm].astype(np.int32)
        ts, value = samples.ts_ms[perm], samples.value[perm]
    else:
        ts, value, series_id = samples.ts_ms, samples.value, series_id.astype(np.int32)
    return Samples(samples.metric, new_series, series_id, ts, value, True, list(samples.notes))


def concat_samples(parts: list[Samples]) -> Samples:
    """One Samples from several of the same metric (series tables united by (node, gpu, uuid, gpu_instance))."""
    import numpy as np
    import pandas as pd

    parts = [p for p in parts if p is not None]
    if len(parts) == 1:
        return parts[0]
    metric = parts[0].metric
    series_all = pd.concat([p.series for p in parts], ignore_index=True)
    key = (
        series_all["node"].astype(str)
        + "\x1f"
        + series_all["gpu"].fillna(-1).astype(int).astype(str)
        + "\x1f"
        + series_all["uuid"].fillna("").astype(str)
        + "\x1f"
        + series_all["gpu_instance"].fillna("").astype(str)
    )
    codes, uniques = pd.factorize(key)
    first = pd.Series(np.arange(len(codes))).groupby(codes).first().to_numpy()
    series = series_all.iloc[first].reset_index(drop=True)
    ids, ts, values, offset = [], [], [], 0
    for part in parts:
        ids.append(codes[offset : offset + part.n_series][part.series_id])
        offset += part.n_series
        ts.append(part.ts_ms)
        values.append(part.value)
    return Samples(
        metric,
        series,
        np.concatenate(ids).astype(np.int32) if ids else np.zeros(0, np.int32),
        np.concatenate(ts),
        np.concatenate(values),
        is_sorted=False,
        notes=[n for p in parts for n in p.notes],
    )


def split_by_day(samples: Samples) -> dict[date, Samples]:
    """The samples per UTC day of their timestamp."""
    import numpy as np

    if not len(samples):
        return {}
    days = samples.ts_ms // DAY_MS
    first, last = int(days.min()), int(days.max())
    epoch = date(1970, 1, 1)
    if first == last:
        return {epoch + timedelta(days=first): samples}
    return {epoch + timedelta(days=d): samples.take(days == d) for d in np.unique(days).tolist()}


def day_start_ms(day: date) -> int:
    return (day - date(1970, 1, 1)).days * DAY_MS


# --- Parquet encoding ---------------------------------------------------------------------


def samples_table(samples: Samples, spec: MetricSpec) -> pa.Table:
    """Arrow table of sorted samples in the stored encoding (series keys as dictionaries)."""
    import numpy as np
    import pyarrow as pa

    samples = canonicalize(samples)
    sid = pa.array(samples.series_id, pa.int32())
    return pa.table(
        {
            **_series_columns(samples.series, sid, ("node", "gpu", "uuid", "gpu_instance", "model")),
            "timestamp": pa.array(samples.ts_ms, pa.timestamp("ms", tz="UTC")),
            "value": stored_values(samples.value, spec),
            "unit": pa.DictionaryArray.from_arrays(
                pa.array(np.zeros(len(samples), np.int32)), pa.array([spec.unit])
            ),
        }
    )


def _series_columns(series: pd.DataFrame, series_id: pa.Array, names: tuple[str, ...]) -> dict[str, pa.Array]:
    """Per-row columns of the series keys ``names`` for rows of the series ``series_id``."""
    return {
        name: _gpu_array(series).take(series_id)
        if name == "gpu"
        else _dictionary_array(series[name], series_id)
        for name in names
    }


def _dictionary_array(labels: pd.Series, series_id: pa.Array) -> pa.Array:
    """Per-sample dictionary column of a series attribute (one dictionary entry per distinct label)."""
    import numpy as np
    import pandas as pd
    import pyarrow as pa

    codes, uniques = pd.factorize(labels, use_na_sentinel=True)
    indices = pa.array(codes.astype(np.int32), pa.int32(), mask=codes < 0).take(series_id)
    return pa.DictionaryArray.from_arrays(indices, pa.array(list(uniques), pa.string()))


def _gpu_array(series: pd.DataFrame) -> pa.Array:
    """The series' GPU indexes as int16 (null for node-level series)."""
    import numpy as np
    import pyarrow as pa

    gpu = series["gpu"]
    return pa.array(gpu.fillna(-1).to_numpy(dtype=np.int16), pa.int16(), mask=gpu.isna().to_numpy())


def stored_values(values: np.ndarray, spec: MetricSpec) -> pa.Array:
    """Values rounded to the metric's precision in its storage type (exact, integer-backed)."""
    import numpy as np
    import pyarrow as pa

    if spec.storage == "decimal":
        scale = spec.decimal_scale
        quantized = np.rint(values * 10**scale)
        top = max(abs(spec.low), abs(spec.high or 0)) * 10**scale
        digits = max(1, math.ceil(math.log10(top + 1)))
        if digits <= 9:
            raw, arrow_type = quantized.astype(np.int32), pa.decimal32(9, scale)
        else:
            raw, arrow_type = quantized.astype(np.int64), pa.decimal64(18, scale)
        return pa.Array.from_buffers(arrow_type, len(raw), [None, pa.py_buffer(raw)])
    return pa.array(np.rint(values).astype(spec.storage))


def values_from_arrow(column) -> np.ndarray:
    """float64 values of a stored ``value`` column (decimal or integer)."""
    import numpy as np
    import pyarrow as pa

    chunks = column.chunks if hasattr(column, "chunks") else [column]
    out = []
    for chunk in chunks:
        if pa.types.is_decimal(chunk.type) and chunk.type.bit_width in (32, 64):
            width = chunk.type.bit_width // 8
            raw = np.frombuffer(chunk.buffers()[1], dtype=np.int32 if width == 4 else np.int64)
            raw = raw[chunk.offset : chunk.offset + len(chunk)]
            out.append(raw / 10**chunk.type.scale)
        else:
            out.append(chunk.to_numpy(zero_copy_only=False).astype(np.float64))
    return np.concatenate(out) if out else np.zeros(0)


def encode_parquet(table: pa.Table, spec: MetricSpec, metadata: dict[str, str] | None = None) -> bytes:
    import pyarrow.parquet as pq

    meta = {
        "acme.metric": spec.name,
        "acme.unit": spec.unit,
        "acme.precision": repr(spec.precision),
        "acme.kind": spec.kind,
        **(metadata or {}),
    }
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), **meta})
    buffer = io.BytesIO()
    pq.write_table(
        table,
        buffer,
        compression="zstd",
        compression_level=3,
        use_dictionary=["node", "gpu", "uuid", "gpu_instance", "model", "unit"],
        column_encoding={"timestamp": "DELTA_BINARY_PACKED", "value": "DELTA_BINARY_PACKED"},
        store_decimal_as_integer=True,
        row_group_size=4 * 1024 * 1024,
        write_statistics=["timestamp", "value"],
        sorting_columns=[pq.SortingColumn(i) for i in (0, 1, 2, 3, 5)],
    )
    return buffer.getvalue()


def samples_from_table(metric: str, table: pa.Table) -> Samples:
    """Samples from a stored (sorted) table."""
    import numpy as np
    import pandas as pd
    import pyarrow as pa
    import pyarrow.compute as pc

    n = table.num_rows
    if n == 0:
        return empty_samples(metric)
    # partitions written before the gpu_instance column lack it: every series there is a whole GPU
    present = [name for name in SERIES_COLUMNS if name in table.column_names]
    keys = pa.table(
        {name: table[name].cast(pa.string()) if name != "gpu" else table[name] for name in present}
    )
    gpu = keys["gpu"].fill_null(-1).to_numpy()
    node = keys["node"].to_numpy(zero_copy_only=False)
    uuid = keys["uuid"].fill_null("").to_numpy(zero_copy_only=False)
    change = np.ones(n, dtype=bool)
    change[1:] = (node[1:] != node[:-1]) | (gpu[1:] != gpu[:-1]) | (uuid[1:] != uuid[:-1])
    instance_column = keys["gpu_instance"] if "gpu_instance" in present else None
    if instance_column is not None and instance_column.null_count < n:
        instance = instance_column.fill_null("").to_numpy(zero_copy_only=False)
        change[1:] |= instance[1:] != instance[:-1]
    starts = np.flatnonzero(change)
    series = series_frame(
        node=node[starts],
        gpu=gpu[starts],
        uuid=pd.Series(keys["uuid"].take(pa.array(starts)).to_pylist()),
        model=pd.Series(keys["model"].take(pa.array(starts)).to_pylist()),
        gpu_instance=None
        if instance_column is None
        else pd.Series(instance_column.take(pa.array(starts)).to_pylist()),
    )
    series_id = (np.cumsum(change) - 1).astype(np.int32)
    ts = pc.cast(table["timestamp"], pa.int64()).to_numpy()
    return Samples(metric, series, series_id, ts, values_from_arrow(table["value"]), is_sorted=True)


# --- rollups ----------------------------------------------------------------------------------


def rollup_5m(samples: Samples, day: date, width_s: int = ROLLUP_WIDTH_S) -> pa.Table:
    """Per series and ``width_s`` bucket of the day: min, mean, max and count of the samples."""
    import numpy as np
    import pyarrow as pa

    samples = canonicalize(samples)
    start = day_start_ms(day)
    buckets_per_day = DAY_MS // (width_s * 1000)
    bucket = (samples.ts_ms - start) // (width_s * 1000)
    key = samples.series_id.astype(np.int64) * (buckets_per_day + 2) + bucket
    boundary = np.ones(len(key), dtype=bool)
    boundary[1:] = key[1:] != key[:-1]
    starts = np.flatnonzero(boundary)
    counts = np.diff(np.append(starts, len(key))).astype(np.int32)
    values = samples.value
    if len(starts):
        vmin, vmax = np.minimum.reduceat(values, starts), np.maximum.reduceat(values, starts)
        vmean = np.add.reduceat(values, starts) / counts
    else:
        vmin = vmax = vmean = np.zeros(0)
    sid = pa.array(samples.series_id[starts], pa.int32())
    return pa.table(
        {
            **_series_columns(samples.series, sid, ("node", "gpu", "uuid", "gpu_instance")),
            "bucket_start": pa.array(start + bucket[starts] * width_s * 1000, pa.int64()).cast(
                pa.timestamp("ms", tz="UTC")
            ),
            "min": pa.array(vmin, pa.float64()),
            "mean": pa.array(vmean, pa.float64()),
            "max": pa.array(vmax, pa.float64()),
            "count": pa.array(counts, pa.int32()),
        }
    )


@dataclass
class Histogram:
    """Fixed-bin counts of a metric's values over [low, high), plus under- and overflow.

    Mergeable across days and clusters by adding counts (same bins); quantiles and CDFs are read
    with linear interpolation inside a bin, so they are exact to one bin width.
    """

    metric: str
    low: float
    high: float
    counts: np.ndarray  # int64, one per bin
    underflow: int = 0
    overflow: int = 0

    @property
    def bins(self) -> int:
        return len(self.counts)

    @property
    def width(self) -> float:
        return (self.high - self.low) / self.bins

    @property
    def total(self) -> int:
        return int(self.counts.sum()) + self.underflow + self.overflow

    def edges(self) -> np.ndarray:
        import numpy as np

        return np.linspace(self.low, self.high, self.bins + 1)


def histogram(values: np.ndarray, spec: MetricSpec) -> Histogram:
    """The histogram of ``values`` over the metric's configured bins (the top edge is inclusive)."""
    import numpy as np

    low, high, bins = spec.hist
    position = (values - low) * (bins / (high - low))
    underflow = int(np.count_nonzero(position < 0))
    overflow = int(np.count_nonzero(position > bins))
    index = np.minimum(position.astype(np.int64), bins - 1)
    inside = index[(position >= 0) & (position <= bins)] if underflow or overflow else index
    counts = np.bincount(inside, minlength=bins).astype(np.int64)
    return Histogram(spec.name, low, high, counts, underflow, overflow)


def quantiles(hist: Histogram, q) -> np.ndarray:
    """Values at quantiles ``q`` (0..1), interpolated inside bins; clamped to [low, high]."""
    import numpy as np

    q = np.atleast_1d(np.asarray(q, dtype=np.float64))
    total = hist.total
    if total == 0:
        return np.full(len(q), np.nan)
    cumulative = np.concatenate([[hist.underflow], hist.underflow + np.cumsum(hist.counts)])
    target = q * total
    edges = hist.edges()
    index = np.clip(np.searchsorted(cumulative, target, side="left"), 1, hist.bins)
    below = cumulative[index - 1]
    in_bin = hist.counts[index - 1]
    fraction = np.where(in_bin > 0, (target - below) / np.maximum(in_bin, 1), 0.0)
    return np.clip(edges[index - 1] + np.clip(fraction, 0, 1) * hist.width, hist.low, hist.high)


def cdf(hist: Histogram, x) -> np.ndarray:
    """Share of values <= x (interpolated inside the bin holding x)."""
    import numpy as np

    x = np.atleast_1d(np.asarray(x, dtype=np.float64))
    if hist.total == 0:
        return np.full(len(x), np.nan)
    cumulative = np.concatenate([[0], np.cumsum(hist.counts)])
    position = np.clip((x - hist.low) / hist.width, 0, hist.bins)
    index = np.minimum(position.astype(np.int64), hist.bins - 1)
    inside = cumulative[index] + (position - index) * hist.counts[index]
    inside = np.where(position >= hist.bins, cumulative[-1], inside)
    return (hist.underflow + inside + np.where(x >= hist.high, hist.overflow, 0)) / hist.total


def histogram_table(hist: Histogram) -> pa.Table:
    import numpy as np
    import pyarrow as pa

    edges = hist.edges()
    low = np.concatenate([[-np.inf], edges[:-1], [hist.high]])
    high = np.concatenate([[hist.low], edges[1:], [np.inf]])
    counts = np.concatenate([[hist.underflow], hist.counts, [hist.overflow]])
    table = pa.table({"bin_low": low, "bin_high": high, "count": pa.array(counts, pa.int64())})
    return table.replace_schema_metadata({"acme.metric": hist.metric})


# --- the lake -----------------------------------------------------------------------------------


def read_samples(lake: Lake, metric: str, cluster: str, day: date) -> Samples:
    """A metric-day's samples: ``samples.parquet``, or the files of its node groups
    (``acme.metrics.node_groups``) together."""
    key = lake_keys.metric_samples(metric, cluster, day)
    if lake.exists(key):
        return samples_from_table(metric, lake.read_parquet(key))
    keys = [k for k in lake.list(lake_keys.metric_partition(metric, cluster, day)) if k.endswith(".parquet")]
    if not keys:
        return empty_samples(metric)
    return canonicalize(concat_samples([samples_from_table(metric, lake.read_parquet(k)) for k in keys]))


def publish_day(
    lake: Lake, spec: MetricSpec, cluster: str, day: date, samples: Samples, source: str = ""
) -> dict[str, Any]:
    """Replace the day's partition of ``spec`` with ``samples`` (see the module doc), with rollups.

    Returns the partition's manifest: URL, samples, series, bytes and bytes per sample.
    """
    import numpy as np

    samples = canonicalize(samples)
    start = day_start_ms(day)
    with lake.lock(f"metrics-{spec.name}-{cluster}-{day.isoformat()}"):
        key = lake_keys.metric_samples(spec.name, cluster, day)
        covers_day = bool(len(samples)) and _covers_day(samples, start)
        if not covers_day:
            existing = read_samples(lake, spec.name, cluster, day)
            if len(samples):
                lo, hi = int(samples.ts_ms.min()), int(samples.ts_ms.max())
                keep = (existing.ts_ms < lo) | (existing.ts_ms > hi)
            else:
                keep = np.ones(len(existing), dtype=bool)
            if keep.any():
                samples = canonicalize(concat_samples([existing.take(keep), samples]))
        data = encode_parquet(
            samples_table(samples, spec), spec, {"acme.cluster": cluster, "acme.source": source}
        )
        url = lake.write_bytes(key, data)
        for other in lake.list(lake_keys.metric_partition(spec.name, cluster, day)):
            if other != key and other.endswith(".parquet"):  # the files of a run split by node group
                lake.remove(other)
        lake.write_parquet(lake_keys.metric_rollup(spec.name, cluster, day), rollup_5m(samples, day))
        lake.write_parquet(
            lake_keys.metric_histogram(spec.name, cluster, day),
            histogram_table(histogram(samples.value, spec)),
        )
    return stored_outcome(spec, day, url, samples, data)


def stored_outcome(spec: MetricSpec, day: date, url: str, samples: Samples, data: bytes) -> dict[str, Any]:
    """What publishing one metric-day's samples file reports: where it went, how many samples and series, its size."""
    import numpy as np

    return {
        "metric": spec.name,
        "date": day.isoformat(),
        "path": url,
        "samples": len(samples),
        "series": int(len(np.unique(samples.series_id))) if len(samples) else 0,
        "bytes": len(data),
        "bytes_per_sample": round(len(data) / len(samples), 3) if len(samples) else None,
    }


def publish_snapshot(
    lake: Lake, spec: MetricSpec, cluster: str, day: date, samples: Samples, input_key: str, source: str = ""
) -> dict[str, Any]:
    """Store one-off scrapes of ``spec`` taken on ``day`` as the snapshot of this input (replaced by a
    re-run of the same input; other inputs' snapshots of the day are kept). No rollups: a snapshot is
    a few points in time, not a day's series."""
    samples = canonicalize(samples)
    data = encode_parquet(
        samples_table(samples, spec),
        spec,
        {"acme.cluster": cluster, "acme.source": source, "acme.mode": "snapshot"},
    )
    url = lake.write_bytes(lake_keys.metric_snapshot(spec.name, cluster, day, input_key), data)
    return {
        "metric": spec.name,
        "date": day.isoformat(),
        "path": url,
        "samples": len(samples),
        "series": samples.n_series,
        "bytes": len(data),
        "bytes_per_sample": round(len(data) / len(samples), 3) if len(samples) else None,
    }


def _covers_day(samples: Samples, start_ms: int) -> bool:
    """Whether the samples span the whole UTC day (first sample in its first minute, last in its last)."""
    return bool(samples.ts_ms.min() < start_ms + 60_000 and samples.ts_ms.max() >= start_ms + DAY_MS - 60_000)
