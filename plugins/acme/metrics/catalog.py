"""The monitoring metric catalog: which metrics exist and how to read, check and store each.

The list, the PromQL and the checks live in configuration (``include/metrics/metrics.yaml``,
or ``ACME_METRICS_CATALOG``), not in code. ``load_catalog()`` returns a :class:`Catalog` of
:class:`MetricSpec`; everything else in ``acme.metrics`` takes a spec rather than a name.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from acme.errors import ConfigError

INTEGER_STORAGE = ("uint8", "int8", "uint16", "int16", "uint32", "int32", "int64")
STORAGE_TYPES = (*INTEGER_STORAGE, "decimal")
DEFAULT_LABELS = {
    "node": ("Hostname", "hostname", "kubernetes_node", "node", "instance"),
    "gpu": ("gpu",),
    "uuid": ("UUID", "uuid"),
    "model": ("modelName",),
    # every one present is part of a series' identity (MIG instances and vGPU shares of one GPU)
    "gpu_instance": ("GPU_I_PROFILE", "GPU_I_ID", "vdeviceid", "vdevice_index"),
}


@dataclass(frozen=True)
class ExporterAlias:
    """Another exporter's name for a catalog metric (``aliases:`` in the catalog), e.g. node power
    from gebn/bmc_exporter or a Redfish exporter instead of ipmi_exporter.

    ``sum_over``: a label whose series are parts of the node's value (bmc_exporter's ``psu``): the
    samples of one node at one time are summed into one (a sample without the label is the whole
    already). ``match``: label -> regular expression (full match) a series must meet to be the
    metric (a Redfish PowerControl of the system, not of a subsystem); others are skipped and
    counted."""

    name: str
    sum_over: str | None = None
    match: tuple[tuple[str, re.Pattern[str]], ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        return all(pattern.fullmatch(labels.get(label, "")) for label, pattern in self.match)


@dataclass(frozen=True)
class MetricSpec:
    """One metric: its canonical name, where it comes from, its valid range and its storage."""

    name: str
    level: str  # "gpu" or "node"
    kind: str  # "gauge" or "counter"
    unit: str
    low: float
    high: float | None  # None: the device's memory (fb_used)
    precision: float
    storage: str
    hist: tuple[float, float, int]
    exporter: str | None = None
    scale: float = 1.0
    promql: str | None = None
    shard_label: str | None = None
    csv_names: tuple[str, ...] = ()
    stale_flat_after_s: float | None = None
    labels: dict[str, tuple[str, ...]] = field(default_factory=lambda: dict(DEFAULT_LABELS))
    aliases: tuple[ExporterAlias, ...] = ()

    @property
    def per_gpu(self) -> bool:
        return self.level == "gpu"

    @property
    def decimal_scale(self) -> int:
        """Digits after the point of a ``decimal`` metric (precision 0.1 -> 1)."""
        return max(0, round(-math.log10(self.precision)))

    def quantize(self, values):
        """Values rounded to the metric's precision (float64 in, float64 out)."""
        import numpy as np

        if self.precision == 1:
            return np.round(values)
        if self.precision < 1:  # divide by 10**k: 501 / 10 is 50.1 exactly-rounded, 501 * 0.1 is not
            factor = 10.0**self.decimal_scale
            return np.round(values * factor) / factor
        return np.round(values / self.precision) * self.precision

    def range_for(self, device_memory_mib) -> tuple[float, Any]:
        """(low, high) where high may be an array of per-series device memory sizes."""
        return self.low, (device_memory_mib if self.high is None else self.high)


@dataclass(frozen=True)
class Catalog:
    metrics: dict[str, MetricSpec]
    device_memory_mib: tuple[tuple[str, float], ...]  # (modelName substring, MiB), in match order
    default_memory_mib: float
    stale_missing_after_s: float

    def __getitem__(self, name: str) -> MetricSpec:
        try:
            return self.metrics[name]
        except KeyError:
            raise ConfigError(
                f"unknown metric {name!r}; the catalog has: {', '.join(sorted(self.metrics))}"
            ) from None

    def __iter__(self):
        return iter(self.metrics.values())

    def by_exporter_name(self) -> dict[str, MetricSpec]:
        """Exporter metric name -> spec: each metric's ``exporter`` and its plain aliases (those that
        neither sum series nor select them, so that any reader may store their samples as they are)."""
        names = {
            alias.name: spec for spec in self for alias in spec.aliases if not (alias.sum_over or alias.match)
        }
        return {**names, **{spec.exporter: spec for spec in self if spec.exporter}}

    def exporter_aliases(self) -> dict[str, tuple[MetricSpec, ExporterAlias]]:
        """Every alias name -> (its spec, the alias): what a scrape parser maps, sums and selects."""
        return {alias.name: (spec, alias) for spec in self for alias in spec.aliases}

    def by_csv_name(self, stem: str) -> MetricSpec | None:
        lowered = stem.lower()
        for spec in self:
            if lowered == spec.name.lower() or lowered in (n.lower() for n in spec.csv_names):
                return spec
        return None

    def memory_of(self, model: str | None) -> float:
        """The device memory (MiB) of a GPU model name, by first matching substring."""
        if model:
            for pattern, mib in self.device_memory_mib:
                if pattern in model:
                    return mib
        return self.default_memory_mib


