"""Which model backend runs a checkpoint: ``ACME_EVAL_MODEL_BACKEND`` names one of ``BACKENDS`` (the
values ``settings.EVAL_MODEL_BACKENDS`` accepts). A new backend is one module implementing
``acme.models.interface.Model`` and one entry here."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from acme.errors import ConfigError

if TYPE_CHECKING:
    from acme.models.interface import Model
    from acme.settings import EvaluationSettings


def _llama_cpp(checkpoint: str | Path | None, configured: EvaluationSettings) -> Any:
    from acme.models.llama_cpp import LlamaCppModel

    if checkpoint is None:
        raise ConfigError("the llama_cpp backend needs a GGUF checkpoint")
    return LlamaCppModel(
        checkpoint, n_ctx=configured.model_context_tokens, n_threads=configured.model_threads
    )


def _transformers(checkpoint: str | Path | None, configured: EvaluationSettings) -> Any:
    from acme.models.hf import TransformersModel

    if checkpoint is None:
        raise ConfigError("the transformers backend needs a checkpoint file or folder")
    return TransformersModel(checkpoint)


def _openai(checkpoint: str | Path | None, configured: EvaluationSettings) -> Any:
    from acme.models.openai_compat import OpenAICompletionModel

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


BACKENDS: dict[str, Callable[[str | Path | None, EvaluationSettings], Any]] = {
    "llama_cpp": _llama_cpp,
    "transformers": _transformers,
    "openai": _openai,
}


def load_model(checkpoint: str | Path | None, backend: str | None = None) -> Model:
    """The configured backend's model for ``checkpoint`` (a file or folder; unused by ``openai``)."""
    from acme import settings

    configured = settings.evaluation()
    backend = backend or configured.model_backend
    if backend not in BACKENDS:
        raise ConfigError(f"ACME_EVAL_MODEL_BACKEND={backend!r} must be one of {', '.join(BACKENDS)}")
    return BACKENDS[backend](checkpoint, configured)
