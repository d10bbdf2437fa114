"""Kubernetes inputs of issue 31: Volcano Jobs (``batch.volcano.sh``) and Lists printed without a kind.

The real inputs are in ``tests/fixtures/field/jobs/`` (sources in its ``SOURCES.md``); the field tier
ingests them through the command line. Here the parser is checked on them field by field, and on
constructed objects (named so) for what no published object shows: GPUs, pods folded into their
Volcano Job, and every Volcano phase.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from acme.jobs.kubernetes import parse_kubernetes

FIELD = Path(__file__).resolve().parents[2] / "fixtures" / "field" / "jobs"
VOLCANO_RUNNING = FIELD / "volcano_website_quickstart_running.yaml"
VOLCANO_COMPLETED = FIELD / "volcano_website_quickstart_running_then_completed.yaml"
PYTORCH_LIST = FIELD / "pytorchoperator_readme_list_without_kind.yaml"


def parse(data: bytes | str, name: str = "input"):
    return parse_kubernetes(data, "c", source_file=name)


def one(result) -> dict:
    assert len(result.jobs) == 1, (result.jobs, result.rejects, result.skipped)
    return result.jobs.iloc[0].to_dict()


def iso(value) -> str | None:
    return None if value is None or value != value else value.isoformat()


# --- Lists without a kind -------------------------------------------------------------------------


def test_a_yaml_list_without_kind_is_read_as_a_list_of_its_items():
    result = parse(PYTORCH_LIST.read_bytes(), PYTORCH_LIST.name)
    job = one(result)
    assert job["job_id"] == "13ad0e7f-153b-11e9-b5c1-42010a80001e"
    assert (job["state"], job["gpu_num"]) == ("COMPLETED", 2)
    assert iso(job["start_time"]) == "2019-01-11T00:57:22+00:00"
    assert iso(job["end_time"]) == "2019-01-11T01:03:15+00:00"
    assert job["gpu_time"] == 706.0
    assert result.rejects.empty
    assert any("without a kind" in note for note in result.notes), result.notes


@pytest.mark.parametrize("kind", ["absent", None], ids=["no kind", "kind null"])
def test_a_json_list_without_kind_or_with_kind_null_is_read_as_a_list(kind):
    document = yaml.safe_load(PYTORCH_LIST.read_text())  # the real object, as kubectl -o json prints it
    if kind is None:
        document["kind"] = None
    job = one(parse(json.dumps(document, default=lambda t: t.isoformat().replace("+00:00", "Z"))))
    assert (job["state"], job["gpu_num"], job["gpu_time"]) == ("COMPLETED", 2, 706.0)


def test_an_object_without_kind_and_without_items_is_still_rejected():
    result = parse("apiVersion: v1\nmetadata: {name: x}\n")
    assert result.jobs.empty
    assert "kind is null" in result.rejects.iloc[0]["reason"]


# --- Volcano Jobs: the real objects ---------------------------------------------------------------


def test_a_running_volcano_job_is_a_job():
    result = parse(VOLCANO_RUNNING.read_bytes(), VOLCANO_RUNNING.name)
    job = one(result)
    assert (job["job_id"], job["job_name"], job["state"]) == (
        "default/quickstart-job",
        "quickstart-job",
        "RUNNING",
    )
    assert (job["gpu_num"], job["cpu_num"]) == (0, 3)  # 3 replicas x cpu 1
    assert iso(job["submit_time"]) == "2025-05-28T08:39:22+00:00"  # the first recorded transition
    assert iso(job["start_time"]) == "2025-05-28T08:39:30+00:00"  # the Running transition
    assert iso(job["end_time"]) is None
    assert not result.skipped


def test_a_completed_volcano_job_printed_as_its_state_takes_spec_and_history_from_the_earlier_snapshot():
    result = parse(VOLCANO_COMPLETED.read_bytes(), VOLCANO_COMPLETED.name)
    job = one(result)
    assert job["state"] == "COMPLETED"
    assert (iso(job["start_time"]), iso(job["end_time"])) == (
        "2025-05-28T08:39:30+00:00",
        "2025-05-28T08:41:11+00:00",
    )
    assert job["run_s"] == 101.0
    assert job["cpu_num"] == 3
    assert result.rows_in == 1
    assert any("took them from an older snapshot" in note for note in result.notes), result.notes


def test_the_completed_snapshot_alone_has_unknown_size_and_start_and_its_creation_from_running_duration():
    completed = VOLCANO_COMPLETED.read_text().split("\n---\n")[1]
    job = one(parse(completed))
    assert job["state"] == "COMPLETED"
    # runningDuration 1m49s counts from creation: 08:41:11 - 109 s
    assert iso(job["submit_time"]) == "2025-05-28T08:39:22+00:00"
    assert iso(job["start_time"]) is None and job["run_s"] != job["run_s"]  # unknown, not invented
    assert job["gpu_num"] is None or job["gpu_num"] != job["gpu_num"]  # no tasks printed: unknown


# --- Volcano Jobs: constructed (no published object has GPUs or its pods) -----------------------


def constructed_volcano_job(phase: str = "Completed", **extra) -> dict:
    """A Volcano Job in the API's shape (``volcano-sh/apis`` batch/v1alpha1), written for these tests."""
    job = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {
            "name": "llm-pretrain",
            "namespace": "team-a",
            "uid": "vc-uid-1",
            "creationTimestamp": "2024-03-01T10:00:00Z",
        },
        "spec": {
            "minAvailable": 3,
            "schedulerName": "volcano",
            "tasks": [
                {
                    "name": "master",
                    "replicas": 1,
                    "template": {"spec": {"containers": [{"name": "m", "resources": {
                        "limits": {"nvidia.com/gpu": "8", "cpu": "16"}}}]}},
                },
                {
                    "name": "worker",
                    "replicas": 2,
                    "template": {"spec": {"containers": [{"name": "w", "resources": {
                        "requests": {"nvidia.com/gpu": 8, "cpu": "16"}}}]}},
                },
            ],
        },
        "status": {
            "conditions": [
                {"status": "Pending", "lastTransitionTime": "2024-03-01T10:00:01Z"},
                {"status": "Running", "lastTransitionTime": "2024-03-01T10:05:00Z"},
                {"status": phase, "lastTransitionTime": "2024-03-01T12:05:00Z"},
            ],
            "state": {"phase": phase, "lastTransitionTime": "2024-03-01T12:05:00Z"},
        },
    }  # fmt: skip
    job.update(extra)
    return job


