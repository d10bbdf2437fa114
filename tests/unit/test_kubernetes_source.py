"""acme.jobs.kubernetes: real and constructed Pod/Job extracts into canonical jobs.

Fixtures and their provenance: tests/fixtures/k8s/SOURCES.md.
"""

from __future__ import annotations

import copy
import json
from datetime import date
from decimal import Decimal
from pathlib import Path

import pandas as pd
import pytest

from acme.errors import InputError
from acme.jobs.classify import JobTypeClassifier
from acme.jobs.kubernetes import MAX_RECORD_CHARS, SKIP_NOT_ADMITTED, _quantity, _Reject, parse_kubernetes
from acme.jobs.schema import JOB_COLUMNS, JOB_TYPES, STATES

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "k8s"

REAL = [
    "k9s_job_complete.json",
    "k9s_pod_running.json",
    "spinnaker_job_deadline_exceeded.json",
    "daocloud_pytorchjob_worker_succeeded.json",
    "runai_reservation_pod_running_gpu.json",
    "runai_fractional_pod_running.json",
]

# The rules these tests classify with: fixed here so that edits to the bundled
# include/config/job_types.yaml do not change what this parser's tests expect.
RULES = """
rules:
  - {job_type: CPU, gpus: zero}
  - {job_type: Eval, label: "acme.io/job-type=(?i)eval"}
  - {job_type: Eval, name: "eval|mmlu"}
  - {job_type: MLLM, name: "llava|mllm"}
  - {job_type: SFT, name: "sft|finetune"}
  - {job_type: Pretrain, name: "pretrain"}
  - {job_type: Debug, name: "debug|test"}
  - {job_type: Debug, partition: "debug|dev"}
  - {job_type: Other}
"""


@pytest.fixture(scope="module")
def classifier(tmp_path_factory) -> JobTypeClassifier:
    path = tmp_path_factory.mktemp("rules") / "job_types.yaml"
    path.write_text(RULES)
    return JobTypeClassifier.from_yaml(path)


@pytest.fixture
def parse(classifier):
    def run(data, source_file="extract.json", **kwargs):
        kwargs.setdefault("classifier", classifier)
        result = parse_kubernetes(data, "acme-k8s", source_file=source_file, **kwargs)
        assert_invariant(result)
        return result

    return run


def assert_invariant(result) -> None:
    assert result.rows_in == (
        len(result.jobs) + len(result.rejects) + result.skipped_other_days + sum(result.skipped.values())
    )
    assert list(result.jobs.columns) == list(JOB_COLUMNS)


def load(name: str):
    return json.loads((FIXTURES / name).read_text())


def read(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def ts(text: str) -> pd.Timestamp:
    return pd.Timestamp(text)


def one(result) -> dict:
    assert len(result.jobs) == 1, result.jobs
    return result.jobs.iloc[0].to_dict()


def by_name(result) -> dict[str, dict]:
    return {row["job_name"]: row for row in result.jobs.to_dict("records")}


def pod(name: str, *, phase: str = "Running", namespace: str = "ns", created: str = "2024-05-01T00:00:00Z",
        containers=None, status=None, **meta) -> dict:  # fmt: skip
    """A minimal Pod for the edge cases the fixtures do not cover."""
    body = {"phase": phase, **(status or {})}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{name}",
            "creationTimestamp": created,
            **meta,
        },
        "spec": {"containers": containers if containers is not None else [{"name": "main"}]},
        "status": body,
    }


def job(name: str, *, parallelism=None, completions=None, gpus="1", **meta) -> dict:
    spec = {
        "template": {
            "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": gpus}}}]}
        }
    }
    if parallelism is not None:
        spec["parallelism"] = parallelism
    if completions is not None:
        spec["completions"] = completions
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "ns", "creationTimestamp": "2024-05-01T00:00:00Z", **meta},
        "spec": spec,
        "status": {"startTime": "2024-05-01T00:00:01Z"},
    }


# --- real objects ---------------------------------------------------------------------------


def test_k9s_job_completed(parse):
    result = parse(read("k9s_job_complete.json"), "k9s_job_complete.json")
    row = one(result)
    assert row["cluster"] == "acme-k8s"
    assert row["job_id"] == "7473e6d0-cb3b-11e9-990f-42010a800218"  # metadata.uid
    assert row["job_name"] == "hello-1567179180"
    assert row["user"] == "default"  # no user label: the namespace
    assert row["state"] == "COMPLETED" and row["state_group"] == "completed"
    assert row["submit_time"] == ts("2019-08-30T15:33:02Z")
    assert row["start_time"] == ts("2019-08-30T15:33:02Z")  # status.startTime
    assert row["end_time"] == ts("2019-08-30T15:33:10Z")  # status.completionTime
    assert row["run_s"] == 8.0 and row["queue_s"] == 0.0
    assert row["gpu_num"] == 0 and row["gpu_time"] == 0.0
    assert pd.isna(row["cpu_num"])  # resources: {}
    assert pd.isna(row["node_num"]) and pd.isna(row["node_list"])  # no pods in the extract
    assert pd.isna(row["exit_code"])
    assert row["job_type"] == "CPU"
    assert (
        row["source"] == "k8s" and row["source_file"] == "k9s_job_complete.json" and row["source_line"] == 1
    )
    assert result.jobs["submit_time"].dtype == "datetime64[us, UTC]"


