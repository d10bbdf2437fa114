"""Evaluation samples: one JSON Lines file per dataset, read slice by slice.

A trial evaluates samples ``[start, stop)`` of a dataset; the metric step reads the same range for
the references. The fields a sample needs depend on its metric kind:

| kind | fields |
|---|---|
| ``match`` | ``id``, ``question``, ``answer`` (reference text; numeric answers compare as numbers) |
| ``ppl`` | ``id``, ``question``, ``choices`` (list of option texts), ``label`` (index of the right one) |
| ``code_exec`` | ``task_id``, ``entry_point`` and either ``prompt`` + ``test`` (HumanEval layout: ``test`` defines ``check``) or ``text`` + ``test_list`` (MBPP layout: a task text and its ``assert`` lines) |

Optional: a ``ppl`` sample's ``context`` replaces the ``Question: … Answer:`` frame (HellaSwag
continues a sentence); its ``subject`` (MMLU) is named before the question, as lighteval's MMLU cloze
prompt does. A dataset named like an OpenCompass config (``gsm8k_gen_1d7fe4``,
``hellaswag_ppl``) reads ``<name>.jsonl`` when it exists, else the file of its base name
(``gsm8k.jsonl``).

What the model is asked (``generation_prompt``, ``choice_requests``) and where a generation stops
(``stop_strings``) are defined here once, for every backend.

A malformed file is an ``InputError`` naming the file, the line and the problem: a trial never
scores a silently shortened dataset.
"""

from __future__ import annotations

import glob
import json
import re
from pathlib import Path
from typing import Any

from acme.errors import InputError

REQUIRED_FIELDS = {
    "match": ("id", "question", "answer"),
    "ppl": ("id", "question", "choices", "label"),
    "code_exec": ("task_id", "entry_point"),
}
CODE_LAYOUTS = (("prompt", "test"), ("text", "test_list"))
_CONFIG_SUFFIX = re.compile(r"_(gen|ppl|ll|clp|llmjudge|judge)(_[0-9a-f]{6})?$", re.IGNORECASE)


def dataset_path(data_dir: Path, dataset: str) -> Path:
    """The file of ``dataset``: ``<name>.jsonl`` in ``data_dir`` or one sub-folder down (sorted);
    for an OpenCompass config name (``gsm8k_gen``) the base name's file (``gsm8k.jsonl``) when
    no file has the full name. Returns the (missing) direct path when nothing matches."""
    folder = Path(data_dir)
    names = [dataset]
    base = _CONFIG_SUFFIX.sub("", dataset)
    if base != dataset:
        names.append(base)
    for name in names:
        for candidate in [folder / f"{name}.jsonl", *sorted(folder.glob(f"*/{glob.escape(name)}.jsonl"))]:
            if candidate.is_file():
                return candidate
    return folder / f"{dataset}.jsonl"


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
    samples: list[dict] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        if len(samples) >= stop:
            break
        sample = _checked_sample(line, metric_kind, path, number)
        samples.append(sample)
    if len(samples) < stop:
        raise InputError(
            str(path), f"has {len(samples)} samples; the plan asks for samples {start}..{stop - 1}"
        )
    return samples[start:stop]


def _checked_sample(line: str, metric_kind: str, path: Path, number: int) -> dict[str, Any]:
    """One line as a sample with its kind's fields, else an InputError naming the file and line."""
    try:
        sample = json.loads(line)
    except json.JSONDecodeError as exc:
        raise InputError(str(path), f"not JSON ({exc.msg})", line=number) from None
    if not isinstance(sample, dict):
        raise InputError(str(path), "sample is not a JSON object", line=number)
    missing = [f for f in REQUIRED_FIELDS[metric_kind] if f not in sample]
    if metric_kind == "code_exec" and not any(all(f in sample for f in lay) for lay in CODE_LAYOUTS):
        missing.append("prompt and test (HumanEval) or text and test_list (MBPP)")
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
    return sample


def generation_prompt(sample: dict[str, Any], metric_kind: str) -> str:
    """The prompt of a ``match`` or ``code_exec`` sample, completed by the model (zero-shot)."""
    if metric_kind == "code_exec":
        if "prompt" in sample:  # HumanEval: complete the function body
            return sample["prompt"]
        tests = "\n".join(sample["test_list"])  # MBPP's own prompt format (Austin et al., 2021)
        return (
            f"You are an expert Python programmer, and here is your task: {sample['text']} "
            f"Your code should pass these tests:\n\n{tests}\n[BEGIN]\n"
        )
    return f"Question: {sample['question']}\nAnswer:"


def stop_strings(sample: dict[str, Any], metric_kind: str) -> list[str]:
    """Where a generated answer ends (the usual stops of HumanEval, MBPP and QA harnesses)."""
    if metric_kind == "code_exec":
        if "prompt" in sample:
            return ["\ndef ", "\nclass ", "\nif __name__", "\nprint(", "\n#"]
        return ["[DONE]", "\nassert ", "\n\n\n"]
    return ["\n\n", "\nQuestion:"]


def choice_requests(sample: dict[str, Any]) -> list[tuple[str, str]]:
    """One ``(context, continuation)`` per answer option of a ``ppl`` sample (cloze scoring).

    A sample with a ``subject`` (MMLU) gets lighteval's MMLU cloze frame, the prompt of the published
    SmolLM2 figures: ``The following are questions about <subject>.`` before the question. Without that
    line SmolLM2-135M scored 1 of 23 of our MMLU items (below chance); with it 3 of 23 (measured
    2026-12-01, in-process llama.cpp; the options' log-likelihoods, any normalization).
    """
    context = sample.get("context") or f"Question: {sample['question']}\nAnswer:"
    if not sample.get("context") and sample.get("subject"):
        context = f"The following are questions about {str(sample['subject']).replace('_', ' ')}.\n{context}"
    return [(context, _spaced(str(choice))) for choice in sample["choices"]]


def _spaced(choice: str) -> str:
    return choice if choice[:1] in (" ", ",", ".", "'", "\n") else " " + choice
