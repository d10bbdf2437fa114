"""Approval before live actions (acme.recovery.approval): the policy, and what each answer does to a
recovery on the simulated backend (the action log's approval records, the cordons and the restart)."""

from __future__ import annotations

from pathlib import Path

import pytest

from acme.lake import Lake
from acme.recovery.actions import ActionLog
from acme.recovery.approval import (
    ApprovalPolicy,
    PlannedActions,
    approval_form,
    form_of_recovery,
    policy_decision,
)
from acme.recovery.backend import SimulatedBackend
from acme.recovery.recover import RecoveryRequest
from acme.settings import recovery as recovery_settings
from tests.recovery_support import manual_request, recover, simulated_jobs_file

NODES = [f"n{i:02d}" for i in range(8)]
BIG = [f"m{i:02d}" for i in range(16)]


@pytest.fixture
def jobs_file(tmp_path: Path) -> Path:
    return simulated_jobs_file(
        tmp_path,
        {"job-1": {"nodes": NODES, "faulty": ["n05"]}, "job-2": {"nodes": BIG, "faulty": ["m01", "m09"]}},
    )


def request(checkpoints: Path, job: str = "job-1", **params) -> RecoveryRequest:
    return manual_request(checkpoints, job, params.pop("nodes", NODES), **{"dry_run": False, **params})


def approvals(lake: Lake, job: str = "job-1") -> list[dict]:
    return [r for r in ActionLog(lake, "seren", job, "r1").records() if r["step"] == "approval"]


def steps(lake: Lake, job: str = "job-1") -> dict[str, str]:
    return {r["step"]: r["status"] for r in ActionLog(lake, "seren", job, "r1").records()}


def cordoned(lake: Lake) -> list[str]:
    state = lake.read_json("recovery/simulated/cluster=seren/state.json", default={}) or {}
    return list(state.get("cordoned") or [])


def plan(to_cordon=("n05",), undecided=(), checkpoint="/ckpt/step_200", allowed=True) -> PlannedActions:
    return PlannedActions(
        to_cordon=tuple(to_cordon), stragglers=(), undecided=tuple(undecided), job_nodes=8,
        blast_radius="1 of 8 nodes is within the limit of 2", blast_radius_allowed=allowed,
        checkpoint=checkpoint, checkpoint_step=200 if checkpoint else None,
    )  # fmt: skip


# ------------------------------------------------------------------------------------------ the policy
def test_the_policy_approves_a_rule_decided_fault_on_one_node_and_asks_otherwise(checkpoints):
    policy = ApprovalPolicy()
    by_rule = request(checkpoints, diagnosis_source="rule", reason="ECCError")
    decided = policy_decision(by_rule, plan(), policy)
    assert decided.auto and not decided.ask and "the auto-approve policy applies" in decided.why
    for reason, asked in [
        ("manual", policy_decision(request(checkpoints), plan(), policy)),
        ("2 nodes", policy_decision(by_rule, plan(to_cordon=("n02", "n05")), policy)),
        ("undecided", policy_decision(by_rule, plan(undecided=("n03",)), policy)),
        ("no healthy checkpoint", policy_decision(by_rule, plan(checkpoint=None), policy)),
        ("AUTO_APPROVE=false", policy_decision(by_rule, plan(), ApprovalPolicy(auto_approve=False))),
    ]:
        assert asked.ask and not asked.auto, reason
        assert reason.split()[0].lower() in asked.why.lower(), (reason, asked.why)
    dry = policy_decision(request(checkpoints, dry_run=True), plan(), policy)
    assert not dry.ask and not dry.auto
    over = policy_decision(by_rule, plan(allowed=False), policy)
    assert not over.ask and not over.auto and "stops for a person" in over.why


def test_the_form_shows_diagnosis_evidence_nodes_blast_radius_and_checkpoint(checkpoints):
    asked = request(checkpoints, diagnosis_source="retrieval", reason="ECCError", confidence=0.62,
                    evidence=["NVRM: Xid 48: DBE (double bit error) on GPU 5"])  # fmt: skip
    subject, body = approval_form(asked, plan(), 600)
    assert "job-1" in subject and "n05" in subject
    for shown in (
        "ECCError",
        "retrieval",
        "0.62",
        "Xid 48",
        "n05",
        "1 of 8 nodes",
        "/ckpt/step_200",
        "600 s",
    ):
        assert shown in body, shown


def test_auto_approve_sources_refuse_the_llm(monkeypatch):
    from acme.errors import ConfigError

    monkeypatch.setenv("ACME_RECOVERY_AUTO_APPROVE_SOURCES", "rule,llm")
    with pytest.raises(ConfigError, match="ACME_RECOVERY_AUTO_APPROVE_SOURCES has 'llm'"):
        recovery_settings()