def test_k9s_pod_running(parse):
    row = one(parse(read("k9s_pod_running.json")))
    assert row["job_id"] == "614908ed-415b-4506-8370-e3e36fa8cc13"
    assert row["job_name"] == "nginx"
    assert row["state"] == "RUNNING"
    assert row["submit_time"] == ts("2019-08-09T05:12:19Z")
    assert row["start_time"] == ts("2019-08-09T05:12:20Z")  # earliest container running.startedAt
    assert pd.isna(row["end_time"]) and pd.isna(row["run_s"]) and pd.isna(row["gpu_time"])
    assert row["cpu_num"] == 1  # 100m + 50m = 0.15 cores, rounded up
    assert row["gpu_num"] == 0
    assert row["node_num"] == 1 and row["node_list"] == "minikube"
    assert pd.isna(row["exit_code"])


def test_spinnaker_job_deadline_exceeded_is_timeout(parse):
    result = parse(read("spinnaker_job_deadline_exceeded.json"))
    row = one(result)
    assert row["state"] == "TIMEOUT" and row["state_group"] == "failed"
    assert row["job_id"] == "test/test-runjob"  # the stored object has no metadata.uid
    assert any("without metadata.uid" in note for note in result.notes)
    assert row["user"] == "test"
    assert row["submit_time"] == ts("2021-01-29T00:00:20Z")
    assert row["start_time"] == ts("2021-01-29T00:00:20Z")
    assert row["end_time"] == ts("2021-01-29T00:15:20Z")  # the Failed condition's lastTransitionTime
    assert row["run_s"] == 900.0  # = activeDeadlineSeconds
    assert pd.isna(row["exit_code"]) and pd.isna(row["node_list"])


def test_daocloud_pytorchjob_worker_folds_into_its_workload(parse):
    result = parse(read("daocloud_pytorchjob_worker_succeeded.json"))
    row = one(result)
    assert row["job_id"] == "e5a8b05d-1f03-4717-8e1c-4ec928014b7b"  # the PyTorchJob's uid (ownerReferences)
    assert row["job_name"] == "neko-tensorboard-job-test-202404181843-skxivllb"
    assert row["state"] == "COMPLETED"
    assert row["submit_time"] == ts("2024-04-18T10:43:36Z")
    assert row["start_time"] == ts("2024-04-18T10:43:39Z")  # container startedAt, not pod startTime
    assert row["end_time"] == ts("2024-04-18T10:46:34Z")
    assert row["gpu_num"] == 1  # HAMi nvidia.com/vgpu: '1' (gpucores/gpumem are not devices)
    assert row["gpu_share"] == 0.2  # ... limited to 20% of the card (nvidia.com/gpucores: '20')
    assert row["cpu_num"] == 4
    assert row["gpu_time"] == 0.2 * 175.0
    assert row["node_list"] == "worker-a800-1" and row["node_num"] == 1
    assert row["exit_code"] == 0
    assert row["job_type"] == "Debug"  # "...-job-test-..." in the name
    assert any("folded" in note for note in result.notes)


def test_runai_reservation_pod_holds_one_gpu(parse):
    row = one(parse(read("runai_reservation_pod_running_gpu.json")))
    assert row["job_id"] == "3b47e794-97f0-4824-b7d5-bb44c122039e"
    assert row["state"] == "RUNNING"
    assert row["gpu_num"] == 1
    assert pd.isna(row["cpu_num"])  # BestEffort: no cpu request
    assert row["start_time"] == ts("2024-03-31T09:03:27Z")
    assert row["node_list"] == "i-0b498db53280b86a6"
    assert row["user"] == "runai-reservation"
    assert row["job_type"] == "Other"


def test_runai_fractional_pod(parse):
    result = parse(read("runai_fractional_pod_running.json"))
    row = one(result)
    assert row["job_name"] == "frac-1"  # owner RunaiJob
    assert row["job_id"] == "2237ca39-cac0-4601-b658-8a3c5f406a4f"
    assert row["user"] == "test@run.ai"  # annotation "user"
    assert row["gpu_num"] == 1  # gpu-fraction 0.5 holds one device ...
    assert row["gpu_share"] == 0.5  # ... half of it
    assert any("fractional GPU" in note for note in result.notes)
    assert row["cpu_num"] == 1  # 100m
    assert row["state"] == "RUNNING"
    assert row["submit_time"] == ts("2024-03-31T09:03:22Z")
    assert row["start_time"] == ts("2024-03-31T09:03:51Z")


# --- list shapes ----------------------------------------------------------------------------


def _comparable(result) -> pd.DataFrame:
    return (
        result.jobs.drop(columns=["source_line", "source_file"]).sort_values("job_id").reset_index(drop=True)
    )


