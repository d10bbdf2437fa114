"""Runtime priors of evaluation trials: how long inference, metrics and model loading take.

The trial coordinator plans before anything runs, so it needs an expected time for every piece
of work. These priors start from what is known before the first run (dataset size, metric kind,
model size, the hardware) and are then learned from measured run times.

Inference (GPU seconds per sample)
    ``seconds = n_samples × per_sample(kind or dataset) × params / 7e9 / (gpus_per_trial × tp_eff)``.
    Per-sample times are stated for the 7B reference model on one A100-80GB with batched
    HF-transformers inference (what OpenCompass ran on Acme in 2023). Decoding is memory-bandwidth
    bound (every token reads every weight), so time grows linearly with the parameter count; a
    model that does not fit one GPU with 20% headroom for activations and KV cache is split over a
    power-of-two group of GPUs (tensor parallel) with 85% scaling efficiency. Kind defaults:
    ``ppl`` 0.0125 s per answer option (4 options: 0.05 s), short-answer ``match`` 0.12 s,
    ``code_exec`` 0.6 s (512-token programs), ``judge`` 1.5 s (long open answers). Chain-of-thought
    sets (GSM8K, MATH, BBH…) override this in the suite file (0.6–1.0 s).
Metric (CPU seconds per sample, one core)
    ``match`` 0.002 s (regex / exact match), ``ppl`` 0.0005 s (argmax), ``judge`` 1.0 s (a judge-model
    call with bounded concurrency), ``code_exec`` calibrated to the paper (0.221 s, see below).
    Metric time does not depend on the evaluated model's size.
Model loading
    ``bytes = params × 2`` (bf16). A remote load streams the checkpoint over the node's NIC
    (25 Gb/s, shared fairly by all remote loads running on the node at once) then copies it to
    the GPU (16 GB/s); a load from node shared memory (``/dev/shm``, filled once by the node's
    precursor) reads at 10 GB/s.
Per-trial overheads
    A trial process pays ``setup_s`` (interpreter, framework and tokenizer start-up, calibrated)
    and ``0.002 s`` per sample of dataset preprocessing (prompt building, tokenization). A
    decoupled metric task is its own CPU process and pays ``metric_task_setup_s`` (5 s).

Calibration to the paper (Hu et al., NSDI'24, §6.2): in the baseline that loads the model
remotely and computes the metric on the GPU node after inference, model loading and data
preprocessing take 29.5% of a HumanEval trial of a 7B model and the GPU idles for 19% of it while
the code-execution metric runs. ``calibrate_to_paper`` solves for the two quantities nobody
publishes — the trial set-up time and the code-execution seconds per sample — so that a HumanEval
trial that starts together with seven others on one node (all eight fetching the checkpoint over
the shared NIC, as at the start of a baseline run) reproduces both shares. The inference time of
that trial (164 × 0.6 s) is the assumption the calibration rests on.

Learning: ``RuntimePriors.update`` blends measured per-sample times into the priors with an
exponential moving average (``alpha`` = weight of the new measurement), after converting them to
the 7B single-GPU reference so measurements of any model size improve the priors of every size.
Priors round-trip through JSON (``to_json`` / ``from_json``); an evaluation keeps them in the lake
(``acme.evaluation.evaluation_run.load_priors`` / ``fold_into_priors``).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from acme.errors import ConfigError, InputError
from acme.evaluation.layout import json_object
from acme.evaluation.suite import EvalDataset

REFERENCE_PARAMS = 7e9
BYTES_PER_PARAM_BF16 = 2
PRIORS_FORMAT_VERSION = 1

# The paper's published facts the defaults are calibrated to (7B model, HumanEval trial).
PAPER_HUMANEVAL_LOAD_SHARE = 0.295
PAPER_HUMANEVAL_METRIC_IDLE_SHARE = 0.19
HUMANEVAL_SAMPLES = 164
CALIBRATION_CONCURRENT_LOADS = 8

PPL_GPU_S_PER_CHOICE = 0.0125
PPL_DEFAULT_CHOICES = 4
KIND_GPU_S_PER_SAMPLE = {
    "match": 0.12,
    "code_exec": 0.6,
    "judge": 1.5,
    "ppl": PPL_GPU_S_PER_CHOICE * PPL_DEFAULT_CHOICES,
}
KIND_CPU_S_PER_SAMPLE_UNCALIBRATED = {"match": 0.002, "code_exec": None, "judge": 1.0, "ppl": 0.0005}


@dataclass(frozen=True)
class ModelSpec:
    """The evaluated model: its parameter count decides checkpoint bytes and inference speed."""

    name: str
    params: float
    bytes_per_param: int = BYTES_PER_PARAM_BF16

    @property
    def checkpoint_bytes(self) -> float:
        return self.params * self.bytes_per_param

    def gpus_per_trial(self, gpu_memory_gb: float = 80.0, headroom: float = 1.2, max_gpus: int = 8) -> int:
        """GPUs one trial needs: the smallest power of two whose memory holds weights + 20%."""
        needed = self.checkpoint_bytes * headroom / (gpu_memory_gb * 1e9)
        gpus = 1
        while gpus < needed:  # ends: parse_model_size refuses a size that is not finite
            gpus *= 2
        if gpus > max_gpus:
            raise ConfigError(
                f"model {self.name} needs {gpus} GPUs of {gpu_memory_gb:g} GB per trial; a node has {max_gpus}"
            )
        return gpus


def parse_model_size(text: str | float | ModelSpec) -> ModelSpec:
    """``"7B"``, ``"13b"``, ``"1.8B"``, ``"500M"`` or a parameter count → ModelSpec."""
    if isinstance(text, ModelSpec):
        return text
    if isinstance(text, int | float):
        params = float(text)
        name = f"{params / 1e9:g}B"
    else:
        match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([bBmM]?)\s*", str(text))
        if not match:
            raise ConfigError(f"model size {text!r} is not like 7B, 13B, 70B or 500M")
        number, unit = float(match.group(1)), match.group(2).upper()
        params = number * (1e6 if unit == "M" else 1e9)
        name = f"{match.group(1)}{unit or 'B'}"
    if not (params > 0 and math.isfinite(params)):
        raise ConfigError(f"model size {text!r} must be a positive, finite number of parameters")
    return ModelSpec(name=name, params=params)


@dataclass(frozen=True)
class Hardware:
    """One GPU node of the Acme cluster (8× A100-80GB) and what its trials share."""

    gpus_per_node: int = 8
    cpu_cores_per_node: int = 64
    nic_gbps: float = 25.0  # node link to remote checkpoint storage, shared by concurrent remote loads
    shm_read_gbytes_s: float = 10.0  # checkpoint read from /dev/shm into the GPU
    h2d_gbytes_s: float = 16.0  # host-to-GPU copy after a remote fetch (PCIe 4.0 x16, effective)
    gpu_memory_gb: float = 80.0
    tp_efficiency: float = 0.85  # throughput kept per GPU when a trial spans several GPUs

    def __post_init__(self) -> None:
        for name in ("gpus_per_node", "cpu_cores_per_node"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be at least 1, got {getattr(self, name)}")
        for name in ("nic_gbps", "shm_read_gbytes_s", "h2d_gbytes_s", "gpu_memory_gb"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"{name} must be positive, got {getattr(self, name)}")

    @property
    def nic_bytes_s(self) -> float:
        return self.nic_gbps * 1e9 / 8


@dataclass(frozen=True)
class TrialOverheads:
    """Fixed costs of a trial process and of a decoupled metric task (seconds)."""

    setup_s: float
    preprocess_s_per_sample: float = 0.002
    metric_task_setup_s: float = 5.0
    load_s: float | None = None  # measured model load of this model; None: modelled from bytes (shm_load_s)


def model_load_s(model: ModelSpec, hardware: Hardware, overheads: TrialOverheads) -> float:
    """A trial's model load from shared memory: measured for this model when known, else from its bytes."""
    return overheads.load_s if overheads.load_s is not None else shm_load_s(model, hardware)


