"""The LLM log agent (filter-rule proposals) against a fake OpenAI-compatible server on loopback.

The fake server plays k independent samples per template, in order; each test scripts what they answer,
and the acceptance rules (majority, compiles and is safe, matches the template, matches no held-back error
line) are checked on the result. An accepted rule is then run through the real compressor.
"""

from __future__ import annotations

import re

import pytest

from acme.diagnosis.compress import compress_log, load_filter_rules, parse_filter_rules
from acme.diagnosis.llm_endpoint import LLMEndpoint
from acme.diagnosis.log_agent import (
    REJECTED_AGENT_UNAVAILABLE,
    REJECTED_INVALID_REGEX,
    REJECTED_MATCHES_ERROR_LINE,
    REJECTED_MISSES_TEMPLATE_LINE,
    REJECTED_NO_MAJORITY,
    REJECTED_NO_SAMPLE_LINES,
    REJECTED_UNSAFE_REGEX,
    ProposedRule,
    propose_filter_rules,
)
from acme.diagnosis.regex_safety import regex_problem
from tests.diagnosis_support import UnsafeRegex, compile_safe
from tests.fakes.openai_server import FakeOpenAIServer, chat_reply, error_reply, json_reply

# A data-loader heartbeat no bundled filter rule knows (so the compressor keeps it as a template).
HEARTBEAT = {
    "template": "[loader] heartbeat ok queue_depth=<NUM> prefetch=<NUM> shard=<NUM>",
    "samples": [
        "[rank0]: [loader] heartbeat ok queue_depth=12 prefetch=4 shard=17",
        "[rank3]: [loader] heartbeat ok queue_depth=7 prefetch=4 shard=2",
        "[loader] heartbeat ok queue_depth=31 prefetch=8 shard=170",
    ],
}
CHECKPOINT = {
    "template": "checkpointer: flushed <NUM> tensors to <PATH> in <NUM>s",
    "samples": [
        "checkpointer: flushed 1024 tensors to /ckpt/step_100/ in 3.2s",
        "checkpointer: flushed 998 tensors to /ckpt/step_200/ in 2.9s",
    ],
}
HELD_BACK = [
    "[rank2]: [loader] heartbeat FAILED queue_depth=0 prefetch=4 shard=9: worker died",
    "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
    "checkpointer: flush failed: OSError: [Errno 28] No space left on device",
    "[rank0]: iteration 5 | loss 2.31",  # not an error line: ignored by the held-back check
]
GOOD = r"^\[loader\] heartbeat ok queue_depth=\d+ prefetch=\d+ shard=\d+$"


@pytest.fixture
def fake_llm():
    with FakeOpenAIServer() as server:
        yield server


def _endpoint(server: FakeOpenAIServer, **overrides) -> LLMEndpoint:
    options = {"base_url": server.base_url, "model": "fake-model", "api_key": "k", "timeout_s": 2.0,
               "max_retries": 0, "backoff_base_s": 0.01}  # fmt: skip
    options.update(overrides)
    return LLMEndpoint(**options)


def _regex(pattern: str, description: str = "Data-loader heartbeat.") -> object:
    return json_reply({"regex": pattern, "description": description})


def _propose(server, templates=(HEARTBEAT,), **kwargs) -> list[ProposedRule]:
    return propose_filter_rules(_endpoint(server), list(templates), HELD_BACK, **kwargs)


