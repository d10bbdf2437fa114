"""Evaluation samples: one JSON Lines file per dataset, read slice by slice.

A trial evaluates samples ``[start, stop)`` of a dataset; the metric step reads the same range for
the references. The fields a sample needs depend on its metric kind:

| kind | fields |
|---|---|
| ``match`` | ``id``, ``question``, ``answer`` (reference text; numeric answers compare as numbers) |
| ``ppl`` | ``id``, ``question``, ``choices`` (list of option texts), ``label`` (index of the right one) |
| ``code_exec`` | ``task_id``, ``prompt``, ``entry_point``, ``test`` (HumanEval layout: defines ``check``) |

A malformed file is an ``InputError`` naming the file, the line and the problem: a trial never
scores a silently shortened dataset.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from acme.errors import InputError

REQUIRED_FIELDS = {
    "match": ("id", "question", "answer"),
    "ppl": ("id", "question", "choices", "label"),
    "code_exec": ("task_id", "prompt", "entry_point", "test"),
}


def dataset_path(data_dir: Path, dataset: str) -> Path:
    return Path(data_dir) / f"{dataset}.jsonl"


def sample_id(sample: dict[str, Any]) -> str:
    return str(sample.get("id", sample.get("task_id")))


def read_samples(data_dir: Path, dataset: str, metric_kind: str, start: int, stop: int) -> list[dict]:
    """Samples ``[start, stop)`` of ``dataset``, each checked for its kind's fields."""
    if metric_kind not in REQUIRED_FIELDS:
        raise InputError(
            dataset, f"metric kind {metric_kind!r} has no runnable metric here (judge needs a model)"
        )
    path = dataset_path(data_dir, dataset)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise InputError(str(path), f"no data for dataset {dataset!r} (ACME_EVAL_DATA_DIR)") from None
    except UnicodeDecodeError as exc:
        raise InputError(str(path), f"not UTF-8 (byte {exc.start})") from None
    samples = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        if len(samples) >= stop:
            break
        try:
            sample = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(str(path), f"not JSON ({exc.msg})", line=number) from None
        if not isinstance(sample, dict):
            raise InputError(str(path), "sample is not a JSON object", line=number)
        missing = [f for f in REQUIRED_FIELDS[metric_kind] if f not in sample]
        if missing:
            raise InputError(str(path), f"{metric_kind} sample lacks {', '.join(missing)}", line=number)
        if metric_kind == "ppl" and not (
            isinstance(sample["choices"], list)
            and sample["choices"]
            and isinstance(sample["label"], int)
            and 0 <= sample["label"] < len(sample["choices"])
        ):
            raise InputError(
                str(path), "choices must be a non-empty list and label an index into it", line=number
            )
        samples.append(sample)
    if len(samples) < stop:
        raise InputError(
            str(path), f"has {len(samples)} samples; the plan asks for samples {start}..{stop - 1}"
        )
    return samples[start:stop]


def prompts_for(sample: dict[str, Any], metric_kind: str) -> list[str]:
    """What the model is shown: one prompt, or one per answer option for loglikelihood scoring."""
    if metric_kind == "code_exec":
        return [sample["prompt"]]
    if metric_kind == "ppl":
        return [f"Question: {sample['question']}\nAnswer: {choice}" for choice in sample["choices"]]
    return [f"Question: {sample['question']}\nAnswer:"]