def remote_fetch_s(model: ModelSpec, hardware: Hardware, concurrent: int = 1) -> float:
    """Seconds to stream the checkpoint over the NIC while ``concurrent`` loads share it evenly."""
    return model.checkpoint_bytes * max(1, concurrent) / hardware.nic_bytes_s


def remote_load_s(model: ModelSpec, hardware: Hardware, concurrent: int = 1) -> float:
    """A remote load: NIC fetch (shared) then the host-to-GPU copy."""
    return remote_fetch_s(model, hardware, concurrent) + model.checkpoint_bytes / (
        hardware.h2d_gbytes_s * 1e9
    )


def shm_load_s(model: ModelSpec, hardware: Hardware) -> float:
    """A load from the node's shared memory, filled by the precursor."""
    return model.checkpoint_bytes / (hardware.shm_read_gbytes_s * 1e9)


@dataclass(frozen=True)
class Calibration:
    """Unpublished constants solved from the paper's HumanEval facts (see module doc)."""

    setup_s: float
    code_exec_cpu_s_per_sample: float
    humaneval_trial_s: float
    load_and_preprocess_s: float
    metric_s: float


def calibrate_to_paper(
    hardware: Hardware | None = None,
    model: ModelSpec | None = None,
    code_gpu_s_per_sample: float = KIND_GPU_S_PER_SAMPLE["code_exec"],
    preprocess_s_per_sample: float = 0.002,
    concurrent_loads: int = CALIBRATION_CONCURRENT_LOADS,
) -> Calibration:
    """Trial set-up and code-execution time that make a baseline HumanEval trial match the paper."""
    hardware = hardware or Hardware()
    model = model or parse_model_size("7B")
    inference = HUMANEVAL_SAMPLES * code_gpu_s_per_sample
    trial = inference / (1.0 - PAPER_HUMANEVAL_LOAD_SHARE - PAPER_HUMANEVAL_METRIC_IDLE_SHARE)
    load_and_preprocess = PAPER_HUMANEVAL_LOAD_SHARE * trial
    metric = PAPER_HUMANEVAL_METRIC_IDLE_SHARE * trial
    setup = (
        load_and_preprocess
        - remote_load_s(model, hardware, concurrent_loads)
        - HUMANEVAL_SAMPLES * preprocess_s_per_sample
    )
    if setup < 0:
        raise ConfigError("the paper's load share is below the modelled checkpoint transfer time")
    return Calibration(setup, metric / HUMANEVAL_SAMPLES, trial, load_and_preprocess, metric)


