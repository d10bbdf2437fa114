"""Event-driven simulation of an evaluation on N GPU nodes, for the plan and for its baselines.

Why: the trial coordinator's value is a shorter makespan (checkpoint saved → all scores in), and
it can be measured without a GPU cluster by replaying the same work under the same rules.

What is modelled (every number is a parameter; defaults in ``acme.evaluation.priors``):

- **Nodes** of ``gpus_per_node`` GPUs (8) and ``cpu_cores_per_node`` cores (64). A trial of a model
  that needs k GPUs holds a slot of k GPUs of one node.
- **Trial life**: start (the GPU slot is held from here) → set-up (process start, imports; the
  calibrated ``setup_s``) → model load → for each slice: preprocessing (0.002 s/sample) then
  inference → metrics. Slices of a trial run one after another.
- **Model load**: *remote* = fetch ``params × 2`` bytes over the node NIC (25 Gb/s) then copy to the
  GPU (16 GB/s). The NIC is shared fairly (processor sharing) by all remote fetches running on the
  node at that moment, so eight trials starting together each take eight times longer.
  *shm* = read from node shared memory (10 GB/s) once the node's precursor has fetched the
  checkpoint (one remote fetch per node, started at time 0).
- **Metrics**: *on_gpu* (baselines) = after all inference of the trial, the metrics run in the same
  process, one core, while the GPU stays held; *cpu_pool* (decoupled) = each slice's metric is a
  CPU task (``metric_task_setup_s`` + metric time) queued FIFO on its node's cores as soon as the
  slice's inference ends, and the GPU is released after the last inference; *none* = inference
  only (OpenCompass's two-stage mode, metrics evaluated later).
- **Dispatch**: *dynamic* = free GPU slots pull jobs from one queue in order (at time 0 the slots
  take jobs GPU 0 of every node first, then GPU 1…); *node* = each job stays on its planned node
  and the node's free slots pull that node's jobs in order (what the ``evaluate_checkpoint`` DAG
  does: trials are pinned to their precursor's node and take any free GPU lease of it);
  *static* = each slot runs the jobs planned for it, in order.
- **Warm start** (decoupled plans only): ``warm_next_after_s`` after a job starts inferring, its
  slot takes the next job from the queue and runs that job's set-up on the CPU; when the GPU frees
  the warm job only loads from shared memory. If the running job releases the GPU before that
  moment, the next job starts cold (set-up with the GPU held).
- **True times**: a job's inference and metric seconds are the priors times a per-dataset factor
  (``true_time_factors``: uniform in [1 − e, 1 + e], seeded) — the planner plans on the priors,
  the simulation runs on the truth. Set-up, loads and preprocessing are not perturbed.

Not modelled: failures and retries, queueing behind other cluster jobs, stragglers within a
trial, contention for storage beyond the node NIC, memory limits of the CPU pool.

Baselines, simulated with the same parameters and the same true times:

- **naive**: one trial per dataset in submission order; every trial loads the model remotely and
  computes its metric on the GPU node after inference (GPU held).
- **OpenCompass-style**: OpenCompass's ``SizePartitioner`` (``opencompass/partitioners/size.py``,
  open-compass/opencompass): cost = samples × 20 for generation datasets, × answer options for
  loglikelihood (PPL) datasets, × 10 more for names matching ``bbh*``, ``gsm8k*``, ``math*``,
  ``strategyqa*``, ``agieval-jec*``, ``agieval-gaokao-mathcloze``, ``agieval-math``,
  ``*professional_law``; datasets costlier than ``max_task_size`` (40,000) are split into
  ``ceil(n / ceil(n / (40000 // factor)))``-sample chunks each counted as 40,000; chunks sorted by
  cost (descending, stable) and packed greedily into tasks while the next chunk still fits
  ("heuristic" strategy). Tasks run in that order on free GPUs; each loads the model remotely and
  computes its metrics after its inference with the GPU held. ``opencompass_two_stage_makespan``
  is the variant OpenCompass actually ships (inference tasks, then after all of them one CPU eval
  task per dataset), reported alongside for fairness.
- **Lower bound** of any decoupled schedule: ``max(gpu, cpu, chain)`` where
  ``first = max(setup_s, precursor fetch alone) + shm load`` is the earliest any slot can start
  inferring, ``gpu = first + Σ(inference + preprocessing) / slots + min over datasets (metric task
  set-up + one sample's metric)`` (all GPU work perfectly divided, only one set-up per slot, the
  last inference still needs its metric), ``cpu = first + Σ(metric + one task set-up per dataset) /
  cores`` and ``chain = first + max over datasets of one sample's preprocessing, inference, metric
  set-up and metric``.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import math
import random
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from acme.errors import ConfigError
from acme.evaluation.planner import Plan, PlannerConfig, build_plan
from acme.evaluation.priors import (
    Hardware,
    ModelSpec,
    RuntimePriors,
    TrialOverheads,
    default_overheads,
    model_load_s,
    parse_model_size,
    remote_fetch_s,
)
from acme.evaluation.suite import EvalDataset, Suite, read_suite

LOADS = ("remote", "shm")
DISPATCH_MODES = ("dynamic", "node", "static")
METRIC_MODES = ("on_gpu", "cpu_pool", "none")

# OpenCompass SizePartitioner defaults and its list of datasets whose generation cost is ×10.
OPENCOMPASS_MAX_TASK_SIZE = 40000
OPENCOMPASS_GEN_TASK_COEF = 20
OPENCOMPASS_HEAVY_PATTERNS = (
    "bbh*",
    "gsm8k*",
    "math*",
    "strategyqa*",
    "agieval-jec*",
    "agieval-gaokao-mathcloze",
    "agieval-math",
    "*professional_law",
)


@dataclass(frozen=True)
class SliceWork:
    """True seconds of one slice of a job."""

    dataset: str
    n_samples: int
    preprocess_s: float
    infer_s: float
    metric_s: float


@dataclass(frozen=True)
class Job:
    """A trial or task as the simulator runs it."""

    job_id: str
    slices: tuple[SliceWork, ...]
    load: str
    metrics: str
    node: int | None = None
    slot: int | None = None
    warm_next_after_s: float | None = None  # warm start: seconds after inference starts

    def __post_init__(self) -> None:
        if self.load not in LOADS:
            raise ConfigError(f"job {self.job_id}: load {self.load!r} is not one of {LOADS}")
        if self.metrics not in METRIC_MODES:
            raise ConfigError(f"job {self.job_id}: metrics {self.metrics!r} is not one of {METRIC_MODES}")
        if not self.slices:
            raise ConfigError(f"job {self.job_id} has no slice")


@dataclass(frozen=True)
class ClusterSpec:
    """The simulated cluster: nodes, their hardware, the model and per-trial overheads."""

    nodes: int
    model: ModelSpec
    hardware: Hardware = field(default_factory=Hardware)
    overheads: TrialOverheads | None = None

    def __post_init__(self) -> None:
        if self.nodes < 1:
            raise ConfigError(f"nodes must be at least 1, got {self.nodes}")
        if self.overheads is None:
            object.__setattr__(self, "overheads", default_overheads(self.hardware))

    @property
    def costs(self) -> TrialOverheads:
        """The per-trial overheads (set by ``__post_init__`` when not given)."""
        assert self.overheads is not None
        return self.overheads

    @property
    def gpus_per_trial(self) -> int:
        return self.model.gpus_per_trial(self.hardware.gpu_memory_gb, max_gpus=self.hardware.gpus_per_node)

    @property
    def slots_per_node(self) -> int:
        return self.hardware.gpus_per_node // self.gpus_per_trial

    @property
    def slots(self) -> int:
        return self.nodes * self.slots_per_node


@dataclass
class JobRecord:
    """What happened to one job: when it held its GPUs and when its last metric ended."""

    job_id: str
    node: int
    slot: int
    start_s: float
    gpu_acquire_s: float = math.nan
    inference_start_s: float = math.nan
    gpu_release_s: float = math.nan
    end_s: float = math.nan
    infer_s: float = 0.0
    metric_s: float = 0.0
    pending_metrics: int = 0
    setup_done: bool = False

    @property
    def held_s(self) -> float:
        return self.gpu_release_s - self.gpu_acquire_s


@dataclass
class SimResult:
    """The simulated makespan and the per-job timeline."""

    makespan_s: float
    records: list[JobRecord]
    precursor_ready_s: dict[int, float]
    gpus_per_trial: int

    @property
    def gpu_idle_share(self) -> float:
        """Share of GPU-held time not spent inferring (set-up, loads, metrics on the GPU)."""
        held = sum(r.held_s for r in self.records)
        return 0.0 if held == 0 else 1.0 - sum(r.infer_s for r in self.records) / held


class _Engine:
    """Discrete-event engine: timed events plus fluid NIC flows and FIFO CPU pools per node."""

    def __init__(self, cluster: ClusterSpec, jobs: Sequence[Job], dispatch: str, warm_start: bool = False):
        if dispatch not in DISPATCH_MODES:
            raise ConfigError(f"dispatch must be one of {', '.join(DISPATCH_MODES)}, got {dispatch!r}")
        self.cluster = cluster
        self.hw = cluster.hardware
        self.overheads = cluster.costs
        self.model = cluster.model
        self.now = 0.0
        self.events: list = []
        self.sequence = itertools.count()
        nodes = range(cluster.nodes)
        self.flows: dict[int, list[list]] = {n: [] for n in nodes}
        self.free_cores = {n: self.hw.cpu_cores_per_node for n in nodes}
        self.cpu_queue: dict[int, deque] = {n: deque() for n in nodes}
        self.shm_ready: dict[int, float] = {}
        self.shm_waiters: dict[int, list[Callable[[], None]]] = {n: [] for n in nodes}
        self.records: list[JobRecord] = []
        self.dispatch = dispatch
        self.slot_order = [(n, s) for s in range(cluster.slots_per_node) for n in nodes]
        if dispatch == "dynamic":
            self.queue = deque(jobs)
        elif dispatch == "node":
            self.node_queues: dict[int, deque] = {n: deque() for n in nodes}
            for job in jobs:
                if job.node not in self.node_queues:
                    raise ConfigError(f"node dispatch: job {job.job_id} has no valid node")
                self.node_queues[job.node].append(job)
        else:
            self.slot_queues: dict[tuple[int, int], deque] = {key: deque() for key in self.slot_order}
            for job in jobs:
                if job.node is None or job.slot is None or (job.node, job.slot) not in self.slot_queues:
                    raise ConfigError(f"static dispatch: job {job.job_id} has no valid node/slot")
                self.slot_queues[(job.node, job.slot)].append(job)
        self.needs_precursor = any(job.load == "shm" for job in jobs)
        self.warm_start = warm_start
        self.warming: dict[tuple[int, int], tuple[Job, JobRecord]] = {}

    # --- primitives -------------------------------------------------------------------
    def after(self, delay: float, action: Callable[[], None]) -> None:
        heapq.heappush(self.events, (self.now + max(0.0, delay), next(self.sequence), action))

    def transfer(self, node: int, nbytes: float, done: Callable[[], None]) -> None:
        """Start a remote fetch on the node's NIC (fair share with the fetches running there)."""
        self.flows[node].append([float(nbytes), float(nbytes), done])

    def cpu_task(self, node: int, seconds: float, done: Callable[[], None]) -> None:
        if self.free_cores[node] > 0:
            self.free_cores[node] -= 1
            self.after(seconds, lambda: self._cpu_done(node, done))
        else:
            self.cpu_queue[node].append((seconds, done))

    def _cpu_done(self, node: int, done: Callable[[], None]) -> None:
        self.free_cores[node] += 1
        if self.cpu_queue[node]:
            seconds, waiting = self.cpu_queue[node].popleft()
            self.free_cores[node] -= 1
            self.after(seconds, lambda: self._cpu_done(node, waiting))
        done()

    def _advance(self, until: float) -> None:
        elapsed = until - self.now
        if elapsed > 0:
            for flows in self.flows.values():
                if flows:
                    rate = self.hw.nic_bytes_s / len(flows)
                    for flow in flows:
                        flow[0] -= rate * elapsed
        self.now = max(self.now, until)

    def _next_flow_end(self) -> tuple[float, int | None]:
        best, best_node = math.inf, None
        for node, flows in self.flows.items():
            if flows:
                remaining = max(0.0, min(f[0] for f in flows))
                at = self.now + remaining * len(flows) / self.hw.nic_bytes_s
                if at < best:
                    best, best_node = at, node
        return best, best_node

    def _finish_flows(self, node: int) -> None:
        flows = self.flows[node]
        smallest = min(f[0] for f in flows)
        finished = [f for f in flows if f[0] <= smallest + 1e-9 * f[1]]
        done = {id(f) for f in finished}
        self.flows[node] = [f for f in flows if id(f) not in done]
        for flow in finished:
            flow[2]()

    def run(self) -> None:
        if self.needs_precursor:
            for node in self.flows:
                self.transfer(
                    node, self.model.checkpoint_bytes, functools.partial(self._precursor_done, node)
                )
        for node, slot in self.slot_order:
            self._dispatch(node, slot)
        while True:
            next_event = self.events[0][0] if self.events else math.inf
            flow_end, flow_node = self._next_flow_end()
            if next_event == math.inf and flow_end == math.inf:
                break
            if flow_end <= next_event:
                assert flow_node is not None  # a finite flow end belongs to a node
                self._advance(flow_end)
                self._finish_flows(flow_node)
            else:
                at, _, action = heapq.heappop(self.events)
                self._advance(at)
                action()

    # --- jobs -------------------------------------------------------------------------
    def _precursor_done(self, node: int) -> None:
        self.shm_ready[node] = self.now
        waiters, self.shm_waiters[node] = self.shm_waiters[node], []
        for wake in waiters:
            wake()

    def _next_job(self, node: int, slot: int) -> Job | None:
        if self.dispatch == "dynamic":
            queue = self.queue
        elif self.dispatch == "node":
            queue = self.node_queues[node]
        else:
            queue = self.slot_queues[(node, slot)]
        return queue.popleft() if queue else None

    def _dispatch(self, node: int, slot: int) -> None:
        """The slot's GPUs are free: hand them to its warming trial, or start the next job."""
        warm = self.warming.pop((node, slot), None)
        if warm is not None:
            job, record = warm
            record.gpu_acquire_s = self.now
            if record.setup_done:
                self._load(job, record)
            return
        nxt = self._next_job(node, slot)
        if nxt is None:
            return
        job = nxt
        record = JobRecord(job.job_id, node, slot, start_s=self.now, gpu_acquire_s=self.now)
        self.records.append(record)
        self.after(self.overheads.setup_s, lambda: self._setup_done(job, record))

    def _warm_if_holding(self, record: JobRecord) -> None:
        if math.isnan(record.gpu_release_s):  # released early: the next trial already started cold
            self._warm_next(record.node, record.slot)

    def _warm_next(self, node: int, slot: int) -> None:
        """Warm start: the slot's next trial starts its process while the current one infers."""
        if (node, slot) in self.warming:
            return
        nxt = self._next_job(node, slot)
        if nxt is None:
            return
        job = nxt
        record = JobRecord(job.job_id, node, slot, start_s=self.now)
        self.records.append(record)
        self.warming[(node, slot)] = (job, record)
        self.after(self.overheads.setup_s, lambda: self._setup_done(job, record))

    def _setup_done(self, job: Job, record: JobRecord) -> None:
        record.setup_done = True
        if not math.isnan(record.gpu_acquire_s):
            self._load(job, record)

    def _load(self, job: Job, record: JobRecord) -> None:
        loaded = lambda: self._infer(job, record, 0)  # noqa: E731
        if job.load == "remote":
            h2d = self.model.checkpoint_bytes / (self.hw.h2d_gbytes_s * 1e9)
            self.transfer(record.node, self.model.checkpoint_bytes, lambda: self.after(h2d, loaded))
            return
        from_shm = lambda: self.after(model_load_s(self.model, self.hw, self.overheads), loaded)  # noqa: E731
        if record.node in self.shm_ready:
            from_shm()
        else:
            self.shm_waiters[record.node].append(from_shm)

    def _infer(self, job: Job, record: JobRecord, index: int) -> None:
        if index == 0:
            record.inference_start_s = self.now
            if self.warm_start and job.warm_next_after_s is not None:
                self.after(job.warm_next_after_s, lambda: self._warm_if_holding(record))
        work = job.slices[index]
        record.infer_s += work.infer_s
        self.after(work.preprocess_s + work.infer_s, lambda: self._slice_done(job, record, index))

    def _slice_done(self, job: Job, record: JobRecord, index: int) -> None:
        work = job.slices[index]
        if job.metrics == "cpu_pool":
            record.pending_metrics += 1
            record.metric_s += work.metric_s
            seconds = self.overheads.metric_task_setup_s + work.metric_s
            self.cpu_task(record.node, seconds, lambda: self._metric_done(record))
        if index + 1 < len(job.slices):
            self._infer(job, record, index + 1)
        elif job.metrics == "on_gpu":
            record.metric_s = sum(s.metric_s for s in job.slices)
            self.cpu_task(record.node, record.metric_s, lambda: self._release(record))
        else:
            self._release(record)

    def _metric_done(self, record: JobRecord) -> None:
        record.pending_metrics -= 1
        self._maybe_finish(record)

    def _release(self, record: JobRecord) -> None:
        record.gpu_release_s = self.now
        self._maybe_finish(record)
        self._dispatch(record.node, record.slot)

    def _maybe_finish(self, record: JobRecord) -> None:
        if record.pending_metrics == 0 and not math.isnan(record.gpu_release_s):
            record.end_s = self.now


