"""The steps of one trial: GPU inference (outputs to the lake, GPU freed) and its CPU metric.

Inference (``run_inference``), in the order that implements **warm start** (see
``include/eval/ASSUMPTIONS.md``): the trial's process first does everything that needs no GPU —
imports, reading its samples, building prompts (the simulator's ``setup_s``) — and only then takes
a GPU lease of its node, loads the model from node shared memory, infers its slices, publishes its
outputs and releases the lease. The GPU pool admits two inference tasks per GPU slot, so while one
trial holds a GPU the next one of that node is already set up and waits only for the lease: the
GPU is held for load + inference, as the simulator's warm-started trials are.

GPU leases are ``flock``-ed files ``<shm_dir>/.gpu-leases/node-<n>/slot-<k>.lock`` (one per slot of
``gpus_per_trial`` GPUs): a lease is released when its process exits, even on a crash. A trial
prefers its planned slot and takes any free slot of its node otherwise (dispatch within a node
is dynamic).

Metric (``run_metric``): reads the trial's outputs from the lake, the references from the dataset,
scores each slice (``acme.evaluation.scoring``) and publishes ``metrics/<trial>.json``.

Both steps are idempotent: a trial whose outputs (or metrics) exist is skipped; every object is
published whole (outputs last, so their presence means the inference finished).
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from acme.errors import InputError
from acme.evaluation.datasets import prompts_for, read_samples, sample_id
from acme.evaluation.layout import EvalRun
from acme.evaluation.planner import Plan, Trial
from acme.evaluation.precursor import loaded_model_file
from acme.lake import Lake


class GpuLeaseTimeout(TimeoutError):
    """No GPU slot of the node became free in time (transient: the task is retried)."""


def load_plan(lake: Lake, run: EvalRun) -> Plan:
    if not lake.exists(run.plan_key):
        raise InputError(lake.url(run.plan_key), "no plan: the plan task has not run for this evaluation")
    return Plan.from_json(lake.read_bytes(run.plan_key).decode(), source=lake.url(run.plan_key))


def find_trial(plan: Plan, trial_id: str) -> Trial:
    for trial in plan.trials:
        if trial.trial_id == trial_id:
            return trial
    raise InputError("plan", f"no trial {trial_id!r} in the plan")


@contextlib.contextmanager
def gpu_lease(
    shm_dir: Path, node: int, slots: int, preferred: int = 0, timeout_s: float = 21600.0
) -> Iterator[int]:
    """Hold one GPU slot of ``node`` (the preferred one if free); yields the slot number."""
    folder = Path(shm_dir) / ".gpu-leases" / f"node-{node}"
    folder.mkdir(parents=True, exist_ok=True)
    order = [preferred % slots] + [s for s in range(slots) if s != preferred % slots]
    deadline = time.monotonic() + timeout_s
    while True:
        for slot in order:
            handle = open(folder / f"slot-{slot}.lock", "a")  # noqa: SIM115 - held for the lease
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.close()
                continue
            try:
                yield slot
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
                handle.close()
            return
        if time.monotonic() > deadline:
            raise GpuLeaseTimeout(f"node {node}: no free GPU slot of {slots} within {timeout_s:.0f} s")
        time.sleep(0.05)


def _free_accelerator() -> None:
    """Drop the model's memory; on a CUDA host also return the cached GPU memory."""
    gc.collect()
    import torch

    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def run_inference(
    lake: Lake,
    run: EvalRun,
    trial_id: str,
    shm_dir: Path,
    data_dir: Path,
    lease_timeout_s: float = 21600.0,
) -> dict[str, Any]:
    """Infer one trial's slices with the model in node shared memory; outputs to the lake."""
    outputs_key = run.outputs_key(trial_id)
    if lake.exists(outputs_key):
        return {"trial_id": trial_id, "skipped": True, "outputs": lake.url(outputs_key)}
    started = time.perf_counter()
    plan = load_plan(lake, run)
    trial = find_trial(plan, trial_id)
    # Set-up that needs no GPU (warm start): framework import, samples, prompts.
    import torch  # noqa: F401 - the framework's start-up belongs to the set-up, before the lease

    from acme.evaluation.tiny_model import TinyLookupModel

    work = []
    for piece in trial.slices:
        samples = read_samples(data_dir, piece.dataset, piece.metric_kind, piece.start, piece.stop)
        work.append((piece, [(sample_id(s), prompts_for(s, piece.metric_kind)) for s in samples]))
    setup_s = time.perf_counter() - started

    slots = plan.gpus_per_node // plan.gpus_per_trial
    preferred = trial.gpus[0] // plan.gpus_per_trial
    waited = time.perf_counter()
    with gpu_lease(shm_dir, trial.node, slots, preferred, lease_timeout_s) as slot:
        lease_wait_s = time.perf_counter() - waited
        loading = time.perf_counter()
        model = TinyLookupModel.load(loaded_model_file(shm_dir, run.model_id))
        load_s = time.perf_counter() - loading
        lines, slice_times = [], []
        for piece, prompts in work:
            inferring = time.perf_counter()
            for index, (sid, texts) in enumerate(prompts, start=piece.start):
                record = {"dataset": piece.dataset, "index": index, "id": sid, "kind": piece.metric_kind}
                if piece.metric_kind == "ppl":
                    scores = [model.loglikelihood(text) for text in texts]
                    record.update(scores=scores, choice=max(range(len(scores)), key=scores.__getitem__))
                else:
                    record["answer"] = model.generate(texts[0])
                lines.append(json.dumps(record, sort_keys=True))
            slice_times.append(
                {
                    "dataset": piece.dataset,
                    "start": piece.start,
                    "stop": piece.stop,
                    "n_samples": piece.n_samples,
                    "infer_s": time.perf_counter() - inferring,
                }
            )
        del model
        _free_accelerator()
    timings = {
        "trial_id": trial_id,
        "node": trial.node,
        "slot": slot,
        "setup_s": setup_s,
        "lease_wait_s": lease_wait_s,
        "load_s": load_s,
        "model_bytes": loaded_model_file(shm_dir, run.model_id).stat().st_size,
        "slices": slice_times,
    }
    lake.write_json(run.timings_key(trial_id), timings)
    url = lake.write_bytes(outputs_key, ("\n".join(lines) + "\n").encode())
    return {"trial_id": trial_id, "skipped": False, "outputs": url, "samples": len(lines), "node": trial.node}