def default_overheads(hardware: Hardware | None = None) -> TrialOverheads:
    """Trial overheads with the set-up time calibrated to the paper on this hardware."""
    return TrialOverheads(setup_s=calibrate_to_paper(hardware).setup_s)


# Code execution's metric time does not depend on the hardware (only the set-up time does).
CODE_EXEC_CPU_S_PER_SAMPLE = calibrate_to_paper().code_exec_cpu_s_per_sample
KIND_CPU_S_PER_SAMPLE = {
    kind: CODE_EXEC_CPU_S_PER_SAMPLE if value is None else value
    for kind, value in KIND_CPU_S_PER_SAMPLE_UNCALIBRATED.items()
}


def kind_cpu_s_per_sample(kind: str) -> float:
    return KIND_CPU_S_PER_SAMPLE[kind]


@dataclass(frozen=True)
class DatasetRuntime:
    """Expected seconds per sample of one dataset for one model (wall time of its trial's GPU group)."""

    infer_s_per_sample: float
    metric_s_per_sample: float
    source: str  # "measured", "suite" or "kind"


@dataclass(frozen=True)
class Measurement:
    """Measured run times of one trial slice (what a finished Airflow task reports)."""

    dataset: str
    n_samples: int
    infer_s: float
    metric_s: float | None = None
    model_size: str = "7B"
    gpus: int | None = None  # GPUs the trial used; default: what the model needs

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> Measurement:
        return cls(
            dataset=str(data["dataset"]),
            n_samples=int(data["n_samples"]),
            infer_s=float(data["infer_s"]),
            metric_s=None if data.get("metric_s") is None else float(data["metric_s"]),
            model_size=str(data.get("model_size", "7B")),
            gpus=None if data.get("gpus") is None else int(data["gpus"]),
        )


