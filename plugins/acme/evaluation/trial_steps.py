"""The steps of one trial: GPU inference (outputs to the lake, GPU freed) and its CPU metric.

Inference (``run_inference``), in the order that implements **warm start** (see
``include/eval/ASSUMPTIONS.md``): the trial's process first does everything that needs no GPU —
imports, reading its samples (the simulator's ``setup_s``) — and only then takes a GPU lease of
its node, loads the real model from node shared memory through the configured backend
(``acme.models``: llama.cpp, HF transformers, or an OpenAI-compatible server),
infers its slices, publishes its outputs (one line per sample, with its seconds and tokens) and
releases the lease. The GPU pool admits two inference tasks per GPU slot, so while one
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
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from acme.errors import InputError
from acme.evaluation.datasets import choice_requests, generation_prompt, read_samples, sample_id, stop_strings
from acme.evaluation.layout import EvalRun
from acme.evaluation.planner import DatasetSlice, Plan, Trial
from acme.evaluation.precursor import loaded_model_file
from acme.lake import Lake
from acme.models.backends import load_model
from acme.models.interface import Model


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


ModelLoader = Callable[[Path | None], Model]


def _configured_model(checkpoint: Path | None) -> Model:
    return load_model(checkpoint)


def infer_slice(
    model: Model, piece: DatasetSlice, samples: list[dict], batch_size: int, max_tokens: int
) -> list[dict[str, Any]]:
    """One output record per sample of ``piece``, with its measured seconds and tokens.

    ``ppl`` samples are scored option by option (``loglikelihood``); the chosen option is the one
    with the highest log-probability per character (``acc_norm``), the raw argmax is kept too.
    """
    records = []
    for first in range(0, len(samples), batch_size):
        chunk = samples[first : first + batch_size]
        before = (model.counter.prompt_tokens, model.counter.completion_tokens)
        started = time.perf_counter()
        if piece.metric_kind == "ppl":
            requests = [choice_requests(sample) for sample in chunk]
            flat = model.loglikelihood([r for rs in requests for r in rs])
            answers: list[dict[str, Any]] = []
            for rs in requests:
                scores, flat = flat[: len(rs)], flat[len(rs) :]
                per_char = [score / max(1, len(cont)) for score, (_, cont) in zip(scores, rs, strict=True)]
                answers.append(
                    {
                        "scores": scores,
                        "choice": max(range(len(scores)), key=per_char.__getitem__),
                        "choice_raw": max(range(len(scores)), key=scores.__getitem__),
                    }
                )
        else:
            kind = piece.metric_kind
            if batch_size == 1:
                generations = [
                    model.generate([generation_prompt(s, kind)], max_tokens, stop_strings(s, kind))[0]
                    for s in chunk
                ]
            else:  # one dataset has one layout, so the chunk shares its stop strings
                prompts = [generation_prompt(s, kind) for s in chunk]
                generations = model.generate(prompts, max_tokens, stop_strings(chunk[0], kind))
            answers = [{"answer": g.text, "completion_tokens": g.completion_tokens} for g in generations]
        seconds = (time.perf_counter() - started) / len(chunk)
        read = (model.counter.prompt_tokens - before[0]) / len(chunk)
        written = (model.counter.completion_tokens - before[1]) / len(chunk)
        for offset, (sample, answer) in enumerate(zip(chunk, answers, strict=True)):
            records.append(
                {
                    "dataset": piece.dataset,
                    "index": piece.start + first + offset,
                    "id": sample_id(sample),
                    "kind": piece.metric_kind,
                    "seconds": round(seconds, 6),
                    "tokens_read": round(read, 1),
                    "tokens_written": answer.pop("completion_tokens", round(written, 1)),
                    **answer,
                }
            )
    return records


def run_inference(
    lake: Lake,
    run: EvalRun,
    trial_id: str,
    shm_dir: Path,
    data_dir: Path,
    lease_timeout_s: float = 21600.0,
    load_model: ModelLoader | None = None,
) -> dict[str, Any]:
    """Infer one trial's slices with the model in node shared memory; outputs to the lake.

    ``load_model`` turns the checkpoint file in shared memory into a model (default: the
    configured backend, ``acme.models``; the ``openai`` backend gets None and talks to
    its server).
    """
    from acme import settings

    outputs_key = run.outputs_key(trial_id)
    if lake.exists(outputs_key):
        return {"trial_id": trial_id, "skipped": True, "outputs": lake.url(outputs_key)}
    started = time.perf_counter()
    plan = load_plan(lake, run)
    trial = find_trial(plan, trial_id)
    load_model = load_model or _configured_model
    remote = load_model is _configured_model and settings.evaluation().model_backend == "openai"
    batch_size, max_tokens = settings.evaluation().batch_size, settings.evaluation().max_new_tokens
    # Set-up that needs no GPU (warm start): framework import, samples.
    import torch  # noqa: F401 - the framework's start-up belongs to the set-up, before the lease

    work = [
        (piece, read_samples(data_dir, piece.dataset, piece.metric_kind, piece.start, piece.stop))
        for piece in trial.slices
    ]
    setup_s = time.perf_counter() - started

    slots = plan.gpus_per_node // plan.gpus_per_trial
    preferred = trial.gpus[0] // plan.gpus_per_trial
    waited = time.perf_counter()
    with gpu_lease(shm_dir, trial.node, slots, preferred, lease_timeout_s) as slot:
        lease_wait_s = time.perf_counter() - waited
        loading = time.perf_counter()
        checkpoint = None if remote else loaded_model_file(shm_dir, run.model_id)
        model = load_model(checkpoint)
        load_s = time.perf_counter() - loading
        lines: list[str] = []
        slice_times: list[dict[str, Any]] = []
        try:
            for piece, samples in work:
                inferring = time.perf_counter()
                tokens_before = (model.counter.prompt_tokens, model.counter.completion_tokens)
                records = infer_slice(model, piece, samples, batch_size, max_tokens)
                lines.extend(json.dumps(r, sort_keys=True) for r in records)
                slice_times.append(
                    {
                        "dataset": piece.dataset,
                        "start": piece.start,
                        "stop": piece.stop,
                        "n_samples": piece.n_samples,
                        "infer_s": time.perf_counter() - inferring,
                        "sample_s": [r["seconds"] for r in records],
                        "tokens_read": model.counter.prompt_tokens - tokens_before[0],
                        "tokens_written": model.counter.completion_tokens - tokens_before[1],
                    }
                )
        finally:
            model.close()
            description = model.description
            del model
            _free_accelerator()
    timings = {
        "trial_id": trial_id,
        "node": trial.node,
        "slot": slot,
        "model": description,
        "setup_s": setup_s,
        "lease_wait_s": lease_wait_s,
        "load_s": load_s,
        "model_bytes": _size(checkpoint),
        "slices": slice_times,
    }
    lake.write_json(run.timings_key(trial_id), timings)
    url = lake.write_bytes(outputs_key, ("\n".join(lines) + "\n").encode())
    return {"trial_id": trial_id, "skipped": False, "outputs": url, "samples": len(lines), "node": trial.node}


def _size(checkpoint: Path | None) -> int:
    """Bytes of the loaded checkpoint (a file, or a folder's files); 0 when a server holds the model."""
    if checkpoint is None:
        return 0
    if checkpoint.is_file():
        return checkpoint.stat().st_size
    return sum(p.stat().st_size for p in checkpoint.rglob("*") if p.is_file() and p.name != "_manifest.json")


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


def score_trial(lake: Lake, trial: dict[str, Any], trial_id: str | None = None) -> dict:
    """The DAG's score step: ``run_metric`` of a planned trial (a mapped trial dict) with the configured data."""
    from acme import settings

    configured = settings.evaluation()
    run = EvalRun(trial["model_id"], trial["run"])
    return run_metric(
        lake, run, trial_id or trial["trial_id"], configured.data_dir, configured.code_timeout_s
    )
