"""Metrics computed from a trial's outputs, on the CPU, after the GPU has been released.

| kind | metric | rule |
|---|---|---|
| ``match`` | ``exact_match`` | normalized text equality (case, punctuation, articles, spaces folded, as SQuAD's); when the reference is a number, the last number of the answer must equal it (GSM8K style) |
| ``ppl`` | ``accuracy`` | the option the trial chose is the labelled one (the trial chooses by loglikelihood per character of the option, lm-evaluation-harness's ``acc_norm``) |
| ``code_exec`` | ``pass@1`` | HumanEval: prompt + completion + the unit test; MBPP: completion + its ``assert`` lines; run in the sandbox (``acme.evaluation.sandbox``), passed when it exits 0 |
"""

from __future__ import annotations

import re
import string
from typing import Any

from acme.errors import InputError
from acme.evaluation.sandbox import humaneval_program, run_program

METRIC_NAMES = {"match": "exact_match", "ppl": "accuracy", "code_exec": "pass@1"}
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def _normalize(text: str) -> str:
    text = str(text).lower()
    text = "".join(ch for ch in text if ch not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def _as_number(text: str) -> float | None:
    try:
        return float(str(text).replace(",", "").strip())
    except ValueError:
        return None


def exact_match(answer: str, reference: str) -> bool:
    number = _as_number(reference)
    if number is not None:
        found = _NUMBER.findall(str(answer))
        return bool(found) and _as_number(found[-1]) == number
    return _normalize(answer) == _normalize(reference)


def score_sample(kind: str, sample: dict[str, Any], output: dict[str, Any], timeout_s: float) -> dict:
    """One sample's verdict: ``{"id", "correct", ...}`` (code execution adds its status)."""
    if kind == "match":
        return {"correct": exact_match(output["answer"], sample["answer"])}
    if kind == "ppl":
        return {"correct": output["choice"] == sample["label"]}
    if kind == "code_exec":
        if "test_list" in sample:  # MBPP: the completion defines the function, the asserts test it
            setup = sample.get("test_setup_code") or ""
            program = f"{output['answer']}\n\n{setup}\n" + "\n".join(sample["test_list"]) + "\n"
        else:
            program = humaneval_program(
                sample["prompt"], output["answer"], sample["test"], sample["entry_point"]
            )
        result = run_program(program, timeout_s=timeout_s)
        return {"correct": result.passed, "status": result.status, "network": result.network}
    raise InputError(kind, f"no metric for kind {kind!r}")


def score_slice(kind: str, samples: list[dict], outputs: list[dict], timeout_s: float, where: str) -> dict:
    """Score aligned samples and outputs (same order, same ids)."""
    if len(samples) != len(outputs):
        raise InputError(where, f"{len(outputs)} outputs for {len(samples)} samples")
    verdicts = []
    for sample, output in zip(samples, outputs, strict=True):
        expected = str(sample.get("id", sample.get("task_id")))
        if str(output["id"]) != expected:
            raise InputError(where, f"output for {output['id']!r} where {expected!r} was expected")
        verdicts.append({"id": expected, **score_sample(kind, sample, output, timeout_s)})
    correct = sum(1 for v in verdicts if v["correct"])
    return {
        "metric": METRIC_NAMES[kind],
        "n_samples": len(verdicts),
        "correct": correct,
        "score": correct / len(verdicts) if verdicts else 0.0,
        "samples": verdicts,
    }
