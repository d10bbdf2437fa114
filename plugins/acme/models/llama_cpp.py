"""A GGUF model run in-process by llama.cpp (``llama-cpp-python``)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from acme.errors import ConfigError, InputError
from acme.models.interface import Generation, TokenCounter, continuation_start, cut_at_stop


class LlamaCppModel:
    """A GGUF model run in-process by llama.cpp (greedy decoding; exact token log-probabilities)."""

    backend = "llama_cpp"

    def __init__(self, path: str | Path, n_ctx: int = 2048, n_threads: int = 1):
        try:
            from llama_cpp import Llama
        except ImportError as exc:
            raise ConfigError(
                f"ACME_EVAL_MODEL_BACKEND=llama_cpp needs llama-cpp-python ({exc}); run make setup"
            ) from None
        self.path = Path(path)
        if not self.path.is_file():
            raise InputError(str(path), "no GGUF file here")
        try:
            self._llm = Llama(
                model_path=str(self.path),
                n_ctx=n_ctx,
                # Batch (prompt) threads too: llama.cpp's default (all cores) spin-waits on a shared CPU;
                # measured 20-30x slower prompt evaluation at load 8 on 2 cores (benchmarks/README.md).
                n_threads=n_threads,
                n_threads_batch=n_threads,
                logits_all=True,  # loglikelihood reads every position's logits
                seed=0,
                verbose=False,
            )
        except (ValueError, RuntimeError) as exc:
            raise InputError(str(path), f"llama.cpp cannot load this file as a GGUF model ({exc})") from None
        self.n_ctx = n_ctx
        self.description = f"llama.cpp {self.path.name}"
        self.counter = TokenCounter()

    def _tokens(self, text: str, add_bos: bool) -> list[int]:
        return self._llm.tokenize(text.encode("utf-8"), add_bos=add_bos, special=False)

    @property
    def bos_text(self) -> str:
        """The model's BOS token as text: what an OpenAI-compatible llama.cpp server must be sent in front of
        a scored prompt to score it the same way (see :class:`OpenAICompletionModel`)."""
        return self._llm.detokenize([self._llm.token_bos()], special=True).decode("utf-8", errors="replace")

    def _scored_tokens(self, text: str) -> list[int]:
        """``text`` after exactly one BOS token, whether or not the vocabulary adds one by itself.

        Scoring conditions every text on a start token (as lm-evaluation-harness does), so the first
        token of the text is scored too and every backend scores the same token sequence.
        """
        tokens = self._tokens(text, False)
        return [self._llm.token_bos(), *tokens]

    def generate(self, prompts: Sequence[str], max_tokens: int, stop: Sequence[str]) -> list[Generation]:
        results = []
        for prompt in prompts:
            started = time.perf_counter()
            budget = max(1, min(max_tokens, self.n_ctx - len(self._tokens(prompt, True)) - 1))
            answer = self._llm.create_completion(
                prompt, max_tokens=budget, temperature=0.0, top_k=1, stop=list(stop) or None, seed=0
            )
            usage = answer["usage"]
            text = cut_at_stop(answer["choices"][0]["text"], stop)
            results.append(Generation(text, usage["prompt_tokens"], usage["completion_tokens"]))
            self.counter.add(
                usage["prompt_tokens"], usage["completion_tokens"], time.perf_counter() - started
            )
        return results

    def loglikelihood(self, requests: Sequence[tuple[str, str]]) -> list[float]:
        import numpy as np

        scores = []
        for context, continuation in requests:
            started = time.perf_counter()
            context_tokens = self._scored_tokens(context)
            whole = self._scored_tokens(context + continuation)
            split = continuation_start(context_tokens, whole)
            dropped = max(0, len(whole) - self.n_ctx)  # a context longer than the window loses its start
            whole, split = whole[dropped:], max(1, split - dropped)
            self._llm.reset()
            self._llm.eval(whole)
            logits = np.asarray(self._llm.scores[: len(whole)], dtype=np.float64)
            rows = logits[split - 1 : len(whole) - 1]
            top = rows.max(axis=1, keepdims=True)
            log_norm = top[:, 0] + np.log(np.exp(rows - top).sum(axis=1))
            targets = np.asarray(whole[split:])
            total = float((rows[np.arange(len(targets)), targets] - log_norm).sum())
            scores.append(total)
            self.counter.add(len(whole), 0, time.perf_counter() - started)
        return scores

    def close(self) -> None:
        close = getattr(self._llm, "close", None)
        if close is not None:
            close()
