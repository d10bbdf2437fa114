"""An HF transformers causal LM: an HF checkpoint folder, or a GGUF file dequantized by transformers."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from acme.errors import InputError
from acme.models.interface import Generation, TokenCounter, continuation_start, cut_at_stop


class TransformersModel:
    """An HF causal LM on the CPU or the trial's GPU: an HF folder, or a GGUF file (dequantized)."""

    backend = "transformers"

    def __init__(self, path: str | Path, batch_size: int = 8):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.path = Path(path)
        if not self.path.exists():
            raise InputError(str(path), "no checkpoint here")
        if self.path.is_file() and self.path.suffix == ".gguf":
            kwargs: dict[str, Any] = {"gguf_file": self.path.name}
            folder = str(self.path.parent)
        else:
            kwargs, folder = {}, str(self.path)
        try:
            self._tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True, **kwargs)
            self._model = AutoModelForCausalLM.from_pretrained(
                folder, local_files_only=True, torch_dtype=torch.float32, **kwargs
            )
        except (OSError, ValueError, ImportError) as exc:
            raise InputError(str(path), f"HF transformers cannot load this checkpoint ({exc})") from None
        self._device = "cuda" if torch.cuda.is_available() else "cpu"
        self._model.to(self._device).eval()
        if self._tokenizer.pad_token_id is None:
            self._tokenizer.pad_token = self._tokenizer.eos_token
        self.batch_size = batch_size
        self.description = f"transformers {self.path.name} ({self._device})"
        self.counter = TokenCounter()

    def _scored_ids(self, text: str) -> list[int]:
        """``text`` after one start token (BOS, else EOS), as ``LlamaCppModel`` scores it."""
        start = self._tokenizer.bos_token_id
        if start is None:
            start = self._tokenizer.eos_token_id
        return [start, *self._tokenizer(text, add_special_tokens=False)["input_ids"]]

    def generate(self, prompts: Sequence[str], max_tokens: int, stop: Sequence[str]) -> list[Generation]:
        """Greedy completions, ``batch_size`` prompts per forward pass (left-padded, masked)."""
        import torch

        results: list[Generation] = []
        self._tokenizer.padding_side = "left"
        for first in range(0, len(prompts), self.batch_size):
            batch = list(prompts[first : first + self.batch_size])
            started = time.perf_counter()
            encoded = self._tokenizer(batch, return_tensors="pt", padding=True).to(self._device)
            with torch.no_grad():
                output = self._model.generate(
                    **encoded,
                    max_new_tokens=max_tokens,
                    do_sample=False,
                    pad_token_id=self._tokenizer.pad_token_id,
                    stop_strings=list(stop) or None,
                    tokenizer=self._tokenizer,
                )
            width = encoded["input_ids"].shape[1]
            prompt_tokens = int(encoded["attention_mask"].sum())
            written = 0
            for row in output[:, width:]:
                tokens = [t for t in row.tolist() if t != self._tokenizer.pad_token_id]
                written += len(tokens)
                text = self._tokenizer.decode(tokens, skip_special_tokens=True)
                results.append(Generation(cut_at_stop(text, stop), 0, len(tokens)))
            self.counter.add(prompt_tokens, written, time.perf_counter() - started)
        return results

    def loglikelihood(self, requests: Sequence[tuple[str, str]]) -> list[float]:
        import torch

        scores: list[float] = []
        for first in range(0, len(requests), self.batch_size):
            batch = list(requests[first : first + self.batch_size])
            started = time.perf_counter()
            rows, splits = [], []
            for context, continuation in batch:
                context_ids = self._scored_ids(context)
                whole = self._scored_ids(context + continuation)
                rows.append(whole)
                splits.append(continuation_start(context_ids, whole))
            width = max(len(r) for r in rows)
            pad = self._tokenizer.pad_token_id
            ids = torch.tensor([r + [pad] * (width - len(r)) for r in rows], device=self._device)
            mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows], device=self._device)
            with torch.no_grad():
                logprobs = torch.log_softmax(
                    self._model(input_ids=ids, attention_mask=mask).logits.float(), -1
                )
            for index, (row, split) in enumerate(zip(rows, splits, strict=True)):
                positions = torch.arange(split - 1, len(row) - 1, device=self._device)
                targets = ids[index, split : len(row)]
                scores.append(float(logprobs[index, positions, targets].sum()))
            self.counter.add(int(mask.sum()), 0, time.perf_counter() - started)
        return scores

    def close(self) -> None:
        del self._model
