"""Any OpenAI-compatible ``/v1/completions`` server (vLLM, llama.cpp's server, TGI)."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from acme.errors import ConfigError
from acme.models.interface import Generation, TokenCounter, cut_at_stop


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
