"""Triage (acme.diagnosis.triage): who is asked, once per log template, and how an answer becomes a
labelled case and a validated rule that then diagnoses the same failure."""

from __future__ import annotations

import os
from dataclasses import replace
from datetime import date

import pytest

from acme.diagnosis.pipeline import diagnose_job
from acme.diagnosis.records import DiagnosisRecord
from acme.diagnosis.retrieval import CaseStore, LexicalEmbedder
from acme.diagnosis.triage import (
    ANSWERED,
    EXPIRED,
    apply_answer,
    claim_questions,
    expire_question,
    line_template,
    load_question,
    template_regex,
    triage_form,
    triage_reason,
)
from acme.lake import Lake
from acme.settings import diagnosis as diagnosis_settings

FLUX = [
    "[rank2]: Traceback (most recent call last):",
    '[rank2]:   File "/workspace/train.py", line 88, in <module>',
    "[rank2]: widgetlib.FluxCapacitorFault: flux capacitor drained on device 3 (code 0x1f)",
]
# 256 GPUs for an hour: 256 GPU-hours lost, above the 64 of ACME_TRIAGE_MIN_GPU_HOURS.
BIG_JOB = {"job_type": "Pretrain", "user": "u1", "job_name": "gpt-pretrain-run1", "node_list": "node[01-32]",
           "submit_time": "2023-07-01T03:00:00+00:00", "gpu_num": 256, "run_s": 3600}  # fmt: skip


@pytest.fixture
def lake(tmp_path, monkeypatch):
    monkeypatch.setenv("ACME_DIAGNOSIS_EMBEDDING", "lexical")
    for name in ("ACME_DIAGNOSIS_LOG_PATTERN", "ACME_DIAGNOSIS_LOG_ROOT", "ACME_DIAGNOSIS_MIN_CONFIDENCE"):
        monkeypatch.delenv(name, raising=False)
    return Lake(str(tmp_path / "lake"))


def put_log(lake: Lake, job_id: str, lines) -> None:
    path = os.path.join(lake.root, "logs", "cluster=seren", f"job={job_id}", "train.log")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write("\n".join(lines) + "\n")


def flux(device: int, pid: int) -> list[str]:
    """The same failure from another job: another rank, device and process, the same template."""
    return [
        f"[rank{device}]: Traceback (most recent call last):",
        f'[rank{device}]:   File "/workspace/train.py", line 88, in <module>',
        f"[rank{device}]: widgetlib.FluxCapacitorFault: flux capacitor drained on device {device} (code 0x1f) pid={pid}",
    ]


def record(**changes) -> DiagnosisRecord:
    base = DiagnosisRecord(cluster="seren", job_id="1", date=date(2023, 7, 1), reason="Unknown", category=None,
                           attribution=None, confidence=0.0, source="none")  # fmt: skip
    return replace(base, **changes)


def test_who_is_asked_big_unknown_unsure_or_untrusted_model_jobs_only(monkeypatch):
    settings = diagnosis_settings()
    small = {**BIG_JOB, "gpu_num": 8, "run_s": 600}  # 1.3 GPU-hours
    assert triage_reason(record(), small, settings) is None
    assert "ended Unknown" in triage_reason(record(), BIG_JOB, settings)
    weak = record(
        reason="RuntimeError", category="Framework", attribution="user", confidence=0.3, source="rule"
    )
    assert "confidence 0.30" in triage_reason(weak, BIG_JOB, settings)
    symptom = replace(weak, confidence=0.5)  # a symptom rule alone: not asked about by default
    assert triage_reason(symptom, BIG_JOB, settings) is None
    monkeypatch.setenv("ACME_TRIAGE_MIN_CONFIDENCE", "0.7")
    assert "below 0.7" in triage_reason(symptom, BIG_JOB, diagnosis_settings())
    monkeypatch.delenv("ACME_TRIAGE_MIN_CONFIDENCE")
    sure = replace(weak, confidence=0.9)
    assert triage_reason(sure, BIG_JOB, settings) is None
    by_llm = replace(sure, reason="NVLinkError", category="Infrastructure", source="llm")
    assert "not in ACME_DIAGNOSIS_TRUSTED_MODELS" in triage_reason(by_llm, BIG_JOB, settings, "smollm2-135m")
    monkeypatch.setenv("ACME_DIAGNOSIS_TRUSTED_MODELS", "gpt-9, smollm2-135m")
    assert triage_reason(by_llm, BIG_JOB, diagnosis_settings(), "smollm2-135m") is None
    monkeypatch.setenv("ACME_TRIAGE", "false")
    assert triage_reason(record(), BIG_JOB, diagnosis_settings()) is None


