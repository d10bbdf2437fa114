"""The trial coordinator's plan: which samples each trial evaluates, where, and in what order.

This is the plan of the paper's decoupled evaluation scheduling (Hu et al., NSDI'24, §6.2),
made before a checkpoint's evaluation starts, from the suite and the runtime priors:

1. **Trial decomposition.** A dataset whose expected inference is longer than ``max_trial_s`` is
   split into equal sample ranges; small datasets (and small remainders) are batched into one
   trial up to ``batch_fraction × max_trial_s`` so they pay one trial start-up and one model load
   instead of one each. ``max_trial_s`` is ``max_trial_fraction`` of the expected makespan (never
   below ``min_trial_s``): no trial is long enough to be the tail on its own, which also bounds
   the damage when a prior is wrong.
2. **Decoupled model loading.** One precursor per node copies the checkpoint from remote storage
   into node shared memory once (the only remote transfer of the node); every trial on that node
   loads the model from there.
3. **Decoupled metrics.** Inference releases the GPU; each slice's metric runs as a CPU task in
   the node's CPU pool, started as soon as that slice's inference ends.
4. **Ordering.** Trials are dispatched longest first (LPT) by their critical path — GPU time plus
   the metric that still runs after the GPU is released — so trials with long CPU metrics
   (code execution, judge models) start early and their CPU work overlaps the remaining
   inference. Inside a trial, the slice with the longest metric runs first for the same reason.
5. **Placement.** LPT list scheduling onto GPU slots gives each trial a node, GPUs and expected
   times. The plan's ``dispatch`` is ``node`` (the default, what the DAG runs): a trial stays on
   its planned node — its precursor's — and at run time the node's free GPUs pull that node's
   trials in planned order, so a prior that is off by ±30% shifts work between the GPUs of a node
   instead of stretching a static schedule. ``dynamic`` (free GPUs of any node pull from one
   queue) is simulated for comparison; the DAG does not implement it.
6. **Warm start** (our addition; the paper does not describe it). A trial's process start-up
   (``setup_s``, ~19 s, calibrated) is pure CPU work, so each GPU slot starts its next trial's
   process ``warm_next_after_s`` after the running trial began inferring — when the running trial
   is expected to have ``warm_start_lead`` set-up times left even if it is ``warm_start_margin``
   (35%) faster than its prior. The next trial then holds the GPU only for the shared-memory load
   (1.4 s for 7B) before inferring. Without it every trial holds a GPU through its start-up, which
   makes the fine decomposition that robustness needs expensive (see the benchmark's ablation).
   The DAG's local backend implements it: an inference task does its set-up before taking a GPU
   lease of its node, and the GPU pool admits two tasks per GPU slot (``acme.evaluation.trial_steps``).
   The kubernetes backend cannot (the kubelet allocates GPUs when the pod starts): there the
   "no warm start" figures apply.

Granularity defaults (``max_trial_fraction`` 0.12, ``batch_fraction`` 0.15) were chosen on the
bundled suite by simulating 1 and 4 nodes with exact and ±30%-perturbed priors; coarser trials
lose balance when priors are wrong, finer ones multiply trials (each one Airflow task).

The ``Plan`` is plain data (``to_dict``/``to_json``/``from_json``) for the Airflow DAG to map over:
one mapped task per precursor, one per trial.
"""

from __future__ import annotations

import heapq
import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any

from acme.errors import ConfigError, InputError
from acme.evaluation.layout import json_object
from acme.evaluation.priors import (
    Hardware,
    ModelSpec,
    RuntimePriors,
    TrialOverheads,
    model_load_s,
    parse_model_size,
    remote_fetch_s,
)
from acme.evaluation.suite import EvalDataset, Suite

PLAN_FORMAT_VERSION = 1