def constructed_pod(name: str, node: str, *, owner: bool = True, exit_code: int = 0) -> dict:
    meta: dict = {
        "name": name,
        "namespace": "team-a",
        "uid": f"pod-{name}",
        "creationTimestamp": "2024-03-01T10:00:02Z",
        "labels": {"volcano.sh/job-name": "llm-pretrain", "volcano.sh/task-spec": "worker"},
    }
    if owner:
        meta["ownerReferences"] = [
            {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "llm-pretrain",
             "uid": "vc-uid-1", "controller": True}
        ]  # fmt: skip
    terminated = {
        "exitCode": exit_code,
        "startedAt": "2024-03-01T10:05:00Z",
        "finishedAt": "2024-03-01T12:04:00Z",
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {
            "nodeName": node,
            "containers": [{"name": "w", "resources": {"limits": {"nvidia.com/gpu": "8"}}}],
        },
        "status": {
            "phase": "Succeeded" if exit_code == 0 else "Failed",
            "containerStatuses": [{"name": "w", "state": {"terminated": terminated}}],
        },
    }


def test_constructed_volcano_job_size_is_replicas_times_the_task_resources():
    job = one(parse(json.dumps(constructed_volcano_job())))
    assert (job["job_id"], job["gpu_num"], job["cpu_num"]) == (
        "vc-uid-1",
        24,
        48,
    )  # (1 + 2) x 8 GPUs, x 16 CPUs
    assert job["gpu_share"] != job["gpu_share"]  # whole GPUs
    assert iso(job["submit_time"]) == "2024-03-01T10:00:00+00:00"  # creationTimestamp wins
    assert iso(job["start_time"]) == "2024-03-01T10:05:00+00:00"
    assert job["run_s"] == 7200.0 and job["gpu_time"] == 24 * 7200.0


