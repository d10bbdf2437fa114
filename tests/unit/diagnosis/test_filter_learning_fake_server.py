"""The log agent in the pipeline: a family's frequent unknown routine lines become its filter rules.

The real ``openai`` client talks to a fake OpenAI-compatible server on loopback that answers the three
independent samples with the same regex; the pipeline stores the accepted rule for the job's family in
the lake, and the family's next job drops those lines while keeping every error line.
"""

from __future__ import annotations

import pytest

from acme.diagnosis.compress import compress_log, load_filter_rules
from acme.diagnosis.filter_learning import frequent_unmatched_templates
from acme.diagnosis.learning import family_key, load_family_filter_rules
from acme.diagnosis.llm_agent import FailureAgent
from acme.diagnosis.llm_endpoint import LLMEndpoint
from acme.diagnosis.pipeline import diagnose_job
from acme.lake import Lake
from tests.fakes.openai_server import FakeOpenAIServer, json_reply

REGEX = r"^\[monitor\] link probe ok latency_us=\d+ seq=\d+$"
JOB = {"job_id": "700", "job_name": "pretrain-7b-run42", "user": "alice", "job_type": "Pretrain"}
ERRORS = [
    "[rank0]: Traceback (most recent call last):",
    '[rank0]:   File "train.py", line 9, in <module>',
    "[rank0]: KeyError: 'vocab_size'",
]


def log(probes: int) -> list[str]:
    lines = [
        f"[rank{i % 4}]: [monitor] link probe ok latency_us={40 + i % 17} seq={i}" for i in range(probes)
    ]
    return lines + ERRORS


@pytest.fixture
def fake_llm():
    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture
def agent(fake_llm):
    endpoint = LLMEndpoint(
        base_url=fake_llm.base_url, model="fake-model", api_key="k", timeout_s=2.0, max_retries=0
    )
    return FailureAgent(endpoint)


def test_frequent_templates_are_the_unmatched_routine_lines():
    compressed = compress_log(log(300), rules=load_filter_rules())
    [template] = frequent_unmatched_templates(compressed)
    assert "link probe ok" in template["text"] and template["count"] == 300


def test_the_agents_agreed_rule_is_stored_for_the_family_and_drops_its_lines_next_time(
    tmp_path, fake_llm, agent
):
    lake = Lake(str(tmp_path / "lake"))
    fake_llm.script(*[json_reply({"regex": REGEX, "description": "Link monitor probes."})] * 3)

    record = diagnose_job(lake, "seren", JOB, log(300), agent=agent)

    assert (
        record.reason == "KeyError" and record.source == "rule"
    )  # the rule was confident: no diagnosis call
    assert len(fake_llm.chat_requests) == 3  # the three log-agent samples, nothing else
    assert "1 of 1 frequent templates became filter rules" in record.note
    [rule] = load_family_filter_rules(lake, family_key(JOB))
    assert rule.pattern.pattern == REGEX

    # The family's next job: the probes are dropped by the learned rule, the error lines kept, no new calls.
    second = {**JOB, "job_id": "701", "job_name": "pretrain-7b-run43"}
    assert family_key(second) == family_key(JOB)
    record = diagnose_job(lake, "seren", second, log(300), agent=agent)
    assert record.reason == "KeyError"
    assert len(fake_llm.chat_requests) == 3
    compressed = compress_log(
        log(300), rules=load_family_filter_rules(lake, family_key(JOB)) + load_filter_rules()
    )
    assert compressed.stats["dropped_by_rule"][rule.id] == 300
    assert {k.text for k in compressed.lines} >= set(ERRORS)


def test_offline_nothing_is_asked_and_nothing_learned(tmp_path):
    lake = Lake(str(tmp_path / "lake"))
    record = diagnose_job(lake, "seren", JOB, log(300), agent=None)
    assert record.reason == "KeyError"
    assert load_family_filter_rules(lake, family_key(JOB)) == []
