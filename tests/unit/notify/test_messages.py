"""The owner digest, the on-call page (with the recovery's state from its action log) and the late notice."""

from __future__ import annotations

from acme.lake import Lake
from acme.notify import messages


def _owner_message(job_id, reason, hours, evidence=None):
    return {"job_id": job_id, "user": "alice", "to": "alice", "reason": reason, "category": "Script",
            "gpu_hours": hours, "evidence": evidence or [], "mitigation": f"fix {reason}"}  # fmt: skip


def test_the_digest_groups_the_owners_jobs_by_reason_with_gpu_hours_evidence_mitigation_and_link():
    jobs = [
        _owner_message("j1", "OutOfMemoryError", 2.0, [{"line": 7, "text": "CUDA out of memory"}]),
        _owner_message("j2", "OutOfMemoryError", 3.5),
        _owner_message("j3", "ImportError", 0.25, [{"line": 1, "text": "No module named 'flash_attn'"}]),
    ]
    digest = messages.owner_digest("alice", "seren", "2023-07-01", jobs, "http://reports/x/index.html")
    text = digest["text"]
    assert (
        digest["kind"] == "digest" and digest["recipient"] == "alice" and digest["jobs"] == ["j1", "j2", "j3"]
    )
    assert "3 of your jobs on seren submitted on 2023-07-01 failed, 5.75 GPU-hours lost" in text
    assert text.index("OutOfMemoryError (Script): 2 job(s), 5.50 GPU-hours lost") < text.index("ImportError")
    assert "evidence (job j1, line 7): CUDA out of memory" in text
    assert "what to do: fix ImportError" in text and "Report: http://reports/x/index.html" in text
    # The same jobs give the same message id (a retry composes the same message); other jobs another.
    again = messages.owner_digest("alice", "seren", "2023-07-01", list(reversed(jobs)), "l")
    assert again["id"] == digest["id"]
    assert messages.owner_digest("alice", "seren", "2023-07-01", jobs[:1], "l")["id"] != digest["id"]


def test_the_report_link_is_under_the_setting_else_in_the_lake(tmp_path):
    lake = Lake(str(tmp_path / "lake"))
    assert messages.report_link("https://ops/r/", lake, "seren", "2023-07-01") == (
        "https://ops/r/cluster=seren/period=2023-07-01/index.html"
    )
    assert messages.report_link("", lake, "seren", "2023-07-01") == lake.url(
        "reports/cluster=seren/period=2023-07-01/index.html"
    )


def _step(step, status, dry_run=False, **result):
    return {"step": step, "status": status, "dry_run": dry_run, "result": result}


def test_the_recovery_state_is_read_from_the_action_log():
    assert messages.recovery_state([])[0] == "requested"
    assert messages.recovery_state([_step("open", "done")])[0] == "in progress"
    awaiting = [_step("open", "done"), _step("approval", "awaiting")]
    assert messages.recovery_state(awaiting)[0] == "awaiting approval"
    rejected = [*awaiting, _step("approval", "rejected", by="ops-anna", reason="node is fine")]
    assert messages.recovery_state(rejected) == ("rejected", "by ops-anna, node is fine")
    assert messages.recovery_state([*awaiting, _step("approval", "timed_out")])[0] == "approval timed out"
    planned = [_step("open", "planned", True), _step("restart", "planned", True, planned="would resubmit")]
    assert messages.recovery_state(planned) == ("planned", "would resubmit")
    restarted = [_step("restart", "done", restarted_at="T", detection_to_restart_s=8.5)]
    assert messages.recovery_state(restarted)[0] == "restarted"
    person = [{"step": "blast_radius", "status": "needs-person", "error": "NeedsPersonError: 3 nodes"}]
    assert messages.recovery_state(person) == ("needs a person", "NeedsPersonError: 3 nodes")


def test_the_page_gives_suspect_nodes_recovery_state_and_action_log():
    diagnosis = {
        "cluster": "kalos",
        "job_id": "77",
        "date": "2023-07-02",
        "reason": "NCCLTimeout",
        "category": "Infrastructure",
        "confidence": 0.9,
        "source": "rule",
        "evidence": [{"line": 12, "text": "NCCL watchdog timeout on rank 17"}],
        "mitigation": "cordon",
    }
    log = [_step("decide", "done", faulty=["kalos-n003"], stragglers=[]),
           _step("restart", "done", restarted_at="T", detection_to_restart_s=9.1)]  # fmt: skip
    request = {"recovery_id": "diag-kalos-77", "nodes": ["kalos-n001", "kalos-n003"], "dry_run": False}
    page = messages.page(
        diagnosis, {"gpu_num": 256, "job_type": "Pretrain"}, request, log, "s3://l/actions.jsonl"
    )
    assert page["kind"] == "page" and page["recovery_state"] == "restarted"
    assert "256 GPUs" in page["subject"] and "recovery restarted" in page["subject"]
    assert "Suspect nodes: kalos-n003" in page["text"]
    assert "line 12: NCCL watchdog timeout on rank 17" in page["text"]
    assert "Action log: s3://l/actions.jsonl" in page["text"]
    before = messages.page(diagnosis, {"gpu_num": 256}, request, [], "s3://l/actions.jsonl")
    assert before["recovery_state"] == "requested" and before["id"] != page["id"]  # one page per state
    assert "not localized yet; the job's nodes: kalos-n001, kalos-n003" in before["text"]


def test_the_late_notice_names_the_run_and_the_deadline():
    notice = messages.late_notice("diagnose_failures", "scheduled__2023-07-01", "seren", "2023-07-01",
                                  "2023-07-02 06:00 UTC", "running")  # fmt: skip
    assert notice["kind"] == "late" and notice["recipient"] == "oncall"
    assert "not done by 2023-07-02 06:00 UTC" in notice["subject"]