# ------------------------------------------------------------------------------------------------ accepted
def test_majority_regex_is_accepted_and_works_in_the_compressor_fake_server(fake_llm, tmp_path):
    fake_llm.script(_regex(GOOD), _regex(GOOD), _regex(GOOD))

    [proposal] = _propose(fake_llm)

    assert proposal.accepted and proposal.rejection is None
    assert (proposal.regex, proposal.votes, proposal.samples) == (GOOD, 3, 3)
    requests = fake_llm.chat_requests
    assert len(requests) == 3
    assert all(
        r.json["temperature"] > 0 and r.json["response_format"]["type"] == "json_schema" for r in requests
    )
    assert all(
        re.search(r"<<<BEGIN LINES ([0-9a-f]{24})>>>.*<<<END LINES \1>>>", r.text, re.DOTALL)
        for r in requests
    )
    # the rank prefix is stripped before the lines are shown, as the compressor matches rules
    assert "[loader] heartbeat ok queue_depth=12" in requests[0].text and "[rank0]:" not in requests[0].text

    # The entry is a valid filter rule; with it the compressor drops the heartbeat and keeps every error.
    entry = proposal.to_filter_rule("llm_loader_heartbeat")
    assert entry["provenance"] == "llm-log-agent: 3/3 samples agreed"
    [rule] = parse_filter_rules([entry])
    log = [*HEARTBEAT["samples"] * 20, *HELD_BACK]
    before = compress_log(log)
    after = compress_log(log, rules=[*load_filter_rules(), rule])
    assert after.stats["dropped_by_rule"]["llm_loader_heartbeat"] == 60
    assert after.stats["lines_out"] < before.stats["lines_out"]
    kept = {k.text for k in after.lines}
    assert set(HELD_BACK[:3]) <= kept


def test_equivalent_match_sets_count_as_agreement_fake_server(fake_llm):
    variants = [
        GOOD,
        r"^\[loader\] heartbeat ok queue_depth=[0-9]+ prefetch=[0-9]+",
        r"\[loader\] heartbeat ok\b",
    ]
    fake_llm.script(*(_regex(v) for v in variants))

    [proposal] = _propose(fake_llm)

    assert proposal.accepted and proposal.votes == 3
    assert proposal.regex in variants
    assert set(proposal.candidates) == set(variants)


def test_malformed_sample_is_no_vote_but_majority_still_holds_fake_server(fake_llm):
    fake_llm.script(_regex(GOOD), chat_reply("sure! here is a regex: heartbeat"), _regex(GOOD))
    [proposal] = _propose(fake_llm)
    assert proposal.accepted and (proposal.votes, proposal.samples) == (2, 3)


def test_templates_are_judged_independently_fake_server(fake_llm):
    checkpoint = r"^checkpointer: flushed \d+ tensors to \S+ in [\d.]+s$"
    fake_llm.script(*[_regex(GOOD)] * 3, *[_regex(checkpoint, "Checkpoint flushes.")] * 3)

    heartbeat, flushes = _propose(fake_llm, templates=(HEARTBEAT, CHECKPOINT))

    assert heartbeat.accepted and flushes.accepted
    assert flushes.regex == checkpoint and flushes.description == "Checkpoint flushes."
    assert len(fake_llm.chat_requests) == 6


# ------------------------------------------------------------------------------------------------ rejected
def test_no_majority_is_rejected_fake_server(fake_llm):
    fake_llm.script(_regex(GOOD), _regex(r"heartbeat ok queue_depth=1"), _regex(r"prefetch=4 shard=\d$"))
    [proposal] = _propose(fake_llm)
    assert not proposal.accepted
    assert proposal.rejection == REJECTED_NO_MAJORITY
    assert proposal.detail.startswith("best agreement 1 of 3 samples")
    with pytest.raises(ValueError, match="rejected"):
        proposal.to_filter_rule("x")


def test_majority_of_one_sample_in_three_is_not_enough_fake_server(fake_llm):
    fake_llm.script(_regex(GOOD), error_reply(500), chat_reply("{}"))
    [proposal] = _propose(fake_llm)
    assert proposal.rejection == REJECTED_NO_MAJORITY
    assert "unavailable" in proposal.detail and "no regex in the answer" in proposal.detail


def test_regex_that_does_not_compile_is_rejected_fake_server(fake_llm):
    fake_llm.script(_regex(r"(\[loader\] heartbeat"), _regex(r"(\[loader\] heartbeat"), _regex(GOOD))
    [proposal] = _propose(fake_llm)
    assert proposal.rejection == REJECTED_INVALID_REGEX
    assert "does not compile" in proposal.detail


def test_catastrophic_regex_is_rejected_fake_server(fake_llm):
    nested = r"^(\[loader\] (\w+\s?)+)+ok"
    fake_llm.script(*[_regex(nested)] * 3)
    [proposal] = _propose(fake_llm)
    assert proposal.rejection == REJECTED_UNSAFE_REGEX
    assert "nested quantifiers" in proposal.detail


