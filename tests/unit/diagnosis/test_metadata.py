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


def _diagnose(job, log=("training started",)):
    from tests.diagnosis_support import diagnose_log

    return diagnose_log(list(log), job=job)


def test_scheduler_outcomes_are_explicit_outside_the_taxonomy():
    cases = {
        ("state", "TIMEOUT"): ("SchedulerTimeLimit", "user"),
        ("state", "PREEMPTED"): ("Preempted", "infrastructure"),
        ("state", "CANCELLED by 1042"): ("JobCancelled", "user"),
        ("reason", "DeadlineExceeded"): ("SchedulerTimeLimit", "user"),
        ("reason", "Evicted"): ("PodEvicted", "infrastructure"),
        ("reason", "UnexpectedAdmissionError"): ("AdmissionError", "infrastructure"),
    }
    for (key, value), (reason, attribution) in cases.items():
        diagnosis = _diagnose({"job_id": "1", key: value})
        assert (diagnosis.reason, diagnosis.category, diagnosis.attribution) == (
            reason,
            "External",
            attribution,
        )
        assert diagnosis.evidence[0]["line"] == 0
    assert _diagnose({"state": "TIMEOUT"}).confidence == 0.9  # the scheduler says so


def test_memory_node_and_signal_facts_get_their_taxonomy_reason():
    assert _diagnose({"state": "OUT_OF_MEMORY"}).reason == "OutOfMemoryError"
    assert _diagnose({"reason": "OOMKilled", "exit_code": 137}).reason == "OutOfMemoryError"
    assert _diagnose({"state": "NODE_FAIL"}).reason == "NodeFailure"
    killed = _diagnose({"state": "FAILED", "exit_code": 137})
    assert (killed.reason, killed.category, killed.confidence) == ("KilledBySignal", "External", 0.5)
    assert _diagnose({"exit_code": 143}).reason == "KilledBySignal"
    assert _diagnose({"exit_code": 139}).reason == "SegmentationFault"
    assert _diagnose({"state": "FAILED", "exit_code": 1}).reason == UNKNOWN  # no evidence at all


def test_a_root_cause_in_the_log_outranks_the_facts_that_are_its_symptoms():
    ecc = ["[rank3]: RuntimeError: CUDA error: uncorrectable ECC error encountered"]
    assert _diagnose({"state": "FAILED", "exit_code": 137}, ecc).reason == "ECCError"
    assert _diagnose({"state": "TIMEOUT"}, ecc).reason == "ECCError"
    # A job still running at its time limit was not ended by the retries and timeouts it logged before.
    retried = ["wandb: Network error (ConnectionError), entering retry loop."]
    assert _diagnose({"state": "TIMEOUT"}, retried).reason == "SchedulerTimeLimit"
    assert _diagnose({}, retried).reason == "SideServiceError"
