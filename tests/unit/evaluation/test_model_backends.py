"""The model backend registry: every value ``ACME_EVAL_MODEL_BACKEND`` accepts has a backend."""

from __future__ import annotations

import pytest

from acme.errors import ConfigError
from acme.models.backends import BACKENDS, load_model
from acme.settings import EVAL_MODEL_BACKENDS


def test_every_accepted_backend_name_has_a_backend():
    assert set(BACKENDS) == set(EVAL_MODEL_BACKENDS)


def test_a_backend_is_chosen_by_name_and_checks_what_it_needs(monkeypatch):
    monkeypatch.delenv("ACME_EVAL_MODEL_ENDPOINT", raising=False)
    with pytest.raises(ConfigError, match="the llama_cpp backend needs a GGUF checkpoint"):
        load_model(None, "llama_cpp")
    with pytest.raises(ConfigError, match="needs ACME_EVAL_MODEL_ENDPOINT"):
        load_model(None, "openai")
    with pytest.raises(ConfigError, match="'onnx' must be one of llama_cpp, transformers, openai"):
        load_model(None, "onnx")