@pytest.mark.parametrize(
    ("phase", "state"),
    [("Completed", "COMPLETED"), ("Failed", "FAILED"), ("Terminated", "FAILED"), ("Aborted", "CANCELLED"),
     ("Running", "RUNNING"), ("Restarting", "RUNNING"), ("Completing", "RUNNING"), ("Terminating", "RUNNING"),
     ("Aborting", "RUNNING")],
)  # fmt: skip
def test_constructed_volcano_phases(phase, state):
    job = one(parse(json.dumps(constructed_volcano_job(phase))))
    assert job["state"] == state
    if state == "RUNNING":
        assert iso(job["end_time"]) is None
    else:
        assert iso(job["end_time"]) == "2024-03-01T12:05:00+00:00"


def test_constructed_pending_volcano_job_that_never_ran_is_skipped_as_not_started():
    job = constructed_volcano_job("Pending")
    job["status"]["conditions"] = [{"status": "Pending", "lastTransitionTime": "2024-03-01T10:00:01Z"}]
    result = parse(json.dumps(job))
    assert result.jobs.empty and result.rejects.empty
    assert sum(result.skipped.values()) == 1 and any("not started" in r for r in result.skipped)


def test_constructed_volcano_job_with_an_unknown_phase_is_rejected_with_it():
    result = parse(json.dumps(constructed_volcano_job("Exploded")))
    assert result.jobs.empty
    assert "unknown Volcano Job phase 'Exploded'" in result.rejects.iloc[0]["reason"]


def test_constructed_volcano_job_listed_with_its_pods_folds_them_by_owner_and_by_label():
    pods = [
        constructed_pod("llm-pretrain-master-0", "gpu-01"),
        constructed_pod("llm-pretrain-worker-0", "gpu-02", owner=False),  # found by volcano.sh/job-name
        constructed_pod("llm-pretrain-worker-1", "gpu-03", exit_code=1),
    ]
    listing = {"apiVersion": "v1", "kind": "List", "items": [constructed_volcano_job(), *pods]}
    result = parse(json.dumps(listing))
    job = one(result)
    assert result.rows_in == 1  # the Job and its three pods are one record
    assert (job["job_id"], job["state"], job["gpu_num"]) == ("vc-uid-1", "COMPLETED", 24)
    assert job["node_list"] == "gpu-01,gpu-02,gpu-03" and job["node_num"] == 3


def test_constructed_volcano_pods_without_their_job_are_one_job():
    pods = [
        constructed_pod("llm-pretrain-master-0", "gpu-01"),
        constructed_pod("llm-pretrain-worker-0", "gpu-02"),
    ]
    job = one(parse(json.dumps({"apiVersion": "v1", "kind": "List", "items": pods})))
    assert job["job_name"] == "llm-pretrain" and job["node_num"] == 2


def test_a_batch_v1_job_is_not_taken_for_a_volcano_job():
    job = constructed_volcano_job()
    batch = copy.deepcopy(job)
    batch["apiVersion"] = "batch/v1"
    batch["spec"] = {"template": {"spec": {"containers": [{"name": "c"}]}}}
    batch["status"] = {"conditions": [{"type": "Complete", "status": "True", "lastTransitionTime": "2024-03-01T11:00:00Z"}],
                       "completionTime": "2024-03-01T11:00:00Z", "startTime": "2024-03-01T10:01:00Z"}  # fmt: skip
    row = one(parse(json.dumps(batch)))
    assert (row["state"], row["gpu_num"]) == ("COMPLETED", 0)