def test_list_bare_list_and_json_lines_give_the_same_jobs(parse):
    objects = [load(name) for name in REAL]
    as_list = parse(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    as_bare = parse(json.dumps(objects))
    as_lines = parse("\n".join(json.dumps(o) for o in objects) + "\n", "extract.jsonl")
    assert len(as_list.jobs) == len(REAL) == as_list.rows_in
    pd.testing.assert_frame_equal(_comparable(as_list), _comparable(as_bare))
    pd.testing.assert_frame_equal(_comparable(as_list), _comparable(as_lines))
    assert sorted(as_list.jobs["source_line"]) == list(range(1, len(REAL) + 1))  # 1-based item index
    assert any("JSON Lines" in note for note in as_lines.notes)


def test_json_lines_source_line_is_the_physical_line(parse):
    text = (
        "\n" + json.dumps(load("k9s_pod_running.json")) + "\n\n" + json.dumps(load("k9s_job_complete.json"))
    )
    result = parse(text, "x.jsonl")
    assert by_name(result)["nginx"]["source_line"] == 2
    assert by_name(result)["hello-1567179180"]["source_line"] == 4


def test_concatenated_pretty_printed_objects_as_kubectl_watch_prints_them(parse):
    objects = [load("k9s_pod_running.json"), load("k9s_job_complete.json")]
    text = "\n".join(json.dumps(o, indent=4) for o in objects)
    result = parse(text, "watch.json")
    assert sorted(result.jobs["job_name"]) == ["hello-1567179180", "nginx"]
    assert by_name(result)["hello-1567179180"]["source_line"] == text.split("\n").index("{", 1) + 1
    with pytest.raises(InputError, match=r"invalid JSON: .* at line \d+ column \d+"):
        parse(text[:-40], "watch.json")


def test_json_lines_keep_a_line_separator_inside_a_string(parse):
    p = pod("sep", labels={"note": "a\u2028b"})
    text = json.dumps(p, ensure_ascii=False) + "\n" + json.dumps(load("k9s_pod_running.json")) + "\n"
    result = parse(text, "x.jsonl")
    assert sorted(result.jobs["job_name"]) == ["nginx", "sep"] and result.rejects.empty


def test_podlist_items_without_kind_take_the_list_kind(parse):
    items = [load("k9s_pod_running.json"), load("runai_reservation_pod_running_gpu.json")]
    for item in items:
        del item["kind"], item["apiVersion"]  # as the API server returns list items
    result = parse(json.dumps({"kind": "PodList", "apiVersion": "v1", "items": items}))
    assert len(result.jobs) == 2 and result.rejects.empty


def test_single_object_str_bytes_and_bom(parse):
    text = (FIXTURES / "k9s_job_complete.json").read_text()
    for data in (text, text.encode(), b"\xef\xbb\xbf" + text.encode()):
        assert one(parse(data))["job_name"] == "hello-1567179180"


def test_empty_list_is_a_quiet_day_not_an_error(parse):
    result = parse(b'{"apiVersion": "v1", "kind": "List", "items": []}')
    assert result.rows_in == 0 and result.jobs.empty
    assert parse(b"[]").rows_in == 0


def test_day_is_accepted_and_ignored(parse):
    result = parse(read("k9s_job_complete.json"), day=date(2031, 1, 1))
    assert len(result.jobs) == 1 and result.skipped_other_days == 0


def test_default_classifier_is_the_configured_one():
    result = parse_kubernetes(read("daocloud_pytorchjob_worker_succeeded.json"), "c", source_file="f")
    assert one(result)["job_type"] in JOB_TYPES


# --- folding --------------------------------------------------------------------------------


def test_job_with_pods_folds_into_one_oom_job(parse):
    result = parse(read("constructed_job_backoff_oom_list.json"))
    row = one(result)
    assert result.rows_in == 1  # three records, one job
    assert any("2 pods folded" in note for note in result.notes)
    assert row["job_id"] == "0f1c2d3e-5a6b-4c7d-8e9f-000000000001"
    assert row["job_name"] == "sft-llama-7b"
    assert row["user"] == "alice"  # label acme.io/user
    assert row["state"] == "OUT_OF_MEMORY"  # BackoffLimitExceeded, and the last attempt was OOMKilled
    assert row["exit_code"] == 137
    assert row["node_list"] == "gpu-node-01,gpu-node-02" and row["node_num"] == 2
    assert row["gpu_num"] == 8  # template limits x parallelism 1; the retry does not add GPUs
    assert row["cpu_num"] == 32  # 31500m rounded up
    assert row["submit_time"] == ts("2024-05-02T01:00:00Z")
    assert row["start_time"] == ts("2024-05-02T01:00:00Z")  # Job status.startTime
    assert row["end_time"] == ts("2024-05-02T03:10:06Z")  # Failed (not FailureTarget) transition
    assert row["job_type"] == "SFT"
    assert row["source_line"] == 2  # the Job's place in the list


def test_pods_without_their_job_fold_under_the_same_job_id(parse):
    items = [i for i in load("constructed_job_backoff_oom_list.json")["items"] if i["kind"] == "Pod"]
    result = parse(json.dumps(items))
    row = one(result)
    assert row["job_id"] == "0f1c2d3e-5a6b-4c7d-8e9f-000000000001"  # ownerReference / controller-uid
    assert row["job_name"] == "sft-llama-7b"
    assert row["state"] == "OUT_OF_MEMORY"  # the pod that ended last decides
    assert row["exit_code"] == 137
    assert row["gpu_num"] == 8  # attempts did not overlap
    assert row["submit_time"] == ts("2024-05-02T01:00:01Z")  # the earliest pod
    assert row["start_time"] == ts("2024-05-02T01:02:10Z")
    assert row["end_time"] == ts("2024-05-02T03:10:04Z")
    assert row["user"] == "team-nlp"  # the Job carried the user label
    assert any("only through their pods" in note for note in result.notes)


def test_completed_job_after_a_failed_attempt_reports_the_successful_pod(parse):
    doc = load("constructed_job_backoff_oom_list.json")
    the_job = next(i for i in doc["items"] if i["kind"] == "Job")
    the_job["status"]["conditions"] = [
        {"type": "Complete", "status": "True", "lastTransitionTime": "2024-05-02T03:10:06Z"}
    ]
    the_job["status"]["completionTime"] = "2024-05-02T03:10:05Z"
    last = doc["items"][2]
    last["status"]["phase"] = "Succeeded"
    last["status"]["containerStatuses"][0]["state"]["terminated"].update(exitCode=0, reason="Completed")
    row = one(parse(json.dumps(doc)))
    assert row["state"] == "COMPLETED" and row["exit_code"] == 0
    assert row["end_time"] == ts("2024-05-02T03:10:05Z")  # completionTime


def test_job_without_pods_from_kubernetes_issue_92245(parse):
    row = one(parse(read("constructed_k8s92245_job_backoff.json")))
    assert row["state"] == "FAILED"
    assert row["start_time"] == ts("2020-06-18T06:01:55Z")
    assert row["end_time"] == ts("2020-06-18T06:06:48Z")
    assert pd.isna(row["exit_code"]) and pd.isna(row["node_num"])


@pytest.mark.parametrize(
    ("parallelism", "completions", "gpus"),
    [(None, None, 2), (4, 8, 8), (4, 2, 4), (1, 5, 2), (0, None, 2)],
)
def test_job_gpus_are_template_times_width(parse, parallelism, completions, gpus):
    row = one(
        parse(json.dumps([job("train", parallelism=parallelism, completions=completions, gpus="2", uid="u")]))
    )
    assert row["gpu_num"] == gpus


def test_training_operator_pods_fold_by_label_and_add_up_while_overlapping(parse):
    result = parse(read("constructed_pytorchjob_pods.json"))
    row = one(result)
    assert row["job_name"] == "llava-13b-pt"
    assert row["job_id"] == "team-mm/llava-13b-pt"  # no owner uid in the labels
    assert row["gpu_num"] == 16 and row["cpu_num"] == 192  # master and worker ran together
    assert row["node_list"] == "gpu-node-11,gpu-node-12" and row["node_num"] == 2
    assert row["state"] == "COMPLETED" and row["exit_code"] == 0
    assert row["user"] == "bob"
    assert row["start_time"] == ts("2024-05-04T08:01:00Z")
    assert row["end_time"] == ts("2024-05-04T12:00:00Z")
    assert row["job_type"] == "MLLM"


def test_a_job_name_reused_after_deletion_is_a_new_job(parse):
    first = job("nightly", uid="uid-1")
    second = job("nightly", uid="uid-2", creationTimestamp="2024-05-02T00:00:00Z")
    result = parse(json.dumps([first, second]))
    assert sorted(result.jobs["job_id"]) == ["uid-1", "uid-2"]


def test_watch_events_fold_into_the_latest_snapshot(parse):
    result = parse(read("constructed_watch_events.jsonl"), "watch.jsonl")
    row = one(result)
    assert result.rows_in == 1
    assert any("2 older snapshots" in note for note in result.notes)
    assert row["state"] == "COMPLETED"  # resourceVersion 110, although the Running one (105) comes later
    assert row["source_line"] == 2
    assert row["end_time"] == ts("2024-05-03T00:20:00Z")


# --- states ---------------------------------------------------------------------------------

POD_STATES = {
    "eval-mmlu-evicted": ("PREEMPTED", 137),
    "pretrain-preempted": ("PREEMPTED", 143),
    "sft-node-lost": ("NODE_FAIL", None),
    "debug-cancelled": ("CANCELLED", 143),
    "pretrain-70b-queued": ("RUNNING", None),
    "fyxxs4ei": ("COMPLETED", 0),
    "sft-oom": ("OUT_OF_MEMORY", 137),
    "eval-deadline": ("TIMEOUT", 137),
    "data-prep-init-fails": ("FAILED", 2),
}


def test_pod_states(parse):
    result = parse(read("constructed_pod_states.jsonl"), "states.jsonl")
    rows = by_name(result)
    assert set(rows) == set(POD_STATES) and result.rejects.empty
    for name, (state, code) in POD_STATES.items():
        assert rows[name]["state"] == state, name
        assert pd.isna(rows[name]["exit_code"]) if code is None else rows[name]["exit_code"] == code, name


def test_pod_state_details(parse):
    rows = by_name(parse(read("constructed_pod_states.jsonl"), "states.jsonl"))
    queued = rows["pretrain-70b-queued"]  # Pending and never started
    assert pd.isna(queued["start_time"]) and pd.isna(queued["end_time"]) and pd.isna(queued["node_num"])
    assert queued["gpu_num"] == 8 and queued["cpu_num"] == 64  # GPUs given as a JSON number
    assert rows["sft-node-lost"]["end_time"] == ts("2024-05-03T01:05:00Z")  # deletionTimestamp
    assert rows["sft-oom"]["gpu_num"] == 1 and rows["sft-oom"]["cpu_num"] == 1  # 500m
    assert rows["data-prep-init-fails"]["cpu_num"] == 4  # init container 4 > app container 2
    assert rows["data-prep-init-fails"]["end_time"] == ts("2024-05-03T00:01:00Z")


def test_succeeded_pod_with_oomkilled_exit_0_stays_completed_with_a_note(parse):
    result = parse(read("constructed_pod_states.jsonl"), "states.jsonl")
    assert by_name(result)["fyxxs4ei"]["end_time"] == ts("2019-08-29T00:51:41Z")
    assert any("OOMKilled with exit code 0" in note for note in result.notes)


def test_pod_on_a_gcd_node_removed_by_podgc_is_node_fail_and_deleted_pending_is_cancelled(parse):
    gc = pod(
        "gc",
        status={"conditions": [{"type": "DisruptionTarget", "status": "True", "reason": "DeletionByPodGC"}]},
    )
    gone = pod("gone", phase="Pending", deletionTimestamp="2024-05-01T00:05:00Z")
    shutdown = pod("shutdown", phase="Failed", status={"reason": "Terminated"})
    rows = by_name(parse(json.dumps([gc, gone, shutdown])))
    assert rows["gc"]["state"] == "NODE_FAIL"
    assert rows["gone"]["state"] == "CANCELLED" and rows["gone"]["end_time"] == ts("2024-05-01T00:05:00Z")
    assert rows["shutdown"]["state"] == "PREEMPTED"  # the kubelet's node-shutdown reason


def test_a_pod_that_failed_on_its_own_and_was_then_deleted_stays_failed(parse):
    failed = pod(
        "failed-then-deleted",
        phase="Failed",
        deletionTimestamp="2024-05-01T01:00:00Z",
        status={"containerStatuses": [{"name": "main", "state": {"terminated": {"exitCode": 1}}}]},
    )
    assert one(parse(json.dumps([failed])))["state"] == "FAILED"


def test_job_states_from_conditions(parse):
    def with_condition(name, kind, reason=None):
        j = job(name, uid=name)
        j["status"]["conditions"] = [
            {"type": kind, "status": "True", "reason": reason, "lastTransitionTime": "2024-05-01T02:00:00Z"}
        ]
        return j

    suspended = job("queued", uid="queued", gpus="0")
    suspended["spec"]["suspend"] = True
    suspended["status"] = {"conditions": [{"type": "Suspended", "status": "True"}]}
    deleting = job("deleting", uid="deleting", deletionTimestamp="2024-05-01T03:00:00Z")
    items = [
        with_condition("done", "Complete"),
        with_condition("deadline", "Failed", "DeadlineExceeded"),
        with_condition("backoff", "Failed", "BackoffLimitExceeded"),
        with_condition("policy", "Failed", "PodFailurePolicy"),
        with_condition("failing", "FailureTarget", "BackoffLimitExceeded"),
        with_condition("not-yet", "Failed", None),
        suspended,
        deleting,
    ]
    items[5]["status"]["conditions"][0]["status"] = "False"  # a condition that is not true does not count
    rows = by_name(parse(json.dumps(items)))
    assert {name: row["state"] for name, row in rows.items()} == {
        "done": "COMPLETED",
        "deadline": "TIMEOUT",
        "backoff": "FAILED",
        "policy": "FAILED",
        "failing": "FAILED",
        "not-yet": "RUNNING",
        "queued": "RUNNING",
        "deleting": "CANCELLED",
    }
    assert rows["done"]["end_time"] == ts("2024-05-01T02:00:00Z")
    assert pd.isna(rows["queued"]["start_time"])
    assert rows["deleting"]["end_time"] == ts("2024-05-01T03:00:00Z")


def test_times_are_converted_to_utc_and_zero_time_is_null(parse):
    p = pod(
        "tz",
        created="2024-05-01T08:00:00+08:00",
        status={
            "containerStatuses": [
                {"name": "main", "state": {"running": {"startedAt": "2024-05-01T01:00:00.123456+01:00"}}},
                {"name": "x", "lastState": {"terminated": {"startedAt": "0001-01-01T00:00:00Z"}}},
            ]
        },
    )
    row = one(parse(json.dumps([p])))
    assert row["submit_time"] == ts("2024-05-01T00:00:00Z")
    assert row["start_time"] == ts("2024-05-01T00:00:00.123456Z")


def test_user_label_order(parse):
    p = pod("u", labels={"owner": "carol"}, annotations={"acme.io/user": "dave"})
    assert one(parse(json.dumps([p])))["user"] == "carol"  # labels before annotations
    p = pod("v", annotations={"owner": "erin", "user": "frank"})
    assert one(parse(json.dumps([p])))["user"] == "frank"  # acme.io/user, user, owner, username


def test_mig_and_amd_gpus_count_and_other_gpu_resources_do_not(parse):
    containers = [
        {"name": "a", "resources": {"limits": {"nvidia.com/mig-1g.5gb": "2", "nvidia.com/gpumem": "1024"}}},
        {"name": "b", "resources": {"requests": {"amd.com/gpu": "1"}, "limits": {"amd.com/gpu": "1"}}},
    ]
    assert one(parse(json.dumps([pod("g", containers=containers)])))["gpu_num"] == 3


@pytest.mark.parametrize(
    ("text", "value"),
    [("500m", "0.5"), ("2", "2"), ("1.5", "1.5"), ("2000m", "2"), ("1k", "1000"), ("1Ki", "1024"),
     ("1e3", "1000"), ("0.000000000001E", "1e6"), ("100u", "0.0001"), (4, "4"), (0.25, "0.25")],
)  # fmt: skip
def test_quantities(text, value):
    assert _quantity(text, "cpu") == Decimal(value)


@pytest.mark.parametrize(
    "text", ["lots", "", "1.5.2", "-1", "1K", "0x10", None, True, [1], float("nan"), "1E", "1e400", 10**30]
)
def test_bad_quantities(text):
    with pytest.raises(_Reject, match="bad quantity"):
        _quantity(text, "cpu")


# --- bad input ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "problem", "line"),
    [
        (b"", "empty input", None),
        (b" \n\t\n", "empty input", None),
        (b'{"kind": "List", "items": [\n  {"kind": "Pod",}\n]}', "invalid JSON: Expecting property name", 2),
        (b"[" * 100_000, "nested too deeply", None),
        (b'{"a":' * 100_000, "nested too deeply", None),
        (b"42", "got a number", None),
        (b'"pods"', "got a string", None),
        (b'{"metadata": {}}', "without 'items' or 'kind'", None),
        (b'{"kind": "List", "items": {"a": 1}}', "'items' is an object, not a list", None),
        (
            b'[{"kind": "Pod"},\n {"metadata": {"name": "caf\xe9"}}]',
            "not UTF-8: byte 0xe9 at byte offset 45",
            2,
        ),
    ],
)
def test_input_errors(parse, data, problem, line):
    with pytest.raises(InputError) as caught:
        parse(data, "bad.json")
    assert caught.value.source == "bad.json"
    assert problem in caught.value.problem
    assert caught.value.line == line
    assert str(caught.value).startswith("bad.json")