def simulate(
    cluster: ClusterSpec, jobs: Sequence[Job], dispatch: str = "dynamic", warm_start: bool = False
) -> SimResult:
    """Run ``jobs`` on ``cluster``; the makespan is when the last metric (or inference) ends."""
    if not jobs:
        raise ConfigError("nothing to simulate: no job")
    engine = _Engine(cluster, jobs, dispatch, warm_start)
    engine.run()
    unfinished = [r.job_id for r in engine.records if math.isnan(r.end_s)]
    if unfinished or len(engine.records) != len(jobs):
        raise RuntimeError(f"simulation ended with unfinished jobs: {unfinished[:5]}")
    return SimResult(
        makespan_s=max(r.end_s for r in engine.records),
        records=engine.records,
        precursor_ready_s=dict(engine.shm_ready),
        gpus_per_trial=cluster.gpus_per_trial,
    )


# --- true times -----------------------------------------------------------------------------
def true_time_factors(suite: Suite, prior_error: float = 0.0, seed: int = 0) -> dict[str, float]:
    """Per-dataset factor true/prior, uniform in [1 − e, 1 + e] (all 1.0 when e = 0)."""
    if not 0.0 <= prior_error < 1.0:
        raise ConfigError(f"prior_error must be in [0, 1), got {prior_error}")
    rng = random.Random(seed)
    return {
        d.name: (1.0 + rng.uniform(-prior_error, prior_error)) if prior_error else 1.0 for d in suite.datasets
    }