@dataclass(frozen=True)
class PlannerConfig:
    """How finely the coordinator decomposes the suite (see module doc, step 1)."""

    max_trial_fraction: float = 0.12
    batch_fraction: float = 0.15
    min_trial_s: float = 60.0
    min_slice_samples: int = 16
    # "node": trials stay on their planned node, whose free GPUs pull them in order — what the
    # evaluate_checkpoint DAG does (trials pinned to their precursor's node, any free GPU lease of it).
    dispatch: str = "node"
    warm_start: bool = True
    # Warm start: the slot starts its next trial's process (set-up only, no GPU) when the running
    # trial has done (1 - margin) of its expected GPU time minus `lead` set-up times, so that a
    # trial up to `margin` shorter than its prior still finds the next one warm.
    warm_start_lead: float = 1.5
    warm_start_margin: float = 0.35

    def __post_init__(self) -> None:
        if not 0.0 < self.max_trial_fraction <= 1.0:
            raise ConfigError(f"max_trial_fraction must be in (0, 1], got {self.max_trial_fraction}")
        if not 0.0 < self.batch_fraction <= 1.0:
            raise ConfigError(f"batch_fraction must be in (0, 1], got {self.batch_fraction}")
        if self.min_slice_samples < 1:
            raise ConfigError(f"min_slice_samples must be at least 1, got {self.min_slice_samples}")
        if self.dispatch not in ("dynamic", "node", "static"):
            raise ConfigError(f"dispatch must be 'dynamic', 'node' or 'static', got {self.dispatch!r}")


@dataclass(frozen=True)
class DatasetSlice:
    """Samples ``[start, stop)`` of one dataset, with the priors' expected times for them."""

    dataset: str
    start: int
    stop: int
    metric_kind: str
    expected_infer_s: float
    expected_metric_s: float

    @property
    def n_samples(self) -> int:
        return self.stop - self.start


@dataclass(frozen=True)
class Trial:
    """One evaluation job: load the model once, infer its slices in order, hand metrics to the CPU pool."""

    trial_id: str
    order: int
    node: int
    gpus: tuple[int, ...]
    slices: tuple[DatasetSlice, ...]
    warm_next_after_s: float | None
    expected_start_s: float
    expected_gpu_release_s: float
    expected_end_s: float

    @property
    def expected_infer_s(self) -> float:
        return sum(s.expected_infer_s for s in self.slices)

    @property
    def expected_metric_s(self) -> float:
        return sum(s.expected_metric_s for s in self.slices)

    @property
    def n_samples(self) -> int:
        return sum(s.n_samples for s in self.slices)


@dataclass(frozen=True)
class Precursor:
    """The per-node job that copies the checkpoint into node shared memory before trials load it."""

    node: int
    checkpoint_bytes: float
    expected_ready_s: float