def test_invalid_json_names_line_and_column(parse):
    with pytest.raises(InputError, match=r"bad\.json:3: invalid JSON: .* at line 3 column 5"):
        parse(b'[\n {"kind": "Pod"},\n    oops\n]', "bad.json")


def test_records_that_are_not_jobs_are_rejected_with_their_reason(parse):
    ok = pod("fine")
    bad_gpu = pod("half-gpu", containers=[{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "0.5"}}}])
    bad_cpu = pod("lots-cpu", containers=[{"name": "c", "resources": {"requests": {"cpu": "lots"}}}])
    no_created = pod("no-created")
    del no_created["metadata"]["creationTimestamp"]
    items = [
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc"}},
        {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "vcjob"}},
        {"apiVersion": "v1", "kind": "ConfigMap"},
        42,
        ["a", "list"],
        {"kind": "Pod", "status": {"phase": "Running"}},
        no_created,
        pod("bad-time", created="yesterday"),
        pod("naive-time", created="2024-05-01T00:00:00"),
        bad_gpu,
        bad_cpu,
        pod("lost", phase="Unknown"),
        pod("manifest", phase=None),
        pod("odd", containers="not a list"),
        ok,
    ]
    result = parse(json.dumps({"kind": "List", "apiVersion": "v1", "items": items}))
    assert list(result.jobs["job_name"]) == ["fine"]
    assert result.rows_in == len(items)
    # Objects of other kinds are not defects: skipped with a count per kind, not quarantined.
    # A Volcano Job is a job (issue 31): this one, without a status, has not started yet.
    assert result.skipped == {
        "not a job object: kind Service (v1)": 1,
        SKIP_NOT_ADMITTED: 1,
        "not a job object: kind ConfigMap (v1)": 1,
    }
    reasons = dict(zip(result.rejects["source_line"], result.rejects["reason"], strict=True))
    assert reasons == {
        4: "not a JSON object (got a number)",
        5: "not a JSON object (got a list)",
        6: "metadata missing",
        7: "metadata.creationTimestamp missing",
        8: "bad timestamp in metadata.creationTimestamp: 'yesterday'",
        9: "bad timestamp in metadata.creationTimestamp: '2024-05-01T00:00:00' has no time zone (RFC 3339 needs one)",
        10: "bad quantity nvidia.com/gpu='0.5' in containers[0]: GPUs are whole devices",
        11: "bad quantity containers[0] cpu: 'lots'",
        12: "unrecognised pod phase 'Unknown': state cannot be determined",
        13: "status.phase missing: not an object read from a cluster",
        14: "spec.containers is a string, not a list",
    }
    assert set(result.rejects["source_file"]) == {"extract.json"}
    assert json.loads(result.rejects["record"].iloc[2])["kind"] == "Pod"  # the record, as JSON text