def _slice_work(dataset, start, stop, model, priors, overheads, factors) -> SliceWork:
    runtime = priors.runtime(dataset, model)
    factor = (factors or {}).get(dataset.name, 1.0)
    n = stop - start
    return SliceWork(
        dataset.name,
        n,
        n * overheads.preprocess_s_per_sample,
        n * runtime.infer_s_per_sample * factor,
        n * runtime.metric_s_per_sample * factor,
    )


def plan_jobs(plan: Plan, overheads: TrialOverheads, factors: dict[str, float] | None = None) -> list[Job]:
    """The plan's trials as decoupled jobs (shm loads, CPU-pool metrics), in dispatch order."""
    factors = factors or {}
    jobs = []
    for trial in plan.trials_in_order():
        slices = tuple(
            SliceWork(
                s.dataset,
                s.n_samples,
                s.n_samples * overheads.preprocess_s_per_sample,
                s.expected_infer_s * factors.get(s.dataset, 1.0),
                s.expected_metric_s * factors.get(s.dataset, 1.0),
            )
            for s in trial.slices
        )
        slot = trial.gpus[0] // plan.gpus_per_trial
        warm = trial.warm_next_after_s if plan.warm_start else None
        jobs.append(Job(trial.trial_id, slices, "shm", "cpu_pool", trial.node, slot, warm))
    return jobs