@dataclass
class RuntimePriors:
    """Per-dataset runtime priors, seeded from size and metric kind, refined by measurements.

    ``learned`` maps a dataset name to ``{"gpu_s_per_sample_ref", "cpu_s_per_sample",
    "observations"}`` where the GPU figure is normalized to the 7B single-GPU reference.
    """

    hardware: Hardware = field(default_factory=Hardware)
    alpha: float = 0.5
    learned: dict[str, dict[str, float]] = field(default_factory=dict)
    # Per-trial costs measured by real trials: "setup_s" (EMA over trials, any model) with its
    # "setup_observations", and "load_s/<model size>" (EMA of the model load from shared memory, per model
    # size: a load has fixed costs -- runtime start, memory map, tokenizer -- that bytes alone do not give).
    trial: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not 0.0 < self.alpha <= 1.0:
            raise ConfigError(f"EMA alpha must be in (0, 1], got {self.alpha}")

    # --- seeding ----------------------------------------------------------------------
    def _scale(self, model: ModelSpec, gpus: int | None = None) -> float:
        """Wall time of a trial of ``model`` relative to the 7B reference on one GPU."""
        gpus = gpus or model.gpus_per_trial(self.hardware.gpu_memory_gb, max_gpus=self.hardware.gpus_per_node)
        efficiency = 1.0 if gpus == 1 else self.hardware.tp_efficiency
        return (model.params / REFERENCE_PARAMS) / (gpus * efficiency)

    def reference_gpu_s(self, dataset: EvalDataset) -> tuple[float, str]:
        learned = self.learned.get(dataset.name, {})
        if "gpu_s_per_sample_ref" in learned:
            return learned["gpu_s_per_sample_ref"], "measured"
        if dataset.gpu_s_per_sample is not None:
            return dataset.gpu_s_per_sample, "suite"
        if dataset.metric_kind == "ppl":
            return PPL_GPU_S_PER_CHOICE * (dataset.n_choices or PPL_DEFAULT_CHOICES), "kind"
        return KIND_GPU_S_PER_SAMPLE[dataset.metric_kind], "kind"

    def cpu_s(self, dataset: EvalDataset) -> float:
        learned = self.learned.get(dataset.name, {})
        if "cpu_s_per_sample" in learned:
            return learned["cpu_s_per_sample"]
        if dataset.cpu_s_per_sample is not None:
            return dataset.cpu_s_per_sample
        return kind_cpu_s_per_sample(dataset.metric_kind)

    def runtime(self, dataset: EvalDataset, model: ModelSpec) -> DatasetRuntime:
        """Expected per-sample inference (wall, on the trial's GPUs) and metric seconds."""
        gpu_ref, source = self.reference_gpu_s(dataset)
        return DatasetRuntime(gpu_ref * self._scale(model), self.cpu_s(dataset), source)

    # --- learning ---------------------------------------------------------------------
    def update(self, measurements: Iterable[Measurement | Mapping[str, Any]], suite=None) -> list[str]:
        """Blend measured per-sample times into the priors (EMA); returns why any were skipped.

        ``suite`` (a Suite or {name: EvalDataset}) supplies each dataset's seed for its first
        measurement; without it the first measurement of an unknown dataset is taken as is.
        """
        datasets = suite.by_name() if hasattr(suite, "by_name") else dict(suite or {})
        skipped: list[str] = []
        for index, item in enumerate(measurements):
            try:
                m = item if isinstance(item, Measurement) else Measurement.from_mapping(item)
                model = parse_model_size(m.model_size)
            except (KeyError, TypeError, ValueError, ConfigError) as exc:
                skipped.append(f"measurement {index}: unusable ({exc})")
                continue
            if m.n_samples <= 0 or not m.infer_s >= 0 or (m.metric_s is not None and not m.metric_s >= 0):
                skipped.append(f"measurement {index} ({m.dataset}): non-positive size or negative time")
                continue
            entry = self.learned.setdefault(m.dataset, {"observations": 0})
            seed = datasets.get(m.dataset)
            observed_gpu = m.infer_s / m.n_samples / self._scale(model, m.gpus)
            previous = entry.get("gpu_s_per_sample_ref")
            if previous is None and seed is not None:
                previous = self.reference_gpu_s(seed)[0]
            entry["gpu_s_per_sample_ref"] = _blend(previous, observed_gpu, self.alpha)
            if m.metric_s is not None:
                observed_cpu = m.metric_s / m.n_samples
                previous = entry.get("cpu_s_per_sample")
                if previous is None and seed is not None:
                    previous = self.cpu_s(seed)
                entry["cpu_s_per_sample"] = _blend(previous, observed_cpu, self.alpha)
            entry["observations"] = entry.get("observations", 0) + 1
        return skipped

    def update_trial(self, setup_s: float, load_s: float, model_size: str | ModelSpec) -> list[str]:
        """Blend one real trial's measured set-up and model-load seconds (EMA); returns why any were skipped."""
        skipped = []
        if isinstance(setup_s, bool) or not (
            isinstance(setup_s, int | float) and math.isfinite(setup_s) and setup_s >= 0
        ):
            skipped.append(f"trial set-up {setup_s!r} s is not a time")
        else:
            self.trial["setup_s"] = _blend(self.trial.get("setup_s"), float(setup_s), self.alpha)
            self.trial["setup_observations"] = self.trial.get("setup_observations", 0) + 1
        try:
            model = parse_model_size(model_size)
        except ConfigError as exc:
            return [*skipped, f"model load: {exc}"]
        if isinstance(load_s, bool) or not (
            isinstance(load_s, int | float) and math.isfinite(load_s) and load_s >= 0
        ):
            skipped.append(f"model load {load_s!r} s is not a time")
        else:
            key = f"load_s/{model.name}"
            self.trial[key] = _blend(self.trial.get(key), float(load_s), self.alpha)
        return skipped

    def trial_overheads(self, model: ModelSpec | str | None = None) -> TrialOverheads:
        """Per-trial overheads to plan with: measured set-up and load when real trials measured them, else
        the paper-calibrated set-up and the load modelled from the checkpoint's bytes."""
        overheads = default_overheads(self.hardware)
        if "setup_s" in self.trial:
            overheads = replace(overheads, setup_s=self.trial["setup_s"])
        if model is not None:
            load = self.trial.get(f"load_s/{parse_model_size(model).name}")
            if load is not None:
                overheads = replace(overheads, load_s=load)
        return overheads

    def update_shm_load(self, model_bytes: float, seconds: float) -> bool:
        """Blend one measured load from node shared memory into ``hardware.shm_read_gbytes_s`` (EMA).

        Returns False (nothing learned) for a non-positive size or time.
        """
        if not (model_bytes > 0 and seconds > 0):
            return False
        observed = model_bytes / seconds / 1e9
        blended = _blend(self.hardware.shm_read_gbytes_s, observed, self.alpha)
        self.hardware = replace(self.hardware, shm_read_gbytes_s=blended)
        return True

    # --- storage ----------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "format": "acme.evaluation.priors",
            "version": PRIORS_FORMAT_VERSION,
            "reference_params": REFERENCE_PARAMS,
            "alpha": self.alpha,
            "hardware": asdict(self.hardware),
            "datasets": {name: dict(values) for name, values in sorted(self.learned.items())},
            "trial": dict(sorted(self.trial.items())),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str = "<priors>") -> RuntimePriors:
        if data.get("format") != "acme.evaluation.priors" or data.get("version") != PRIORS_FORMAT_VERSION:
            raise InputError(source, f"not acme.evaluation.priors version {PRIORS_FORMAT_VERSION}")
        try:
            hardware = Hardware(**data.get("hardware", {}))
            learned = {
                str(name): {str(k): float(v) for k, v in values.items()}
                for name, values in data.get("datasets", {}).items()
            }
            trial = {str(k): float(v) for k, v in (data.get("trial") or {}).items()}
            return cls(hardware=hardware, alpha=float(data.get("alpha", 0.5)), learned=learned, trial=trial)
        except (TypeError, ValueError, AttributeError, ConfigError) as exc:
            raise InputError(source, f"malformed priors ({exc})") from None

    @classmethod
    def from_json(cls, text: str, source: str = "<priors>") -> RuntimePriors:
        return cls.from_dict(json_object(text, source, "priors"), source)


def _blend(previous: float | None, observed: float, alpha: float) -> float:
    if previous is None or not math.isfinite(previous):
        return observed
    return (1.0 - alpha) * previous + alpha * observed