def test_pods_of_a_rejected_job_are_rejected_with_it(parse):
    broken = copy.deepcopy(load("constructed_job_backoff_oom_list.json"))
    the_job = next(i for i in broken["items"] if i["kind"] == "Job")
    the_job["metadata"]["creationTimestamp"] = "not a time"
    result = parse(json.dumps(broken))
    assert result.jobs.empty and result.rows_in == 3
    reasons = sorted(result.rejects["reason"])
    assert reasons[0].startswith("bad timestamp in metadata.creationTimestamp")
    assert reasons[1:] == ["pod of a rejected Job team-nlp/sft-llama-7b (line 2)"] * 2


def test_json_lines_with_bad_lines_keep_the_good_ones(parse):
    good = json.dumps(load("k9s_pod_running.json"))
    data = (
        good + "\n{not json\n" + "[" * 100_000 + "\n" + json.dumps(load("k9s_job_complete.json")) + "\n"
    ).encode()
    result = parse(data, "x.jsonl")
    assert sorted(result.jobs["job_name"]) == ["hello-1567179180", "nginx"]
    reasons = dict(zip(result.rejects["source_line"], result.rejects["reason"], strict=True))
    assert reasons == {
        2: "invalid JSON: Expecting property name enclosed in double quotes at column 2",
        3: "JSON nested too deeply to parse (RecursionError)",
    }
    assert result.rejects["record"].iloc[0] == "{not json"