# --- baselines ------------------------------------------------------------------------------
def naive_jobs(
    suite: Suite, model: ModelSpec, priors: RuntimePriors, overheads: TrialOverheads, factors=None
):
    """One trial per dataset in submission order: remote load, metric on the GPU node."""
    return [
        Job(
            f"naive-{d.name}",
            (_slice_work(d, 0, d.n_samples, model, priors, overheads, factors),),
            "remote",
            "on_gpu",
        )
        for d in suite.datasets
    ]


def opencompass_factor(dataset: EvalDataset, gen_task_coef: int = OPENCOMPASS_GEN_TASK_COEF) -> int:
    """SizePartitioner.get_factor: ×20 for generation, ×options for PPL, ×10 for reasoning sets."""
    factor = (dataset.n_choices or 4) if dataset.metric_kind == "ppl" else gen_task_coef
    if any(fnmatchcase(dataset.name, pattern) for pattern in OPENCOMPASS_HEAVY_PATTERNS):
        factor *= 10
    return factor


def opencompass_partition(
    suite: Suite,
    max_task_size: int = OPENCOMPASS_MAX_TASK_SIZE,
    gen_task_coef: int = OPENCOMPASS_GEN_TASK_COEF,
    strategy: str = "heuristic",
) -> list[list[tuple[EvalDataset, int, int]]]:
    """OpenCompass SizePartitioner.partition for one model: tasks of (dataset, start, stop) chunks."""
    if strategy not in ("heuristic", "split"):
        raise ConfigError(f"strategy must be 'heuristic' or 'split', got {strategy!r}")
    costed = [(d.n_samples * opencompass_factor(d, gen_task_coef), d) for d in suite.datasets]
    chunks: list[tuple[int, tuple[EvalDataset, int, int]]] = []
    for cost, dataset in sorted(costed, key=lambda item: item[0], reverse=True):
        if cost > max_task_size:
            n = dataset.n_samples
            step = max(1, max_task_size // opencompass_factor(dataset, gen_task_coef))
            step = math.ceil(n / math.ceil(n / step))
            for start in range(0, n, step):
                chunks.append((max_task_size, (dataset, start, min(start + step, n))))
        else:
            chunks.append((cost, (dataset, 0, dataset.n_samples)))
    if strategy == "split":
        return [[chunk] for _, chunk in chunks]
    chunks.sort(key=lambda item: item[0], reverse=True)
    tasks, current, size = [], [], 0
    for index, (cost, chunk) in enumerate(chunks):
        size += cost
        current.append(chunk)
        if index == len(chunks) - 1 or size + chunks[index + 1][0] > max_task_size:
            tasks.append(current)
            current, size = [], 0
    return tasks


def opencompass_jobs(
    suite: Suite,
    model: ModelSpec,
    priors: RuntimePriors,
    overheads: TrialOverheads,
    factors=None,
    metrics: str = "on_gpu",
    **partition_options,
) -> list[Job]:
    """SizePartitioner tasks as jobs: remote load each, metrics after inference with the GPU held."""
    return [
        Job(
            f"oc-{index:04d}",
            tuple(_slice_work(d, start, stop, model, priors, overheads, factors) for d, start, stop in task),
            "remote",
            metrics,
        )
        for index, task in enumerate(opencompass_partition(suite, **partition_options))
    ]


def opencompass_two_stage_makespan(
    cluster: ClusterSpec, suite: Suite, priors: RuntimePriors, factors=None
) -> float:
    """OpenCompass as shipped: all inference tasks, then one CPU eval task per dataset (list-scheduled
    on every node's cores, each paying the metric task set-up)."""
    jobs = opencompass_jobs(suite, cluster.model, priors, cluster.costs, factors, metrics="none")
    inference_end = simulate(cluster, jobs).makespan_s
    evals = sorted(
        (
            cluster.costs.metric_task_setup_s
            + _slice_work(d, 0, d.n_samples, cluster.model, priors, cluster.costs, factors).metric_s
            for d in suite.datasets
        ),
        reverse=True,
    )
    cores = [inference_end] * (cluster.nodes * cluster.hardware.cpu_cores_per_node)
    heapq.heapify(cores)
    end = inference_end
    for seconds in evals:
        finish = heapq.heappop(cores) + seconds
        end = max(end, finish)
        heapq.heappush(cores, finish)
    return end


@dataclass(frozen=True)
class LowerBound:
    """The lower bound ``value_s``: the largest of its GPU, CPU and chain parts (module doc), which tell
    which resource bounds the makespan; each counts from ``first_inference_s``."""

    value_s: float
    gpu_bound_s: float
    cpu_bound_s: float
    chain_bound_s: float
    first_inference_s: float


def lower_bound(cluster: ClusterSpec, suite: Suite, priors: RuntimePriors, factors=None) -> LowerBound:
    """A lower bound on the makespan of any decoupled schedule of the suite (see module doc)."""
    overheads, model, hardware = cluster.costs, cluster.model, cluster.hardware
    first = max(overheads.setup_s, remote_fetch_s(model, hardware)) + model_load_s(model, hardware, overheads)
    works = [_slice_work(d, 0, d.n_samples, model, priors, overheads, factors) for d in suite.datasets]
    gpu_work = sum(w.preprocess_s + w.infer_s for w in works)
    one_sample_metric = [overheads.metric_task_setup_s + w.metric_s / w.n_samples for w in works]
    gpu = first + gpu_work / cluster.slots + min(one_sample_metric)
    cpu_work = sum(w.metric_s + overheads.metric_task_setup_s for w in works)
    cpu = first + cpu_work / (cluster.nodes * hardware.cpu_cores_per_node)
    chain = first + max(
        (w.preprocess_s + w.infer_s + w.metric_s) / w.n_samples + overheads.metric_task_setup_s for w in works
    )
    return LowerBound(max(gpu, cpu, chain), gpu, cpu, chain, first)


# --- one call for the command line --------------------------------------------------------
@dataclass(frozen=True)
class Comparison:
    """The plan and every simulated schedule of one configuration."""

    plan: Plan
    ours: SimResult | None
    naive: SimResult | None
    opencompass: SimResult | None
    bound: LowerBound
    warnings: tuple[str, ...]


def compare(
    suite: Suite,
    nodes: int,
    model: ModelSpec | str = "7B",
    hardware: Hardware | None = None,
    priors: RuntimePriors | None = None,
    overheads: TrialOverheads | None = None,
    config: PlannerConfig | None = None,
    prior_error: float = 0.0,
    seed: int = 0,
    simulate_runs: bool = True,
    dispatch: str | None = None,
) -> Comparison:
    """Plan the suite on the priors, then simulate the plan and both baselines on the true times."""
    model = parse_model_size(model)
    if priors is None:
        priors = RuntimePriors(hardware=hardware or Hardware())
    elif hardware is not None and hardware != priors.hardware:
        priors = replace(priors, hardware=hardware)
    hardware = priors.hardware
    overheads = overheads or priors.trial_overheads(model)
    cluster = ClusterSpec(nodes, model, hardware, overheads)
    plan = build_plan(suite, nodes, model, priors, overheads, config)
    factors = true_time_factors(suite, prior_error, seed)
    bound = lower_bound(cluster, suite, priors, factors)
    if not simulate_runs:
        return Comparison(plan, None, None, None, bound, tuple(suite.warnings))
    ours = simulate(cluster, plan_jobs(plan, overheads, factors), dispatch or plan.dispatch, plan.warm_start)
    naive = simulate(cluster, naive_jobs(suite, model, priors, overheads, factors))
    opencompass = simulate(cluster, opencompass_jobs(suite, model, priors, overheads, factors))
    return Comparison(plan, ours, naive, opencompass, bound, tuple(suite.warnings))


def plan_eval_cli(
    suite_csv: str | Path,
    nodes: int,
    gpus_per_node: int = 8,
    model_size: str = "7B",
    simulate: bool = True,
    prior_error: float = 0.0,
    seed: int = 0,
    priors_source: str | None = None,
) -> dict:
    """What ``python -m acme plan-eval`` prints: plan size, simulated makespans and speedups.

    Without ``simulate`` the makespan is the planner's own estimate and the baselines are not run
    (their fields and the speedups are None); the lower bound is always computed. With
    ``priors_source`` (a priors.json, or ``lake`` for the lake's ``eval/priors/priors.json``) the plan
    uses the per-sample times measured by earlier evaluations (``acme.evaluation.priors``) instead of
    the kind defaults; the output says which datasets were planned from measurements.
    """
    suite = read_suite(suite_csv)
    hardware = Hardware(gpus_per_node=gpus_per_node)
    priors = None if priors_source is None else measured_priors(priors_source, hardware)
    result = compare(
        suite,
        nodes,
        model_size,
        hardware=hardware,
        priors=priors,
        prior_error=prior_error,
        seed=seed,
        simulate_runs=simulate,
    )
    warnings = list(result.warnings)
    if result.ours is None or result.naive is None or result.opencompass is None:
        makespan, naive, opencompass = result.plan.expected_makespan_s, None, None
    else:
        makespan = result.ours.makespan_s
        naive, opencompass = result.naive.makespan_s, result.opencompass.makespan_s
    return {
        "trials": len(result.plan.trials),
        "makespan_s": round(makespan, 1),
        "naive_makespan_s": None if naive is None else round(naive, 1),
        "opencompass_makespan_s": None if opencompass is None else round(opencompass, 1),
        "lower_bound_s": round(result.bound.value_s, 1),
        "speedup_vs_naive": None if naive is None else round(naive / makespan, 3),
        "speedup_vs_opencompass": None if opencompass is None else round(opencompass / makespan, 3),
        "priors": "kind and suite defaults"
        if priors is None
        else {
            "source": priors_source,
            "measured": sorted(d.name for d in suite.datasets if d.name in priors.learned),
            "not_measured": sorted(d.name for d in suite.datasets if d.name not in priors.learned),
            **_trial_costs(priors, model_size),
        },
        "warnings": warnings,
    }


def _trial_costs(priors: RuntimePriors, model_size: str) -> dict[str, Any]:
    """The per-trial set-up and model load the plan used, and whether real trials measured them."""
    overheads = priors.trial_overheads(model_size)
    model = parse_model_size(model_size)
    return {
        "trial_setup_s": round(overheads.setup_s, 3),
        "trial_setup": "measured" if "setup_s" in priors.trial else "calibrated to the paper",
        "model_load_s": round(model_load_s(model, priors.hardware, overheads), 3),
        "model_load": "measured" if overheads.load_s is not None else "modelled from checkpoint bytes",
    }


def measured_priors(source: str, hardware: Hardware) -> RuntimePriors:
    """Priors learned by earlier evaluations: a priors.json file, or ``lake`` (``ACME_LAKE_URI``)."""
    from dataclasses import replace as replaced

    from acme.errors import InputError
    from acme.evaluation.layout import PRIORS_KEY

    if source == "lake":
        from acme.lake import open_lake

        lake = open_lake()
        data = lake.read_json(PRIORS_KEY)
        if data is None:
            raise InputError(lake.url(PRIORS_KEY), "no measured priors yet: run an evaluation first")
        priors = RuntimePriors.from_dict(data, source=lake.url(PRIORS_KEY))
    else:
        try:
            text = Path(source).read_text()
        except OSError as exc:
            raise InputError(source, f"cannot read the priors ({exc.strerror or exc})") from None
        priors = RuntimePriors.from_json(text, source=source)
    # The deployment's hardware, with the shared-memory load throughput that was measured.
    return replaced(priors, hardware=replaced(hardware, shm_read_gbytes_s=priors.hardware.shm_read_gbytes_s))