def load_catalog(path: str | Path | None = None) -> Catalog:
    """The metric catalog (``ACME_METRICS_CATALOG`` or the bundled one), checked."""
    from acme import settings

    return _load(str(path or settings.metrics().catalog))


@lru_cache(maxsize=8)
def _load(path: str) -> Catalog:
    import yaml

    try:
        document = yaml.safe_load(Path(path).read_text()) or {}
    except OSError as exc:
        raise ConfigError(f"metric catalog {path}: cannot read: {exc}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"metric catalog {path}: not valid YAML: {exc}") from exc
    labels = {**DEFAULT_LABELS, **{k: tuple(v) for k, v in (document.get("labels") or {}).items()}}
    memory = dict((document.get("devices") or {}).get("memory_mib") or {})
    default_memory = float(memory.pop("default", 81920))
    metrics = {}
    for name, raw in (document.get("metrics") or {}).items():
        metrics[name] = _spec(path, name, raw or {}, labels)
    if not metrics:
        raise ConfigError(f"metric catalog {path}: no metrics defined")
    return Catalog(
        metrics=metrics,
        device_memory_mib=tuple((str(k), float(v)) for k, v in memory.items()),
        default_memory_mib=default_memory,
        stale_missing_after_s=float(document.get("stale_missing_after_s", 900)),
    )


def _alias(where: str, raw: Any) -> ExporterAlias:
    """One ``aliases:`` entry: a name, or ``{name, sum_over, match}``."""
    if isinstance(raw, str):
        return ExporterAlias(raw)
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
        raise ConfigError(
            f"{where}: an alias is an exporter metric name or {{name, sum_over, match}}, not {raw!r}"
        )
    match = tuple((str(k), re.compile(str(v))) for k, v in (raw.get("match") or {}).items())
    return ExporterAlias(raw["name"], raw.get("sum_over"), match)


def _spec(path: str, name: str, raw: dict, labels: dict) -> MetricSpec:
    where = f"metric catalog {path}: {name}"
    try:
        low, high = raw["range"]
        hist_low, hist_high, bins = raw["hist"]
        spec = MetricSpec(
            name=name,
            level=raw.get("level", "gpu"),
            kind=raw.get("kind", "gauge"),
            unit=str(raw["unit"]),
            low=float(low),
            high=None if high == "device_memory" else float(high),
            precision=float(raw.get("precision", 1)),
            storage=str(raw.get("storage", "int64")),
            hist=(float(hist_low), float(hist_high), int(bins)),
            exporter=raw.get("exporter"),
            scale=float(raw.get("scale", 1.0)),
            promql=raw.get("promql"),
            shard_label=raw.get("shard_label"),
            csv_names=tuple(raw.get("csv_names") or ()),
            stale_flat_after_s=raw.get("stale_flat_after_s"),
            labels={**labels, **{k: tuple(v) for k, v in (raw.get("labels") or {}).items()}},
            aliases=tuple(_alias(where, item) for item in raw.get("aliases") or ()),
        )
    except (KeyError, TypeError, ValueError, re.error) as exc:
        raise ConfigError(f"{where}: missing or invalid field ({exc})") from exc
    if spec.level not in ("gpu", "node"):
        raise ConfigError(f"{where}: level must be gpu or node, not {spec.level!r}")
    if spec.kind not in ("gauge", "counter"):
        raise ConfigError(f"{where}: kind must be gauge or counter, not {spec.kind!r}")
    if spec.storage not in STORAGE_TYPES:
        raise ConfigError(f"{where}: storage must be one of {', '.join(STORAGE_TYPES)}")
    if spec.storage == "decimal" and not math.isclose(10**-spec.decimal_scale, spec.precision):
        raise ConfigError(f"{where}: a decimal metric needs a precision of 1, 0.1, 0.01, ...")
    if spec.storage != "decimal" and spec.precision < 1:
        raise ConfigError(f"{where}: precision {spec.precision} needs storage: decimal")
    if spec.hist[2] < 1 or spec.hist[1] <= spec.hist[0]:
        raise ConfigError(f"{where}: hist must be [low, high, bins] with high > low and bins >= 1")
    return spec