def test_huge_rejected_record_is_truncated_in_the_quarantine(parse):
    huge = {"kind": "Pod", "metadata": {"name": "s"}, "data": {"blob": "x" * (MAX_RECORD_CHARS * 2)}}
    result = parse(json.dumps([huge]))
    record = result.rejects["record"].iloc[0]
    assert len(record) < MAX_RECORD_CHARS + 100 and "truncated" in record


def test_every_fixture_keeps_the_invariant(parse):
    for path in sorted(FIXTURES.glob("*.json*")):
        result = parse(path.read_bytes(), path.name)
        assert result.rejects.empty, (path.name, result.rejects)
        assert set(result.jobs["state"]) <= set(STATES)
        assert result.jobs["submit_time"].notna().all()


# --- workload objects, YAML, fractional GPUs (constructed: no real object with a status was found
# for these shapes; see tests/fixtures/field/jobs/SOURCES.md) ---------------------------------


def _meta(name: str, uid: str, created: str = "2024-05-01T00:00:00Z", **extra) -> dict:
    return {"name": name, "namespace": "team", "uid": uid, "creationTimestamp": created, **extra}


def _pod_spec(gpus: str, cpu: str = "4") -> dict:
    return {
        "containers": [
            {"name": "c", "resources": {"limits": {"nvidia.com/gpu": gpus}, "requests": {"cpu": cpu}}}
        ]
    }