def run_metric(lake: Lake, run: EvalRun, trial_id: str, data_dir: Path, code_timeout_s: float = 10.0) -> dict:
    """Score one trial's outputs slice by slice; publish ``metrics/<trial>.json``."""
    from acme.evaluation.scoring import score_slice

    metrics_key = run.metrics_key(trial_id)
    if lake.exists(metrics_key):
        return {"trial_id": trial_id, "skipped": True, "metrics": lake.url(metrics_key)}
    plan = load_plan(lake, run)
    trial = find_trial(plan, trial_id)
    outputs_key = run.outputs_key(trial_id)
    if not lake.exists(outputs_key):
        raise InputError(lake.url(outputs_key), "no outputs: the trial's inference has not finished")
    rows = [json.loads(line) for line in lake.read_bytes(outputs_key).decode().splitlines() if line]
    slices = []
    for piece in trial.slices:
        scoring = time.perf_counter()
        samples = read_samples(data_dir, piece.dataset, piece.metric_kind, piece.start, piece.stop)
        outputs = [
            r for r in rows if r["dataset"] == piece.dataset and piece.start <= r["index"] < piece.stop
        ]
        outputs.sort(key=lambda r: r["index"])
        where = f"{lake.url(outputs_key)} ({piece.dataset} {piece.start}..{piece.stop - 1})"
        scored = score_slice(piece.metric_kind, samples, outputs, code_timeout_s, where)
        slices.append(
            {
                "dataset": piece.dataset,
                "metric_kind": piece.metric_kind,
                "start": piece.start,
                "stop": piece.stop,
                **scored,
                "metric_s": time.perf_counter() - scoring,
            }
        )
    document = {"trial_id": trial_id, "slices": slices}
    url = lake.write_json(metrics_key, document)
    return {
        "trial_id": trial_id,
        "skipped": False,
        "metrics": url,
        "scores": {s["dataset"]: round(s["score"], 4) for s in slices},
    }