def test_regex_missing_a_template_line_is_rejected_fake_server(fake_llm):
    narrow = r"queue_depth=\d{2} prefetch=4"
    fake_llm.script(*[_regex(narrow)] * 3)
    [proposal] = _propose(fake_llm)
    assert proposal.rejection == REJECTED_MISSES_TEMPLATE_LINE
    assert "does not match 2 of 3 sample lines" in proposal.detail


def test_regex_matching_a_held_back_error_line_is_rejected_fake_server(fake_llm):
    broad = r"\[loader\] heartbeat"
    fake_llm.script(*[_regex(broad)] * 3)
    [proposal] = _propose(fake_llm)
    assert proposal.rejection == REJECTED_MATCHES_ERROR_LINE
    assert "heartbeat FAILED" in proposal.detail


def test_unreachable_agent_is_rejected_fake_server(fake_llm):
    fake_llm.script(*[error_reply(503)] * 3)
    [proposal] = _propose(fake_llm)
    assert proposal.rejection == REJECTED_AGENT_UNAVAILABLE
    assert "HTTP 503" in proposal.detail


def test_template_without_sample_lines_asks_nothing_fake_server(fake_llm):
    [proposal] = _propose(fake_llm, templates=({"template": "x <NUM>"},))
    assert proposal.rejection == REJECTED_NO_SAMPLE_LINES
    assert fake_llm.requests == []


def test_compressor_template_dicts_are_accepted_fake_server(fake_llm):
    """The representative ``text`` of CompressedLog.templates serves as the sample line."""
    compressed = compress_log(HEARTBEAT["samples"] * 5)
    [template] = compressed.templates
    fake_llm.script(*[_regex(GOOD)] * 3)
    [proposal] = _propose(fake_llm, templates=(template,))
    assert proposal.accepted
    assert "heartbeat ok" in fake_llm.chat_requests[0].text


def test_secrets_in_sample_lines_never_reach_the_server_fake_server(fake_llm):
    template = {
        "template": "wandb: login key=<HEX>",
        "samples": ["wandb: login api_key=0123456789abcdef0123", "x token=hf_AbCdEfGhIjKlMnOpQrStUvWx"],
    }
    fake_llm.script(*[_regex(r"^wandb: login")] * 3)
    _propose(fake_llm, templates=(template,))
    for request in fake_llm.chat_requests:
        body = request.raw_body.decode()
        assert "0123456789abcdef0123" not in body and "hf_AbCdEfGhIjKlMnOpQrStUvWx" not in body


def test_samples_and_temperature_are_checked():
    endpoint = LLMEndpoint(base_url="http://127.0.0.1:9/v1", model="m")
    with pytest.raises(ValueError, match="samples"):
        propose_filter_rules(endpoint, [HEARTBEAT], [], samples=0)
    with pytest.raises(ValueError, match="temperature"):
        propose_filter_rules(endpoint, [HEARTBEAT], [], temperature=0)


# ------------------------------------------------------------------------------------------------ regex safety
@pytest.mark.parametrize(
    ("pattern", "problem"),
    [
        (r"(a+)+$", "nested quantifiers"),
        (r"(\w+\s?)*x", "nested quantifiers"),
        (r"(?:x{2,5}){3}", "nested quantifiers"),
        (r"(?=(a+))+b", "nested quantifiers"),
        (r"(a)\1", "backreference"),
        (r"a*", "matches the empty string"),
        (r"(", "does not compile"),
        ("x" * 301, "301 characters long"),
        ("", "not a non-empty string"),
        (None, "not a non-empty string"),
    ],
)
def test_regex_safety_refuses(pattern, problem):
    assert problem in regex_problem(pattern)
    with pytest.raises(UnsafeRegex, match=re.escape(problem)):
        compile_safe(pattern)


@pytest.mark.parametrize("pattern", [GOOD, r"(a|b)*c", r"(?:ab)+c", r"CUDA error: (\w+)", r"Xid \d+"])
def test_regex_safety_accepts(pattern):
    assert regex_problem(pattern) is None
    assert compile_safe(pattern).pattern == pattern