def _condition(kind: str, at: str, reason: str = "", status: str = "True") -> dict:
    return {"type": kind, "status": status, "reason": reason, "lastTransitionTime": at}


def test_pytorchjob_object_is_one_job_sized_by_its_replicas_and_folds_its_pods(parse):
    job = {
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": _meta("llama-sft", "pj-1"),
        "spec": {"pytorchReplicaSpecs": {
            "Master": {"replicas": 1, "template": {"spec": _pod_spec("8")}},
            "Worker": {"replicas": 3, "template": {"spec": _pod_spec("8")}},
        }},
        "status": {"startTime": "2024-05-01T00:01:00Z", "completionTime": "2024-05-01T02:01:00Z",
                   "conditions": [_condition("Running", "2024-05-01T00:01:00Z", status="False"),
                                  _condition("Succeeded", "2024-05-01T02:01:00Z")]},
    }  # fmt: skip
    worker = pod("llama-sft-worker-0", phase="Succeeded", namespace="team",
                 ownerReferences=[{"kind": "PyTorchJob", "name": "llama-sft", "uid": "pj-1", "controller": True}])  # fmt: skip
    result = parse(json.dumps({"kind": "List", "items": [job, worker]}))
    row = one(result)
    assert (row["job_id"], row["state"], row["gpu_num"], row["cpu_num"]) == ("pj-1", "COMPLETED", 32, 16)
    assert row["start_time"] == ts("2024-05-01T00:01:00Z") and row["end_time"] == ts("2024-05-01T02:01:00Z")
    assert row["gpu_time"] == 32 * 7200


