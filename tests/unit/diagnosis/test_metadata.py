"""Job metadata as evidence (acme.diagnosis.metadata): facts as lines, and the bulk diagnosis of jobs
without a log."""

from __future__ import annotations

from acme.diagnosis.metadata import diagnose_from_metadata, exit_code_fact, job_fact_lines
from acme.diagnosis.rules import UNKNOWN, load_rules


def test_exit_codes_above_128_name_their_signal():
    assert exit_code_fact(137) == "job exit_code: 137 (signal 9 SIGKILL)"
    assert exit_code_fact(143) == "job exit_code: 143 (signal 15 SIGTERM)"
    assert exit_code_fact(139) == "job exit_code: 139 (signal 11 SIGSEGV)"
    assert exit_code_fact(1) == "job exit_code: 1"
    assert exit_code_fact(0) is None
    assert exit_code_fact(None) is None


def test_fact_lines_come_from_the_record_and_are_line_zero():
    facts = job_fact_lines({"job_id": "7", "state": "NODE_FAIL", "exit_code": 1, "user": "u"})
    assert facts == [(0, "job state: NODE_FAIL"), (0, "job exit_code: 1")]
    assert job_fact_lines(None) == []
    assert job_fact_lines({"job_id": "8", "state": None, "exit_code": 0}) == []


def test_bulk_diagnosis_keeps_order_and_shares_evaluations():
    rules = load_rules()
    jobs = [{"job_id": str(i), "state": "NODE_FAIL" if i % 2 else "FAILED", "exit_code": 1} for i in range(6)]
    out = diagnose_from_metadata(jobs, rules)
    assert [d.reason for d in out] == ["Unknown", "NodeFailure"] * 3
    assert out[1].category == "Infrastructure" and out[1].attribution == "infrastructure"
    assert out[0].reason == UNKNOWN and out[0].confidence == 0.0
    out[1].evidence.append({"line": 9, "text": "mutated"})  # each job's record is its own
    assert out[3].evidence != out[1].evidence
