"""A lookup-table stand-in for the evaluated model (tests only; the product runs real models).

Tests of the evaluation's bookkeeping (leases, idempotence, retries, kills at every write) need
known answers in milliseconds, not a real model's: this fake implements the trial's model
interface (``acme.models.interface.Model``) from a lookup table saved as a PyTorch checkpoint (``torch.save``, read back with
``weights_only=True``): it maps the SHA-256 of a prompt to a generation (``match``, ``code_exec``)
or to a loglikelihood score (``ppl``: the option it believes gets 0, the others −10). A ``filler``
tensor stands in for weights so the copy and the load move real bytes. Prompts it does not know get
an empty answer (or −10 for every option), as a model that has not learned them would.

``build_tiny_checkpoint`` makes one from ``include/eval/tiny/tiny_model_answers.jsonl``, whose
answers are partly wrong on purpose (``include/eval/tiny/SOURCES.md`` says which). Pass
``TinyLookupModel.load`` as ``run_inference(load_model=...)``.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from acme.errors import InputError
from acme.evaluation.datasets import choice_requests, generation_prompt, read_samples, sample_id
from acme.models.interface import Generation, TokenCounter

CHECKPOINT_FORMAT = "acme.evaluation.tiny-lookup-model/1"
UNKNOWN_SCORE = -10.0


def prompt_key(prompt: str) -> str:
    return hashlib.sha256(prompt.encode()).hexdigest()


def build_tiny_checkpoint(
    out_path: str | Path,
    data_dir: Path,
    suite_datasets: dict[str, str],
    answers_file: Path | None = None,
    filler_bytes: int = 4 << 20,
) -> Path:
    """Write a lookup checkpoint answering the samples of ``suite_datasets`` ({name: metric kind})."""
    import torch

    answers_file = answers_file or Path(data_dir) / "tiny_model_answers.jsonl"
    wanted: dict[tuple[str, str], Any] = {}
    for number, line in enumerate(Path(answers_file).read_text().splitlines(), start=1):
        if line.strip():
            try:
                row = json.loads(line)
                wanted[(row["dataset"], str(row["id"]))] = row["answer"]
            except (json.JSONDecodeError, KeyError, TypeError) as exc:
                raise InputError(str(answers_file), f"bad answer row ({exc})", line=number) from None
    generations: dict[str, str] = {}
    scores: dict[str, float] = {}
    for dataset, kind in suite_datasets.items():
        samples = read_samples(data_dir, dataset, kind, 0, _count(data_dir, dataset))
        for sample in samples:
            answer = wanted.get((dataset, sample_id(sample)))
            if answer is None:
                continue
            if kind == "ppl":
                for index, (context, continuation) in enumerate(choice_requests(sample)):
                    scores[prompt_key(context + continuation)] = (
                        0.0 if index == int(answer) else UNKNOWN_SCORE
                    )
            else:
                generations[prompt_key(generation_prompt(sample, kind))] = str(answer)
    generator = torch.Generator().manual_seed(0)
    checkpoint = {
        "format": CHECKPOINT_FORMAT,
        "generations": generations,
        "scores": scores,
        "filler": torch.rand(max(1, filler_bytes // 4), generator=generator, dtype=torch.float32),
    }
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(checkpoint, out_path)
    return out_path


def _count(data_dir: Path, dataset: str) -> int:
    path = Path(data_dir) / f"{dataset}.jsonl"
    try:
        return sum(1 for line in path.read_text().splitlines() if line.strip())
    except FileNotFoundError:
        raise InputError(str(path), f"no data for dataset {dataset!r}") from None


class TinyLookupModel:
    """The loaded checkpoint: ``generate`` for generation datasets, ``loglikelihood`` for options."""

    backend = "lookup"

    def __init__(self, checkpoint: dict[str, Any], source: str):
        self.description = f"lookup table {Path(source).name}"
        self.counter = TokenCounter()
        if checkpoint.get("format") != CHECKPOINT_FORMAT:
            raise InputError(source, f"not a {CHECKPOINT_FORMAT} checkpoint")
        self.generations: dict[str, str] = checkpoint["generations"]
        self.scores: dict[str, float] = checkpoint["scores"]
        self.filler = checkpoint["filler"]

    @classmethod
    def load(cls, path: str | Path) -> TinyLookupModel:
        import torch

        try:
            checkpoint = torch.load(path, map_location="cpu", weights_only=True)
        except (OSError, RuntimeError) as exc:
            raise InputError(str(path), f"cannot load the checkpoint ({exc})") from None
        return cls(checkpoint, str(path))

    def generate(self, prompts, max_tokens: int, stop) -> list[Generation]:
        answers = [self.generations.get(prompt_key(prompt), "") for prompt in prompts]
        self.counter.add(len(prompts), len(answers), 0.0)
        return [Generation(answer, 1, len(answer.split())) for answer in answers]

    def loglikelihood(self, requests) -> list[float]:
        self.counter.add(len(requests), 0, 0.0)
        return [float(self.scores.get(prompt_key(c + x), UNKNOWN_SCORE)) for c, x in requests]

    def close(self) -> None:
        return None


def main(argv: list[str] | None = None) -> int:
    """``python -m tests.fakes.lookup_model OUT.pt``: a checkpoint for the bundled tiny suite."""
    import argparse

    from acme import settings
    from acme.evaluation.evaluation_run import resolve_suite_path
    from acme.evaluation.suite import read_suite

    parser = argparse.ArgumentParser(prog="python -m tests.fakes.lookup_model", description=main.__doc__)
    parser.add_argument("output", type=Path)
    args = parser.parse_args(argv)
    suite = read_suite(resolve_suite_path("tiny"))
    path = build_tiny_checkpoint(
        args.output, settings.evaluation().data_dir / "tiny", {d.name: d.metric_kind for d in suite.datasets}
    )
    print(json.dumps({"checkpoint": str(path), "bytes": path.stat().st_size}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