def test_jobset_and_trainjob_objects(parse):
    jobset = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": _meta("pretrain", "js-1"),
        "spec": {"replicatedJobs": [{"name": "workers", "replicas": 2, "template": {"spec": {
            "parallelism": 4, "template": {"spec": _pod_spec("8")}}}}]},
        "status": {"conditions": [_condition("Failed", "2024-05-01T05:00:00Z", reason="FailedJobs")]},
    }  # fmt: skip
    trainjob = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": _meta("ft", "tj-1"),
        "spec": {"trainer": {"numNodes": 2, "resourcesPerNode": {"limits": {"nvidia.com/gpu": "4"}}}},
        "status": {"conditions": [_condition("Complete", "2024-05-01T03:00:00Z")]},
    }  # fmt: skip
    rows = by_name(parse(json.dumps([jobset, trainjob])))
    assert (rows["pretrain"]["state"], rows["pretrain"]["gpu_num"]) == ("FAILED", 64)  # 2 jobs x 4 pods x 8
    assert rows["pretrain"]["end_time"] == ts("2024-05-01T05:00:00Z")
    assert (rows["ft"]["state"], rows["ft"]["gpu_num"]) == ("COMPLETED", 8)


def test_kueue_workload_states_and_pending_ones_are_skipped(parse):
    def workload(name: str, conditions: list, **meta) -> dict:
        return {
            "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload",
            "metadata": _meta(name, f"wl-{name}", labels={"kueue.x-k8s.io/job-uid": f"job-{name}"}, **meta),
            "spec": {"podSets": [{"name": "main", "count": 2, "template": {"spec": _pod_spec("1")}}]},
            "status": {"conditions": conditions},
        }  # fmt: skip

    admitted = _condition("Admitted", "2024-05-01T00:10:00Z")
    items = [
        workload("done", [admitted, _condition("Finished", "2024-05-01T01:10:00Z", reason="Succeeded")]),
        workload("oom", [admitted, _condition("Finished", "2024-05-01T00:20:00Z", reason="Failed")]),
        workload("bumped", [admitted, _condition("Evicted", "2024-05-01T00:30:00Z", reason="Preempted")]),
        workload("running", [admitted]),
        workload("waiting", [_condition("QuotaReserved", "2024-05-01T00:05:00Z", status="False")]),
    ]
    result = parse(yaml_dump_all(items))
    rows = by_name(result)
    assert {name: row["state"] for name, row in rows.items()} == {
        "done": "COMPLETED", "oom": "FAILED", "bumped": "PREEMPTED", "running": "RUNNING",
    }  # fmt: skip
    assert rows["done"]["job_id"] == "job-done"  # the job's uid: merges with the job's own record
    assert rows["done"]["gpu_num"] == 2 and rows["done"]["start_time"] == ts("2024-05-01T00:10:00Z")
    assert result.skipped == {SKIP_NOT_ADMITTED: 1}


def yaml_dump_all(objects: list) -> str:
    import yaml

    return yaml.safe_dump_all(objects, sort_keys=False)


def test_yaml_list_multi_document_and_json_give_the_same_records(parse):
    import yaml

    objects = [pod("a", phase="Succeeded"), pod("b", phase="Running")]
    as_json = parse(json.dumps({"kind": "List", "apiVersion": "v1", "items": objects})).jobs
    as_list = parse(yaml.safe_dump({"kind": "List", "apiVersion": "v1", "items": objects})).jobs
    as_documents = parse("# kubectl get pods -o yaml\n" + yaml_dump_all(objects)).jobs
    for frame in (as_list, as_documents):
        pd.testing.assert_frame_equal(frame.drop(columns="source_line"), as_json.drop(columns="source_line"))


def test_broken_yaml_is_refused_naming_the_line(parse):
    with pytest.raises(InputError, match="neither JSON nor YAML") as caught:
        parse("kind: Pod\nmetadata: [unclosed\n")
    assert caught.value.line is not None


@pytest.mark.parametrize(
    ("resources", "gpu_num", "share"),
    [
        ({"nvidia.com/mig-3g.40gb": "2"}, 2, round(6 / 7, 6)),  # A100: 3 of 7 slices each
        ({"nvidia.com/mig-2g.12gb": "1"}, 1, 0.5),  # A30: 2 of 4 slices
        ({"nvidia.com/mig-7g.80gb": "1"}, 1, None),  # a whole H100
        ({"nvidia.com/vgpu": "2", "nvidia.com/gpucores": "30"}, 2, 0.6),  # HAMi: 2 x 30% of a card
        ({"nvidia.com/vgpu": "1"}, 1, None),  # HAMi without a core limit: the whole card
        ({"nvidia.com/gpu": "4"}, 4, None),
    ],
)
def test_fractional_gpus_are_recorded_as_a_share(parse, resources, gpu_num, share):
    spec = [{"name": "c", "resources": {"limits": resources}}]
    row = one(parse(json.dumps(pod("p", phase="Succeeded", containers=spec))))
    assert row["gpu_num"] == gpu_num
    assert pd.isna(row["gpu_share"]) if share is None else row["gpu_share"] == share, row["gpu_share"]
