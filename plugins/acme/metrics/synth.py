"""Deterministic synthetic GPU-cluster telemetry, calibrated to the AcmeTrace monitoring data.

``write_synth_metrics(cluster, nodes, start, days, fmt, out_path, seed, step_s, trace_path)``
writes ``nodes`` servers of 8 GPUs each, sampled every ``step_s`` seconds over the UTC days
``[start, start + days)``, in one of three formats:

- ``prometheus-openmetrics``: OpenMetrics text with a timestamp (seconds) on every sample and a
  final ``# EOF``, for ``promtool tsdb create-blocks-from openmetrics``. GPU metrics under their
  dcgm-exporter names and labels (``gpu``, ``UUID``, ``device``, ``modelName``, ``Hostname``;
  DCGM_FI_PROF_* as ratios 0..1, like the exporter); node metrics as the raw exporter series the
  catalog's PromQL reads (``node_cpu_seconds_total`` of one CPU, ``node_memory_Mem*_bytes``,
  ``node_infiniband_port_data_*_bytes_total``, ``ipmi_dcmi_power_consumption_watts``).
- ``exporter-text``: one dcgm-exporter scrape file (Prometheus text format) holding every scrape
  of the window, each page preceded by ``# scrape_time <RFC 3339>`` (see ``acme.metrics.exposition``).
  Only the GPU metrics: that is what dcgm-exporter serves.
- ``acmetrace-csv``: a folder with one wide CSV per metric (``<metric>.csv``): a ``Time`` column in
  ``+08:00`` and one column per GPU (``<node>-<gpu>``) or per node (``<node>``).

The model. Every GPU has a latent intensity ``u`` in [0, 1]; each metric's value is its reference
quantile curve at ``u`` (``Q_m(u)``), so if ``u`` is uniform every metric's distribution is the
reference distribution, and the metrics move together (busy GPUs are hot, draw power, hold memory).
Idle periods take ``u`` in [0, f) and busy ones [f, 1], with ``f`` the share of GPU samples at 0 %
utilization in the reference (Seren 30 %, Kalos 32 %): utilization is then polarized at 0 and
~100 %, median SM activity ~40-50 %, idle GPUs draw ~60 W, as in the paper. Without a trace, whole
nodes alternate busy/idle periods (exponential, busy mean 1 h) with the stationary busy share
1 - f; each period has a level drawn uniformly in its interval, and the level wanders (smooth
node- and GPU-level noise plus a little per-sample jitter, reflected at the interval's edges, which
keeps ``u`` uniform). Node metrics (CPU, memory, InfiniBand, server power) follow the node's
latent intensity the same way.

With a job trace (``trace_path``, AcmeTrace layout), GPUs are busy exactly while a job runs on
them: jobs overlapping the window are placed in start order, first-fit on the lowest-numbered
node with enough free GPUs (multi-node jobs on whole free nodes), one level per job; jobs that do
not fit are counted as ``jobs_unplaced``. The busy share then follows the trace, so distributions
are only approximately the reference ones, and node intensity is the mean of its GPUs'.

Calibration (checked in tests/unit/metrics/test_synth.py): the reference quantile curves are read
from ``ACME_REFERENCE_DIR`` (default ``../shared/reference`` next to the project) when present,
else from the 21-point tables in ``_FALLBACK`` (a coarser copy of the same curves). Values are
rounded to the metric's precision and clipped into its valid range (Kalos CPU utilization
exceeds 100 % in 0.7 % of the reference samples; those are clipped). InfiniBand curves are in
MB/s in the reference ("raw", 23.7 GB/s ≈ a 200 Gb/s HDR port at most); here they are B/s.
XID errors are 0 except a rare event per GPU (p = 0.002 per GPU and day) whose code persists, as
dcgm-exporter reports the last XID seen; energy is the integral of power.

Training jobs with episodes (for hang and fail-slow detection, ``acme.detection``):
:func:`synth_training_cluster` places multi-node training jobs on whole nodes (busy at a level in
``TRAINING_LEVEL``, where every metric, InfiniBand included, is well above idle) and applies
:class:`Episode` s: ``hang`` (a collective stuck: the NCCL kernel stays resident, so GPU utilization
reads 100 % while tensor cores do nothing, SM activity is the few SMs of NCCL's channels and RDMA
traffic stops, power near idle -- as reported in NVIDIA/nccl#968, #257, #238, #537), ``stall`` (a hang
with no kernel resident: everything at idle), ``straggler`` (one node's SM, tensor and InfiniBand
activity scaled by ``factor``) and the healthy-but-idle phases ``checkpoint`` (GPUs idle, no RDMA: the
checkpoint goes to storage over the frontend network), ``barrier`` (ranks spinning in an NCCL barrier
while a slower node still writes its shard: a hang's signature, healthy), ``data_stall`` and ``eval``
(forward passes only: moderate SM, little tensor activity and little RDMA). Without episodes (the
default of every other function here) the output is exactly what it was before.

Determinism: the output depends only on the arguments; the same arguments give identical files.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from acme.errors import ConfigError

if TYPE_CHECKING:
    import numpy as np

    from acme.metrics.catalog import Catalog, MetricSpec

FORMATS = ("prometheus-openmetrics", "exporter-text", "acmetrace-csv")
GPUS_PER_NODE = 8
IDLE_SHARE = {"seren": 0.30, "kalos": 0.32}
BUSY_MEAN_S = 3600.0
MODEL_NAME = "NVIDIA A100-SXM4-80GB"
XID_PER_GPU_DAY = 0.002
XID_CODES = (13, 31, 43, 48, 63, 74, 79)
LOCAL_TZ_HOURS = 8  # AcmeTrace times are in +08:00

# Reference curves: metric -> (file, curve name, factor to the catalog's unit).
_CURVES = {
    "gpu_util": ("util_gpu_{c}.csv", "gpu_util_pct", 1.0),
    "fb_used": ("util_gpu_{c}.csv", "gpu_mem_used_pct_of_80GiB", 819.2),  # % of 80 GiB -> MiB
    "sm_active": ("util_gpu_{c}{full}.csv", "sm_active_pct", 1.0),
    "tensor_active": ("util_gpu_{c}{full}.csv", "item5_plotted_as_tc_activity", 1.0),
    "gpu_power": ("gpu_power_{c}.csv", "gpu_power_w", 1.0),
    "gpu_temp": ("gpu_temp_{c}.csv", "gpu_temp_c", 1.0),
    "mem_temp": ("gpu_temp_{c}.csv", "gpu_mem_temp_c", 1.0),
    "node_cpu_util": ("util_cpu_mem_{c}.csv", "node_cpu_util_pct", 1.0),
    "node_mem_util": ("util_cpu_mem_{c}.csv", "node_mem_util_pct", 1.0),
    "ib_tx": ("ib_seren.csv", "ib_send_raw", 1e6),  # MB/s -> B/s; Seren's curve for both clusters
    "ib_rx": ("ib_seren.csv", "ib_receive_raw", 1e6),
    "server_power": ("server_power.csv", "seren_gpu_server_sys_total_power_w", 1.0),
}
# The same curves at every 5 % (in the reference's units), for when the reference is not at hand.
_FALLBACK = {
    "seren": {
        "gpu_util": (0, 0, 0, 0, 0, 0, 0, 82.65, 97, 98, 99, 99, 99, 99, 99, 99, 100, 100, 100, 100, 100),
        "fb_used": (0, 0, 0, 0, 0, 0.003662, 19.19, 28.14, 31.62, 33.79, 39.28, 40.64, 44.16, 50.23, 57.18, 60.85, 68.11, 73.57, 82.68, 95.88, 99.18),
        "sm_active": (0, 0, 0, 0, 0, 0, 0.0763, 10.8, 37.61, 44.37, 50.16, 54.26, 60.23, 65.68, 69.75, 73.03, 76.47, 77.74, 80.87, 85.04, 100),
        "tensor_active": (0, 0, 0, 0, 0, 0, 0.0093, 2.967, 10.53, 12.14, 13.96, 15.32, 16.91, 18.28, 19.43, 20.37, 20.73, 21.84, 23.77, 30.47, 79.57),
        "gpu_power": (15.4, 61.8, 62.99, 64, 64.9, 66.2, 69.74, 76.53, 90.66, 93.55, 96.45, 102.6, 118.3, 134.2, 212, 290.2, 336.9, 373.2, 395.1, 407.7, 558),
        "gpu_temp": (23, 27, 28, 29, 30, 31, 33, 34, 35, 36, 39, 41, 44, 48, 51, 53, 55, 58, 61, 65, 80),
        "mem_temp": (21, 39, 43, 44, 45, 46, 47, 48, 49, 50, 51, 53, 54, 56, 57, 59, 60, 62, 64, 66, 82),
        "node_cpu_util": (0.032, 0.2027, 0.2878, 0.3379, 0.4244, 0.642, 2.261, 6.646, 7.314, 7.611, 7.983, 8.221, 8.738, 9.479, 11.69, 13.74, 37.59, 37.83, 44.97, 46.57, 100),
        "node_mem_util": (0.929, 2.93, 3.674, 4.925, 5.703, 7.049, 8.424, 10.05, 11.5, 12.94, 15.01, 16.84, 17.76, 19.38, 21.94, 23.91, 26.12, 28.59, 32.97, 38.32, 99.98),
        "ib_tx": (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 85.956, 1955.5, 3557.7, 3845.3, 4678.1, 5446.1, 5620, 23695),
        "ib_rx": (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 85.957, 1955.7, 3558, 3845.4, 4677.9, 5446, 5620, 23689),
        "server_power": (0, 1512, 1512, 1537, 1595, 1692.5, 1827, 1943, 2142, 2331, 2520, 2772, 3079.2, 3432.1, 3906, 4284, 4524, 4698, 4851, 5040, 6554),
    },
    "kalos": {
        "gpu_util": (0, 0, 0, 0, 0, 0, 0, 15.3, 82, 95, 97, 98, 99, 99, 100, 100, 100, 100, 100, 100, 100),
        "fb_used": (0, 0, 0, 0, 0, 0, 15.64, 35.69, 48.67, 59.48, 75.41, 76.78, 76.93, 77.05, 77.21, 77.38, 77.69, 78.93, 88.1, 93.47, 99.18),
        "sm_active": (0, 0, 0, 0, 0, 0, 0, 0, 1.83, 10.99, 33.26, 55.47, 65.13, 69.4, 71.25, 72.84, 76.89, 78.65, 91.35, 94.06, 100),
        "tensor_active": (0, 0, 0, 0, 0, 0, 0, 0, 0.043, 2.258, 9.313, 16.35, 18.64, 19.56, 20.06, 20.55, 21.56, 22.16, 25.03, 32.77, 99.33),
        "gpu_power": (55.7, 61.89, 63, 63.9, 64.98, 66.4, 72.94, 90.36, 93.96, 96.86, 101.4, 119.8, 148.7, 236.4, 325.3, 371.8, 388.7, 396.7, 403.6, 413, 599.7),
        "gpu_temp": (15, 25, 27, 28, 29, 30, 32, 34, 36, 38, 40, 42, 44, 47, 49, 51, 54, 56, 58, 62, 79),
        "mem_temp": (19, 40, 42, 43, 44, 46, 47, 48, 49, 50, 51, 52, 53, 55, 56, 57, 58, 60, 61, 64, 80),
        "node_cpu_util": (0, 1.269, 1.344, 1.432, 1.666, 3.229, 6.057, 10.49, 17.02, 18.9, 20.12, 20.98, 22.4, 25.11, 26.82, 27.65, 28.24, 28.91, 39.46, 55.1, 238.9),
        "node_mem_util": (3.08, 4.055, 4.079, 4.122, 4.364, 4.984, 5.679, 6.023, 6.809, 7.01, 7.184, 7.37, 7.605, 7.918, 8.41, 9.279, 10.35, 13.2, 18.63, 27.69, 99.61),
    },
}  # fmt: skip
DEFAULT_METRICS = (
    "gpu_util", "sm_active", "tensor_active", "fb_used", "gpu_power", "gpu_temp", "mem_temp",
    "xid_errors", "gpu_energy", "node_cpu_util", "node_mem_util", "ib_tx", "ib_rx", "server_power",
)  # fmt: skip


def profile_of(cluster: str) -> str:
    return "kalos" if "kalos" in cluster.lower() else "seren"


def reference_dir() -> Path | None:
    """The AcmeTrace quantile curves (``ACME_REFERENCE_DIR`` or ../shared/reference), if present."""
    from acme import settings

    folder = settings.project().reference_dir / "acmetrace" / "utilization_quantiles"
    return folder if folder.is_dir() else None


@lru_cache(maxsize=64)
def reference_curve(cluster: str, metric: str) -> tuple[Any, Any] | None:
    """(cdf 0..1, value in the catalog's unit) of a metric's reference curve, or None."""
    import numpy as np

    if metric not in _CURVES:
        return None
    profile = profile_of(cluster)
    file, name, factor = _CURVES[metric]
    folder = reference_dir()
    if folder is not None:
        path = folder / file.format(c=profile, full="_full" if profile == "kalos" else "")
        if path.exists():
            import csv

            with open(path, newline="") as handle:
                rows = [r for r in csv.DictReader(handle) if r["metric"] == name]
            if rows:
                p = np.array([float(r["cdf_pct"]) for r in rows]) / 100
                v = np.array([float(r["value"]) for r in rows]) * factor
                order = np.argsort(p, kind="stable")
                return np.maximum.accumulate(p[order]), np.maximum.accumulate(v[order])
    table = _FALLBACK[profile].get(metric) or _FALLBACK["seren"].get(metric)
    if table is None:
        return None
    return np.linspace(0, 1, len(table)), np.array(table, dtype=np.float64) * factor


# --- the latent model ---------------------------------------------------------------------


@dataclass
class SynthCluster:
    """The synthetic cluster of one run: names, time grid and the latent intensities."""

    cluster: str
    nodes: list[str]
    start_ms: int
    step_s: int
    steps: int
    u_gpu: np.ndarray  # (nodes * 8, steps) float32 latent intensity in [0, 1]
    u_node: np.ndarray  # (nodes, steps) float32
    seed: int
    catalog: Catalog
    info: dict[str, Any] = field(default_factory=dict)
    episodes: list[Episode] = field(default_factory=list)

    @property
    def gpus(self) -> int:
        return len(self.nodes) * GPUS_PER_NODE

    def ts_ms(self) -> np.ndarray:
        import numpy as np

        return self.start_ms + np.arange(self.steps, dtype=np.int64) * self.step_s * 1000

    def uuid(self, gpu_index: int) -> str:
        node, gpu = divmod(gpu_index, GPUS_PER_NODE)
        digest = hashlib.sha1(f"{self.cluster}/{self.nodes[node]}/{gpu}".encode()).hexdigest()
        return f"GPU-{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"

    def values(self, metric: str) -> np.ndarray:
        """(series, steps) float64 values of a metric, rounded and clipped to its spec."""
        import numpy as np

        spec = self.catalog[metric]
        rng = np.random.default_rng([self.seed, _stable_hash(metric)])
        latent = self.u_gpu if spec.per_gpu else self.u_node
        if metric == "xid_errors":
            return self._xid(rng)
        if metric == "gpu_energy":
            power = self.values("gpu_power")
            start = rng.uniform(1e9, 1e12, size=(power.shape[0], 1))
            return np.round(start + np.cumsum(power * self.step_s * 1000, axis=1))
        curve = reference_curve(self.cluster, metric)
        if curve is None:
            raise ConfigError(f"no reference curve to synthesize {metric!r} from")
        jitter = rng.normal(0, 0.004, size=latent.shape).astype(np.float32)
        u = np.clip(latent + jitter, 0.0, 1.0)
        values = np.interp(u, curve[0], curve[1])
        if self.episodes:
            values = apply_episodes(self, metric, values)
        high = spec.high if spec.high is not None else self.catalog.memory_of(MODEL_NAME)
        return np.clip(spec.quantize(values), spec.low, high)

    def _xid(self, rng) -> np.ndarray:
        import numpy as np

        values = np.zeros((self.gpus, self.steps))
        days = self.steps * self.step_s / 86400
        hit = rng.random(self.gpus) < XID_PER_GPU_DAY * days
        for gpu in np.flatnonzero(hit):
            values[gpu, rng.integers(0, self.steps) :] = rng.choice(XID_CODES)
        return values


def _stable_hash(text: str) -> int:
    return int.from_bytes(hashlib.sha1(text.encode()).digest()[:4], "little")


def node_names(cluster: str, nodes: int) -> list[str]:
    """Names in the style of the Acme clusters' hosts: hyphens and numbers, as a parser must expect."""
    prefix = "SH-IDC1-10-140" if profile_of(cluster) == "seren" else "SH-IDC2-10-142"
    return [f"{prefix}-{i // 128}-{i % 128}" for i in range(nodes)]


def synth_cluster(
    cluster: str,
    nodes: int,
    start: date,
    days: int,
    seed: int = 0,
    step_s: int = 15,
    trace_path: str | Path | None = None,
    catalog: Catalog | None = None,
) -> SynthCluster:
    """The latent intensities of ``nodes`` 8-GPU servers over ``days`` UTC days from ``start``."""
    import numpy as np

    from acme.metrics.catalog import load_catalog

    if nodes < 1 or days < 1 or step_s < 1:
        raise ConfigError("synthetic telemetry needs nodes >= 1, days >= 1 and step_s >= 1")
    catalog = catalog or load_catalog()
    steps = days * 86400 // step_s
    start_ms = int(datetime(start.year, start.month, start.day, tzinfo=UTC).timestamp() * 1000)
    f = IDLE_SHARE[profile_of(cluster)]
    rng = np.random.default_rng([seed, _stable_hash(cluster)])
    info: dict[str, Any] = {}
    if trace_path is None:
        busy, level = _node_periods(rng, nodes, steps, step_s, f)
        busy = np.repeat(busy, GPUS_PER_NODE, axis=0)
        level = np.repeat(level, GPUS_PER_NODE, axis=0)
    else:
        busy, level, info = _trace_periods(rng, trace_path, nodes, start_ms, steps, step_s, f)
    node_noise = np.repeat(_smooth_noise(rng, nodes, steps, 0.12), GPUS_PER_NODE, axis=0)
    gpu_noise = _smooth_noise(rng, nodes * GPUS_PER_NODE, steps, 0.05)
    width = np.where(busy, 1 - f, f).astype(np.float32)
    low = np.where(busy, f, 0).astype(np.float32)
    u_gpu = _reflect(level + (node_noise + gpu_noise) * width, low, width)
    del node_noise, gpu_noise, width, low
    u_node = u_gpu.reshape(nodes, GPUS_PER_NODE, steps).mean(axis=1, dtype=np.float32)
    if trace_path is None:  # whole-node periods: the node's own intensity, without GPU noise
        u_node = _reflect(
            level[::GPUS_PER_NODE] + _smooth_noise(rng, nodes, steps, 0.12) * np.where(
                busy[::GPUS_PER_NODE], 1 - f, f
            ),
            np.where(busy[::GPUS_PER_NODE], f, 0).astype(np.float32),
            np.where(busy[::GPUS_PER_NODE], 1 - f, f).astype(np.float32),
        )  # fmt: skip
    info["busy_share"] = round(float(busy.mean()), 4)
    return SynthCluster(
        cluster, node_names(cluster, nodes), start_ms, step_s, steps, u_gpu, u_node, seed, catalog, info
    )


def _node_periods(rng, nodes: int, steps: int, step_s: int, f: float):
    """Alternating busy/idle periods per node (stationary start), with one level per period."""
    import numpy as np

    busy = np.zeros((nodes, steps), dtype=bool)
    level = np.zeros((nodes, steps), dtype=np.float32)
    busy_mean = BUSY_MEAN_S / step_s
    idle_mean = busy_mean * f / (1 - f)
    for node in range(nodes):
        t, state = 0, bool(rng.random() >= f)
        while t < steps:
            length = max(1, int(rng.exponential(busy_mean if state else idle_mean)))
            busy[node, t : t + length] = state
            level[node, t : t + length] = rng.uniform(f, 1) if state else rng.uniform(0, f)
            t += length
            state = not state
    return busy, level


def _trace_periods(rng, trace_path, nodes: int, start_ms: int, steps: int, step_s: int, f: float):
    """Busy GPUs from a job trace: first-fit placement in start order, one level per job."""
    import numpy as np
    import pandas as pd

    jobs = pd.read_csv(
        trace_path, usecols=lambda c: c in {"job_id", "gpu_num", "node_num", "start_time", "end_time"}
    )
    for column in ("start_time", "end_time"):
        jobs[column] = pd.to_datetime(jobs[column], utc=True, format="ISO8601")
    end_ms = start_ms + steps * step_s * 1000
    epoch = pd.Timestamp(0, tz="UTC")
    start_t = (
        jobs["start_time"].fillna(epoch).dt.as_unit("ms").astype("int64").to_numpy()
    )  # NaT: dropped below
    end_t = jobs["end_time"].fillna(epoch).dt.as_unit("ms").astype("int64").to_numpy().astype(np.float64)
    end_t = np.where(jobs["end_time"].isna().to_numpy(), end_ms, end_t)  # still running
    gpus = jobs["gpu_num"].fillna(0).to_numpy(dtype=np.int64)
    keep = (gpus > 0) & (start_t < end_ms) & (end_t > start_ms) & jobs["start_time"].notna().to_numpy()
    order = np.lexsort((np.arange(len(jobs)), start_t))
    order = order[keep[order]]
    free_at = np.full((nodes, GPUS_PER_NODE), start_ms, dtype=np.float64)
    busy = np.zeros((nodes * GPUS_PER_NODE, steps), dtype=bool)
    level = np.repeat(rng.uniform(0, f, size=(nodes * GPUS_PER_NODE, 1)), steps, axis=1).astype(np.float32)
    placed = unplaced = 0
    for j in order:
        begin, finish, need = start_t[j], end_t[j], int(gpus[j])
        free = free_at <= begin
        if need <= GPUS_PER_NODE:
            fits = np.flatnonzero(free.sum(axis=1) >= need)
            if not len(fits):
                unplaced += 1
                continue
            node = fits[0]
            slots = [node * GPUS_PER_NODE + g for g in np.flatnonzero(free[node])[:need]]
        else:
            whole = np.flatnonzero(free.all(axis=1))
            count = -(-need // GPUS_PER_NODE)
            if len(whole) < count:
                unplaced += 1
                continue
            slots = [n * GPUS_PER_NODE + g for n in whole[:count] for g in range(GPUS_PER_NODE)]
        for slot in slots:
            free_at[divmod(slot, GPUS_PER_NODE)] = finish
        first = max(0, int((begin - start_ms) // (step_s * 1000)))
        last = min(steps, int(-(-(finish - start_ms) // (step_s * 1000))))
        busy[slots, first:last] = True
        level[slots, first:last] = rng.uniform(f, 1)
        placed += 1
    return busy, level, {"jobs_placed": placed, "jobs_unplaced": unplaced}


def _smooth_noise(rng, rows: int, steps: int, sigma: float, knot_every: int = 20):
    """Piecewise-linear random walk noise (knots every ``knot_every`` steps), float32."""
    import numpy as np

    knots = steps // knot_every + 2
    walk = np.cumsum(rng.normal(0, sigma / 4, size=(rows, knots)), axis=1, dtype=np.float64)
    walk -= walk.mean(axis=1, keepdims=True)
    walk = np.clip(walk, -3 * sigma, 3 * sigma).astype(np.float32)
    position = np.arange(steps) / knot_every
    index = position.astype(np.int64)
    weight = (position - index).astype(np.float32)
    return walk[:, index] * (1 - weight) + walk[:, index + 1] * weight


def _reflect(values, low, width):
    """Fold values into [low, low + width] by reflection at the edges (keeps uniform uniform)."""
    import numpy as np

    y = np.mod(values - low, 2 * width)
    y = np.where(y > width, 2 * width - y, y)
    return (low + y).astype(np.float32)


# --- training jobs and their episodes (hangs, stragglers, healthy pauses) ------------------------

EPISODE_KINDS = ("hang", "stall", "straggler", "checkpoint", "barrier", "data_stall", "eval")
TRAINING_LEVEL = (0.72, 0.92)  # latent intensity of a pretraining job: every metric, IB too, well above idle
# The level wanders within [floor, ceiling]: below ~0.6 the IB curve is 0, and its top 5 % (5.6 -> 23.7 GB/s,
# bursts) would turn the small per-node noise into lasting IB differences between the nodes of one job,
# which data-parallel training (every node moves the same all-reduce volume) does not have.
_TRAINING_FLOOR, _TRAINING_CEILING = 0.66, 0.94
# What each episode sets, per metric: (low, high) of a uniform value per series and episode, or a factor
# ("x", low, high) applied to the healthy value. Absent metrics keep their healthy values.
_EPISODE_EFFECTS: dict[str, dict[str, tuple]] = {
    # NCCL kernels stay resident and spin: nvidia-smi shows 100 %, power near idle (NVIDIA/nccl#968:
    # "GPU util is 100% but the power consumption is pretty low (~70W)"); one thread block per NCCL
    # channel keeps a few of the 108 SMs active; no tensor-core work and no RDMA traffic.
    "hang": {"gpu_util": (100, 100), "sm_active": (2, 25), "tensor_active": (0, 0), "gpu_power": (68, 90),
             "ib_tx": (0, 0), "ib_rx": (0, 0)},
    # Healthy: ranks waiting at an NCCL barrier for the node still writing its checkpoint shard look
    # exactly like a hang while the wait lasts.
    "barrier": {"gpu_util": (100, 100), "sm_active": (2, 25), "tensor_active": (0, 0), "gpu_power": (68, 90),
                "ib_tx": (0, 0), "ib_rx": (0, 0)},
    "stall": {"gpu_util": (0, 0), "sm_active": (0, 0), "tensor_active": (0, 0), "gpu_power": (60, 66),
              "ib_tx": (0, 0), "ib_rx": (0, 0)},
    "checkpoint": {"gpu_util": (0, 0), "sm_active": (0, 0), "tensor_active": (0, 0), "gpu_power": (60, 70),
                   "ib_tx": (0, 0), "ib_rx": (0, 0)},
    "data_stall": {"gpu_util": (0, 0), "sm_active": (0, 0), "tensor_active": (0, 0), "gpu_power": (60, 70),
                   "ib_tx": (0, 0), "ib_rx": (0, 0)},
    "eval": {"gpu_util": (85, 98), "sm_active": (15, 35), "tensor_active": (2, 8), "gpu_power": (120, 200),
             "ib_tx": ("x", 0.01, 0.05), "ib_rx": ("x", 0.01, 0.05)},
    "straggler": {"sm_active": ("x",), "tensor_active": ("x",), "ib_tx": ("x",), "ib_rx": ("x",)},
}  # fmt: skip


@dataclass(frozen=True)
class Episode:
    """Something that happens to a job's nodes (indices into the cluster's nodes) over [start, end) steps.

    ``factor`` is a straggler's activity relative to its peers (e.g. 0.5: half as active)."""

    kind: str
    nodes: tuple[int, ...]
    start_step: int
    end_step: int
    factor: float = 1.0

    def __post_init__(self) -> None:
        if self.kind not in EPISODE_KINDS:
            raise ConfigError(
                f"unknown episode kind {self.kind!r}; expected one of {', '.join(EPISODE_KINDS)}"
            )
        if not self.nodes or self.end_step <= self.start_step:
            raise ConfigError(f"episode {self.kind} needs nodes and end_step > start_step")


@dataclass(frozen=True)
class TrainingJob:
    """A synthesized training job on whole nodes ``[first_node, first_node + nodes)`` over steps [start, end)."""

    job_id: str
    first_node: int
    nodes: int
    start_step: int
    end_step: int

    @property
    def node_indices(self) -> tuple[int, ...]:
        return tuple(range(self.first_node, self.first_node + self.nodes))


def apply_episodes(synth: SynthCluster, metric: str, values: np.ndarray) -> np.ndarray:
    """``values`` (series x steps, healthy) with every episode's effect on ``metric`` applied."""
    import numpy as np

    per_gpu = synth.catalog[metric].per_gpu
    values = np.array(values, dtype=np.float64, copy=True)
    for number, episode in enumerate(synth.episodes):
        effect = _EPISODE_EFFECTS[episode.kind].get(metric)
        if effect is None:
            continue
        rows = (
            [n * GPUS_PER_NODE + g for n in episode.nodes for g in range(GPUS_PER_NODE)]
            if per_gpu
            else list(episode.nodes)
        )
        span = slice(max(0, episode.start_step), min(synth.steps, episode.end_step))
        rng = np.random.default_rng([synth.seed, _stable_hash(metric), number])
        if effect[0] == "x":
            factor = (
                episode.factor if len(effect) == 1 else rng.uniform(effect[1], effect[2], size=(len(rows), 1))
            )
            values[rows, span] = values[rows, span] * factor
            continue
        low, high = effect
        level = rng.uniform(low, high, size=(len(rows), 1))
        width = values[rows, span].shape[1]
        wobble = rng.normal(0, 0.05 * (high - low), size=(len(rows), width)) if high > low else 0.0
        values[rows, span] = np.clip(level + wobble, low, high)
    return values


def synth_training_cluster(
    cluster: str,
    nodes: int,
    start: date,
    days: int,
    jobs: list[TrainingJob],
    episodes: list[Episode] | tuple[Episode, ...] = (),
    seed: int = 0,
    step_s: int = 15,
    catalog: Catalog | None = None,
) -> SynthCluster:
    """``nodes`` servers running ``jobs`` (each at one busy level with small smooth noise, never near idle),
    idle elsewhere, with ``episodes`` applied to every metric (see the module doc)."""
    import numpy as np

    from acme.metrics.catalog import load_catalog

    if nodes < 1 or days < 1 or step_s < 1:
        raise ConfigError("synthetic telemetry needs nodes >= 1, days >= 1 and step_s >= 1")
    catalog = catalog or load_catalog()
    steps = days * 86400 // step_s
    start_ms = int(datetime(start.year, start.month, start.day, tzinfo=UTC).timestamp() * 1000)
    f = IDLE_SHARE[profile_of(cluster)]
    rng = np.random.default_rng([seed, _stable_hash(cluster), 19])
    gpus = nodes * GPUS_PER_NODE
    level = np.repeat(rng.uniform(0, f, size=(gpus, 1)), steps, axis=1).astype(np.float32)
    low = np.zeros((gpus, steps), dtype=np.float32)
    width = np.full((gpus, steps), f, dtype=np.float32)
    for job in jobs:
        if job.first_node < 0 or job.first_node + job.nodes > nodes:
            raise ConfigError(f"job {job.job_id} does not fit on {nodes} nodes")
        rows = slice(job.first_node * GPUS_PER_NODE, (job.first_node + job.nodes) * GPUS_PER_NODE)
        span = slice(max(0, job.start_step), min(steps, job.end_step))
        level[rows, span] = rng.uniform(*TRAINING_LEVEL)
        low[rows, span] = _TRAINING_FLOOR
        width[rows, span] = _TRAINING_CEILING - _TRAINING_FLOOR
    noise = np.repeat(_smooth_noise(rng, nodes, steps, 0.02), GPUS_PER_NODE, axis=0)
    noise += _smooth_noise(rng, gpus, steps, 0.01)
    u_gpu = _reflect(level + noise * width, low, width)
    u_node = u_gpu.reshape(nodes, GPUS_PER_NODE, steps).mean(axis=1, dtype=np.float32)
    return SynthCluster(
        cluster, node_names(cluster, nodes), start_ms, step_s, steps, u_gpu, u_node, seed, catalog,
        {"jobs": len(jobs), "episodes": len(episodes)}, list(episodes),
    )  # fmt: skip


# --- writers ------------------------------------------------------------------------------------


def write_synth_metrics(
    cluster: str,
    nodes: int,
    start: date | str,
    days: int,
    fmt: str,
    out_path: str | Path,
    seed: int = 0,
    step_s: int = 15,
    trace_path: str | Path | None = None,
    metrics: tuple[str, ...] | list[str] | None = None,
) -> dict[str, Any]:
    """Write synthetic telemetry in ``fmt`` (see the module doc); returns a small manifest."""
    if fmt not in FORMATS:
        raise ConfigError(f"unknown synthetic metrics format {fmt!r}; expected one of {', '.join(FORMATS)}")
    if isinstance(start, str):
        start = date.fromisoformat(start)
    synth = synth_cluster(cluster, nodes, start, days, seed, step_s, trace_path)
    chosen = list(metrics or DEFAULT_METRICS)
    for name in chosen:
        synth.catalog[name]  # unknown names fail before anything is written
    out_path = Path(out_path)
    if fmt == "acmetrace-csv":
        files = write_acmetrace_csv(synth, chosen, out_path)
    elif fmt == "exporter-text":
        files = [write_exporter_text(synth, [m for m in chosen if synth.catalog[m].per_gpu], out_path)]
    else:
        files = [write_openmetrics(synth, chosen, out_path)]
    per_metric = {m: (synth.gpus if synth.catalog[m].per_gpu else nodes) * synth.steps for m in chosen}
    if fmt == "exporter-text":
        per_metric = {m: n for m, n in per_metric.items() if synth.catalog[m].per_gpu}
    return {
        "cluster": cluster,
        "format": fmt,
        "path": str(out_path),
        "files": [str(f) for f in files],
        "nodes": nodes,
        "gpus": synth.gpus,
        "start": start.isoformat(),
        "days": days,
        "step_s": step_s,
        "seed": seed,
        "metrics": sorted(per_metric),
        "samples": sum(per_metric.values()),
        **synth.info,
    }


def _columns(synth: SynthCluster, spec: MetricSpec) -> list[str]:
    if spec.per_gpu:
        return [f"{node}-{gpu}" for node in synth.nodes for gpu in range(GPUS_PER_NODE)]
    return list(synth.nodes)


def local_time_strings(ts_ms: np.ndarray, tz_hours: int = LOCAL_TZ_HOURS) -> list[str]:
    """``YYYY-MM-DD HH:MM:SS+08:00`` strings of UTC epoch milliseconds."""
    import numpy as np

    local = (ts_ms // 1000 + tz_hours * 3600).astype("datetime64[s]")
    text = np.char.replace(np.datetime_as_string(local, unit="s"), "T", " ")
    sign = "+" if tz_hours >= 0 else "-"
    return [f"{t}{sign}{abs(tz_hours):02d}:00" for t in text.tolist()]


def write_acmetrace_csv(synth: SynthCluster, metrics: list[str], folder: Path) -> list[Path]:
    """One wide CSV per metric: ``Time`` (+08:00) then one column per GPU or node."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    folder.mkdir(parents=True, exist_ok=True)
    times = pa.array(local_time_strings(synth.ts_ms()))
    written = []
    for metric in metrics:
        spec = synth.catalog[metric]
        values = synth.values(metric)
        integral = spec.storage != "decimal"
        arrays = [times] + [
            pa.array(row.astype("int64") if integral else row) for row in values
        ]  # one column per series (rows of the series-major matrix)
        table = pa.Table.from_arrays(arrays, names=["Time", *_columns(synth, spec)])
        path = folder / f"{metric}.csv"
        temporary = path.with_suffix(".csv.tmp")
        with open(temporary, "wb") as handle:  # a plain header and unquoted times, like the release
            handle.write((",".join(table.column_names) + "\n").encode())
            pacsv.write_csv(
                table, handle, pacsv.WriteOptions(include_header=False, quoting_style="none", batch_size=2048)
            )
        os.replace(temporary, path)
        written.append(path)
        del values, arrays, table
    return written


def _exporter_value_strings(values: np.ndarray, spec: MetricSpec) -> np.ndarray:
    import numpy as np

    exported = values / spec.scale
    if spec.scale != 1:
        return np.char.mod("%.6f", exported)
    if spec.storage != "decimal":
        return np.char.mod("%d", exported.astype(np.int64))
    return np.char.mod("%.3f", exported)


def _gpu_labels(synth: SynthCluster, gpu_index: int, extra: str = "") -> str:
    node, gpu = divmod(gpu_index, GPUS_PER_NODE)
    return (
        f'gpu="{gpu}",UUID="{synth.uuid(gpu_index)}",device="nvidia{gpu}",'
        f'modelName="{MODEL_NAME}",Hostname="{synth.nodes[node]}"{extra}'
    )


def write_exporter_text(synth: SynthCluster, metrics: list[str], path: Path) -> Path:
    """Every scrape of the window as dcgm-exporter pages, each after a ``# scrape_time`` line."""
    specs = [synth.catalog[m] for m in metrics if synth.catalog[m].exporter]
    values = {s.name: _exporter_value_strings(synth.values(s.name), s) for s in specs}
    labels = [_gpu_labels(synth, g) for g in range(synth.gpus)]
    stamps = synth.ts_ms()
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    with open(temporary, "w") as out:
        for t, stamp in enumerate(stamps.tolist()):
            when = datetime.fromtimestamp(stamp / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            lines = [f"# scrape_time {when}"]
            for spec in specs:
                kind = "counter" if spec.kind == "counter" else "gauge"
                lines.append(f"# HELP {spec.exporter} {spec.name} ({spec.unit}).")
                lines.append(f"# TYPE {spec.exporter} {kind}")
                column = values[spec.name][:, t]
                lines.extend(f"{spec.exporter}{{{lab}}} {v}" for lab, v in zip(labels, column, strict=True))
            out.write("\n".join(lines) + "\n")
    os.replace(temporary, path)
    return path


def write_openmetrics(synth: SynthCluster, metrics: list[str], path: Path) -> Path:
    """OpenMetrics text with timestamps for ``promtool tsdb create-blocks-from openmetrics``."""
    seconds = (synth.ts_ms() // 1000).astype(str)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")

    def series_lines(name: str, labels: str, strings) -> str:
        prefix = f"{name}{{{labels}}} "
        return "".join(f"{prefix}{v} {t}\n" for v, t in zip(strings, seconds, strict=True))

    with open(temporary, "w") as out:
        for metric in metrics:
            spec = synth.catalog[metric]
            values = synth.values(metric)
            if spec.per_gpu:
                if not spec.exporter:
                    continue
                # OpenMetrics wants counters named *_total; DCGM's counters are not, so they are
                # declared "unknown" (Prometheus stores them the same way).
                kind = "unknown" if spec.kind == "counter" else "gauge"
                out.write(
                    f"# HELP {spec.exporter} {spec.name} ({spec.unit}).\n# TYPE {spec.exporter} {kind}\n"
                )
                strings = _exporter_value_strings(values, spec)
                for g in range(synth.gpus):
                    node = synth.nodes[g // GPUS_PER_NODE]
                    labels = _gpu_labels(synth, g, f',instance="{node}:9400",job="dcgm"')
                    out.write(series_lines(spec.exporter, labels, strings[g]))
                continue
            families: dict[tuple[str, str], list[str]] = {}
            for n, node in enumerate(synth.nodes):
                for family, kind, labels, strings in _node_series(metric, node, values[n], synth.step_s):
                    sample_name = family + ("_total" if kind == "counter" else "")
                    families.setdefault((family, kind), []).append(series_lines(sample_name, labels, strings))
            for (family, kind), chunks in families.items():  # a family's series stay together
                out.write(f"# TYPE {family} {kind}\n")
                out.writelines(chunks)
        out.write("# EOF\n")
    os.replace(temporary, path)
    return path


def _node_series(metric: str, node: str, row, step_s: int):
    """The raw exporter series behind a node metric (what the catalog's PromQL reads)."""
    import numpy as np

    instance = f'instance="{node}:9100",job="node"'
    if metric == "node_cpu_util":
        idle = np.cumsum((1 - row / 100) * step_s)
        yield "node_cpu_seconds", "counter", f'cpu="0",mode="idle",{instance}', np.char.mod("%.3f", idle)
    elif metric == "node_mem_util":
        total = 2 * 1024**4
        available = np.round(total * (1 - row / 100))
        yield "node_memory_MemTotal_bytes", "gauge", instance, np.full(len(row), str(total))
        yield (
            "node_memory_MemAvailable_bytes",
            "gauge",
            instance,
            np.char.mod("%d", available.astype(np.int64)),
        )
    elif metric in ("ib_tx", "ib_rx"):
        family = (
            "node_infiniband_port_data_" + ("transmitted" if metric == "ib_tx" else "received") + "_bytes"
        )
        sent = np.cumsum(row * step_s)
        labels = f'device="mlx5_0",port="1",{instance}'
        yield family, "counter", labels, np.char.mod("%d", sent.astype(np.int64))
    elif metric == "server_power":
        labels = f'instance="{node}:9290",job="ipmi"'
        yield "ipmi_dcmi_power_consumption_watts", "gauge", labels, np.char.mod("%d", row.astype(np.int64))