@dataclass(frozen=True)
class Plan:
    """Everything the DAG needs to run one decoupled evaluation, JSON-serializable."""

    model: str
    model_params: float
    nodes: int
    gpus_per_node: int
    gpus_per_trial: int
    dispatch: str
    warm_start: bool
    max_trial_s: float
    expected_makespan_s: float
    precursors: tuple[Precursor, ...]
    trials: tuple[Trial, ...]

    @property
    def slots(self) -> int:
        return self.nodes * (self.gpus_per_node // self.gpus_per_trial)

    def trials_in_order(self) -> list[Trial]:
        return sorted(self.trials, key=lambda t: t.order)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["format"] = "acme.evaluation.plan"
        data["version"] = PLAN_FORMAT_VERSION
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1)

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "<plan>") -> Plan:
        if data.get("format") != "acme.evaluation.plan" or data.get("version") != PLAN_FORMAT_VERSION:
            raise InputError(source, f"not an acme.evaluation.plan version {PLAN_FORMAT_VERSION}")
        try:
            trials = tuple(
                Trial(
                    trial_id=t["trial_id"],
                    order=int(t["order"]),
                    node=int(t["node"]),
                    gpus=tuple(int(g) for g in t["gpus"]),
                    slices=tuple(DatasetSlice(**s) for s in t["slices"]),
                    warm_next_after_s=None
                    if t["warm_next_after_s"] is None
                    else float(t["warm_next_after_s"]),
                    expected_start_s=float(t["expected_start_s"]),
                    expected_gpu_release_s=float(t["expected_gpu_release_s"]),
                    expected_end_s=float(t["expected_end_s"]),
                )
                for t in data["trials"]
            )
            precursors = tuple(Precursor(**p) for p in data["precursors"])
            return cls(
                model=str(data["model"]),
                model_params=float(data["model_params"]),
                nodes=int(data["nodes"]),
                gpus_per_node=int(data["gpus_per_node"]),
                gpus_per_trial=int(data["gpus_per_trial"]),
                dispatch=str(data["dispatch"]),
                warm_start=bool(data["warm_start"]),
                max_trial_s=float(data["max_trial_s"]),
                expected_makespan_s=float(data["expected_makespan_s"]),
                precursors=precursors,
                trials=trials,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(source, f"malformed plan ({exc!r})") from None

    @classmethod
    def from_json(cls, text: str, source: str = "<plan>") -> Plan:
        return cls.from_dict(json_object(text, source, "plan"), source)


@dataclass
class _Piece:
    """A slice being planned (mutable while trials are formed)."""

    dataset: EvalDataset
    start: int
    stop: int
    infer_s: float
    metric_s: float
    preprocess_s: float

    @property
    def gpu_s(self) -> float:
        return self.infer_s + self.preprocess_s


@dataclass
class _Draft:
    pieces: list[_Piece] = field(default_factory=list)

    @property
    def gpu_s(self) -> float:
        return sum(p.gpu_s for p in self.pieces)


def build_plan(
    suite: Suite,
    nodes: int,
    model: ModelSpec | str = "7B",
    priors: RuntimePriors | None = None,
    overheads: TrialOverheads | None = None,
    config: PlannerConfig | None = None,
) -> Plan:
    """Decompose, order and place the suite's trials on ``nodes`` nodes of ``priors.hardware``."""
    if nodes < 1:
        raise ConfigError(f"nodes must be at least 1, got {nodes}")
    model = parse_model_size(model)
    priors = priors or RuntimePriors()
    hardware = priors.hardware
    overheads = overheads or priors.trial_overheads(model)
    config = config or PlannerConfig()
    gpus_per_trial = model.gpus_per_trial(hardware.gpu_memory_gb, max_gpus=hardware.gpus_per_node)
    slots = nodes * (hardware.gpus_per_node // gpus_per_trial)

    per_sample = {d.name: priors.runtime(d, model) for d in suite.datasets}
    total_gpu_s = sum(
        d.n_samples * (per_sample[d.name].infer_s_per_sample + overheads.preprocess_s_per_sample)
        for d in suite.datasets
    )
    startup = _trial_startup_s(model, hardware, overheads)
    expected = total_gpu_s / slots + startup
    plan = None
    # Two passes: the first plan's makespan (with its per-trial overheads) resizes the trials.
    for _ in range(2):
        max_trial_s = max(config.min_trial_s, config.max_trial_fraction * expected)
        drafts = _decompose(suite, per_sample, overheads, max_trial_s, config)
        plan = _place(drafts, model, hardware, overheads, nodes, gpus_per_trial, max_trial_s, config)
        expected = plan.expected_makespan_s
    assert plan is not None
    return plan


def _trial_startup_s(model: ModelSpec, hardware: Hardware, overheads: TrialOverheads) -> float:
    return overheads.setup_s + model_load_s(model, hardware, overheads)


def _decompose(suite, per_sample, overheads, max_trial_s, config) -> list[_Draft]:
    """Split long datasets into equal sample ranges; batch small pieces (first-fit decreasing)."""
    pieces: list[_Piece] = []
    for d in suite.datasets:
        runtime = per_sample[d.name]
        gpu_per_sample = runtime.infer_s_per_sample + overheads.preprocess_s_per_sample
        parts = max(1, math.ceil(d.n_samples * gpu_per_sample / max_trial_s))
        parts = min(parts, max(1, d.n_samples // config.min_slice_samples))
        bounds = [round(i * d.n_samples / parts) for i in range(parts + 1)]
        for start, stop in zip(bounds, bounds[1:], strict=False):
            n = stop - start
            pieces.append(
                _Piece(
                    d,
                    start,
                    stop,
                    n * runtime.infer_s_per_sample,
                    n * runtime.metric_s_per_sample,
                    n * overheads.preprocess_s_per_sample,
                )
            )
    capacity = config.batch_fraction * max_trial_s
    drafts = [_Draft([p]) for p in pieces if p.gpu_s >= capacity]
    bins: list[_Draft] = []
    for piece in sorted((p for p in pieces if p.gpu_s < capacity), key=lambda p: -p.gpu_s):
        target = next((b for b in bins if b.gpu_s + piece.gpu_s <= capacity), None)
        if target is None:
            target = _Draft()
            bins.append(target)
        target.pieces.append(piece)
    return drafts + bins


def _place(drafts, model, hardware, overheads, nodes, gpus_per_trial, max_trial_s, config) -> Plan:
    """LPT list scheduling of trials by critical path onto GPU slots, with expected times."""
    precursor_ready = remote_fetch_s(model, hardware, concurrent=1)
    for draft in drafts:
        # Longest metric first inside a trial: it overlaps the trial's remaining inference.
        draft.pieces.sort(key=lambda p: (-p.metric_s, p.dataset.name, p.start))

    def critical_path(draft: _Draft) -> float:
        elapsed, finish = 0.0, 0.0
        for piece in draft.pieces:
            elapsed += piece.gpu_s
            finish = max(finish, elapsed + overheads.metric_task_setup_s + piece.metric_s)
        return max(finish, elapsed)

    ranked = sorted(drafts, key=lambda d: (-critical_path(d), d.pieces[0].dataset.name, d.pieces[0].start))
    slots_per_node = hardware.gpus_per_node // gpus_per_trial
    # Slots interleave nodes (node 0 GPU 0, node 1 GPU 0, …) so the first wave spreads over nodes.
    # Each entry: (GPU free at, slot index, node, slot, when the slot warm-starts its next trial).
    free = [(0.0, g * nodes + n, n, g, None) for g in range(slots_per_node) for n in range(nodes)]
    heapq.heapify(free)
    lead = config.warm_start_lead * overheads.setup_s
    trials: list[Trial] = []
    makespan = 0.0
    for order, draft in enumerate(ranked):
        free_at, index, node, slot, warm_at = heapq.heappop(free)
        started = warm_at if warm_at is not None and warm_at <= free_at else free_at
        clock = max(free_at, started + overheads.setup_s, precursor_ready) + model_load_s(
            model, hardware, overheads
        )
        inference_start = clock
        warm_after = (
            max(0.0, (1.0 - config.warm_start_margin) * draft.gpu_s - lead) if config.warm_start else None
        )
        end = clock
        slices = []
        for piece in draft.pieces:
            clock += piece.gpu_s
            end = max(end, clock + overheads.metric_task_setup_s + piece.metric_s)
            slices.append(
                DatasetSlice(
                    piece.dataset.name,
                    piece.start,
                    piece.stop,
                    piece.dataset.metric_kind,
                    round(piece.infer_s, 6),
                    round(piece.metric_s, 6),
                )
            )
        end = max(end, clock)
        makespan = max(makespan, end)
        first = slices[0]
        trials.append(
            Trial(
                trial_id=f"t{order:04d}-{first.dataset}-{first.start}",
                order=order,
                node=node,
                gpus=tuple(range(slot * gpus_per_trial, (slot + 1) * gpus_per_trial)),
                slices=tuple(slices),
                warm_next_after_s=None if warm_after is None else round(warm_after, 6),
                expected_start_s=round(free_at, 6),
                expected_gpu_release_s=round(clock, 6),
                expected_end_s=round(end, 6),
            )
        )
        next_warm = None if warm_after is None else inference_start + warm_after
        heapq.heappush(free, (clock, index, node, slot, next_warm))
    precursors = tuple(Precursor(n, model.checkpoint_bytes, round(precursor_ready, 6)) for n in range(nodes))
    return Plan(
        model=model.name,
        model_params=model.params,
        nodes=nodes,
        gpus_per_node=hardware.gpus_per_node,
        gpus_per_trial=gpus_per_trial,
        dispatch=config.dispatch,
        warm_start=config.warm_start,
        max_trial_s=round(max_trial_s, 6),
        expected_makespan_s=round(makespan, 6),
        precursors=precursors,
        trials=tuple(trials),
    )