# ------------------------------------------------------------------------------------------ recoveries
def test_a_rule_decided_one_node_fault_restarts_without_a_question_and_the_log_says_why(
    lake, jobs_file, checkpoints
):
    backend = SimulatedBackend("seren", jobs_file, lake)
    outcome = recover(lake, request(checkpoints, diagnosis_source="rule", reason="ECCError"), backend,
                      recovery_settings(), answer=None)  # fmt: skip
    assert outcome["awaiting_approval"] is False and outcome["restart"]["new_job_id"] == "job-1-r1"
    (auto,) = approvals(lake)
    assert auto["status"] == "auto_approved" and auto["by"] == "policy"
    assert "the auto-approve policy applies: ECCError decided by rule" in auto["reason"] and auto["inputs"][
        "to_cordon"
    ] == ["n05"]
    assert cordoned(lake) == ["n05"]


def test_a_manual_live_recovery_waits_for_approval_before_any_cordon(lake, jobs_file, checkpoints):
    backend = SimulatedBackend("seren", jobs_file, lake)
    outcome = recover(lake, request(checkpoints), backend, recovery_settings(), answer=None)
    assert outcome["awaiting_approval"] is True
    assert outcome["approval"]["plan"]["to_cordon"] == ["n05"]
    assert "n05" in outcome["approval"]["subject"] and "step_200" in outcome["approval"]["body"]
    assert cordoned(lake) == [] and "cordon" not in steps(lake) and "restart" not in steps(lake)


def test_a_rejection_is_logged_with_who_and_why_and_ends_as_a_plan(lake, jobs_file, checkpoints):
    backend = SimulatedBackend("seren", jobs_file, lake)
    outcome = recover(lake, request(checkpoints), backend, recovery_settings(), answer="rejected", by="alice")
    awaiting, rejected = approvals(lake)
    assert awaiting["status"] == "awaiting" and rejected["status"] == "rejected"
    assert rejected["by"] == "alice" and rejected["reason"] == "rejected by the test"
    assert cordoned(lake) == []
    assert steps(lake)["cordon"] == "planned" and steps(lake)["restart"] == "planned"
    assert "not approved (rejected by alice" in outcome["restart"]["planned"]
    assert "new_job_id" not in outcome["restart"]


def test_an_unanswered_approval_times_out_and_ends_as_a_plan(lake, jobs_file, checkpoints):
    backend = SimulatedBackend("seren", jobs_file, lake)
    outcome = recover(
        lake, request(checkpoints), backend, recovery_settings(), answer="timed_out", by="timeout"
    )
    assert [a["status"] for a in approvals(lake)] == ["awaiting", "timed_out"]
    assert cordoned(lake) == [] and steps(lake)["restart"] == "planned"
    assert "not approved (timed_out" in outcome["restart"]["planned"]


def test_an_approved_two_node_recovery_cordons_both_and_restarts(lake, jobs_file, checkpoints):
    backend = SimulatedBackend("seren", jobs_file, lake)
    outcome = recover(lake, request(checkpoints, "job-2", diagnosis_source="rule", nodes=BIG), backend,
                      recovery_settings(), answer="approved", by="bob")  # fmt: skip
    assert [a["status"] for a in approvals(lake, "job-2")] == ["awaiting", "approved"]
    assert sorted(cordoned(lake)) == ["m01", "m09"] and outcome["restart"]["new_job_id"] == "job-2-r1"


def test_a_dry_run_asks_nothing_and_records_no_approval(lake, jobs_file, checkpoints):
    backend = SimulatedBackend("seren", jobs_file, lake)
    outcome = recover(lake, request(checkpoints, dry_run=True), backend, recovery_settings(), answer=None)
    assert outcome["awaiting_approval"] is False and approvals(lake) == []
    assert steps(lake)["restart"] == "planned"


def test_the_recorded_recovery_gives_back_its_approval_question(lake, jobs_file, checkpoints):
    """What `make demo` prints: the question of an auto-approved recovery, rebuilt from its action log, is the
    one a manual start of the same recovery asks."""
    backend = SimulatedBackend("seren", jobs_file, lake)
    recover(lake, request(checkpoints, diagnosis_source="rule", reason="ECCError"), backend,
            recovery_settings(), answer=None)  # fmt: skip
    records = ActionLog(lake, "seren", "job-1", "r1").records()
    subject, body = form_of_recovery(records, 3600)
    assert subject == "Approve live recovery of job job-1 on seren: cordon n05 and restart?"
    assert "**Diagnosis**: ECCError (by rule" in body and "step_200" in body and "1 of 8 nodes" in body
    assert form_of_recovery([r for r in records if r["step"] != "approval"], 3600) is None