def test_a_template_regex_matches_its_line_and_others_of_its_template_but_not_an_empty_line():
    import re

    line = "[rank2]: widgetlib.FluxCapacitorFault: flux capacitor drained on device 3 (code 0x1f) pid=77"
    template = line_template(line)
    assert "<" in template  # the device and pid are masked
    pattern = re.compile(template_regex(template))
    assert pattern.search(line) and pattern.search(flux(7, 4242)[-1])
    assert not pattern.search("") and not pattern.search("RuntimeError: CUDA error: out of memory")
    assert template_regex("<NUM> <HEX>") is None  # nothing literal to match on


def test_an_unknown_failure_of_a_big_job_is_asked_about_once_then_learned_and_diagnosed_by_the_rule(lake):
    put_log(lake, "1", flux(2, 77))
    first = diagnose_job(lake, "seren", {**BIG_JOB, "job_id": "1"}, agent=None)
    assert first.reason == "Unknown" and "an operator is asked" in first.note
    put_log(lake, "2", flux(5, 901))
    second = diagnose_job(lake, "seren", {**BIG_JOB, "job_id": "2"}, agent=None)
    assert "asked about before" in second.note and "not asked again" in second.note

    (question,) = claim_questions(lake, "scheduled__1", limit=20)
    assert question.job_id == "1" and question.status == "asked"
    assert question.options[-1] == "Unknown" and len(set(question.options)) == len(question.options)
    assert any("FluxCapacitorFault" in text for _, text in question.evidence)
    subject, body = triage_form(question)
    assert "256 GPU-hours" in subject and "FluxCapacitorFault" in body and "ended Unknown" in body
    assert claim_questions(lake, "scheduled__2", limit=20) == []  # claimed: no other run asks it

    outcome = apply_answer(lake, question.key, "NVLinkError", by="alice", note="GPU 3 lost its NVLink")
    assert outcome["rule_status"] == "added", outcome
    assert outcome["case_id"] == "seren/1"
    stored = CaseStore(lake, LexicalEmbedder()).read("seren")
    assert [(c["job_id"], c["reason"], c["source"]) for c in stored] == [("1", "NVLinkError", "operator")]
    answered = load_question(lake, question.key)
    assert answered.status == ANSWERED and answered.answer["by"] == "alice"
    assert apply_answer(lake, question.key, "ECCError", by="bob") == outcome  # answered once: unchanged

    put_log(lake, "3", flux(6, 12))
    third = diagnose_job(lake, "seren", {**BIG_JOB, "job_id": "3"}, agent=None)
    assert (third.reason, third.source, third.rule_id) == ("NVLinkError", "rule", outcome["rule_id"])
    assert "triage" not in (third.note or "")


def test_an_answer_whose_rule_would_break_a_labelled_line_becomes_a_case_but_no_rule(lake):
    put_log(lake, "1", flux(2, 77))
    diagnose_job(lake, "seren", {**BIG_JOB, "job_id": "1"}, agent=None)
    (question,) = claim_questions(lake, "scheduled__1", limit=20)
    labelled = [("widgetlib.FluxCapacitorFault: flux capacitor drained on device 0 (code 0x1f) pid=1",
                 "ECCError", ())]  # fmt: skip
    outcome = apply_answer(lake, question.key, "NVLinkError", by="alice", labelled=labelled)
    assert outcome["rule_status"] == "refused" and "labelled corpus line" in outcome["why"]
    assert outcome["case_id"] == "seren/1"  # the label is kept for retrieval all the same


def test_cannot_tell_and_a_time_out_learn_nothing_and_the_template_is_not_asked_again(lake):
    put_log(lake, "1", flux(2, 77))
    diagnose_job(lake, "seren", {**BIG_JOB, "job_id": "1"}, agent=None)
    (question,) = claim_questions(lake, "scheduled__1", limit=20)
    expired = expire_question(lake, question.key)
    assert expired["rule_id"] is None and load_question(lake, question.key).status == EXPIRED
    put_log(lake, "2", flux(4, 5))
    again = diagnose_job(lake, "seren", {**BIG_JOB, "job_id": "2"}, agent=None)
    assert "not asked again" in again.note and claim_questions(lake, "scheduled__2", limit=20) == []
    assert CaseStore(lake, LexicalEmbedder()).read("seren") == []
