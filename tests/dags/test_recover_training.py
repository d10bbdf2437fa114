"""The recover_training DAG run by Airflow (dag.test): the real KubernetesPodOperator against a fake
Kubernetes API on loopback, the simulated backend, re-runs, dry runs and bad input."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from acme.recovery.synth_checkpoints import write_checkpoint
from tests.fakes.kubernetes_api import FakeKubernetesApi

ROOT = Path(__file__).resolve().parents[2]
LOGICAL_DATE = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
GPU_NODES = ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]

pytestmark = pytest.mark.airflow


def load_dag():
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(ROOT / "dags" / "recover_training.py"))
    assert not bag.import_errors, bag.import_errors
    return bag.dags["recover_training"]


def run_dag(logical_date: datetime = LOGICAL_DATE, **conf):
    dag = load_dag()
    for task in dag.tasks:  # a failing test must fail now, not after the production retry delays
        task.retries = 0
    return dag.test(logical_date=logical_date, run_conf=conf)


def task_states(run) -> dict[str, list[str]]:
    states: dict[str, list[str]] = {}
    for ti in run.get_task_instances():
        states.setdefault(ti.task_id, []).append(str(ti.state))
    return states


def actions(lake_dir: Path, cluster: str, job: str) -> list[dict]:
    (log,) = lake_dir.glob(f"recovery/cluster={cluster}/job={job}/*/actions.jsonl")
    return [json.loads(line) for line in log.read_text().splitlines()]


@pytest.fixture
def checkpoints(tmp_path) -> Path:
    root = tmp_path / "checkpoints"
    write_checkpoint(root, 100)
    write_checkpoint(root, 200)
    return root


# --- Kubernetes: the real KubernetesPodOperator against the fake API -------------------------------


def report(node: str, rank: int, world_size: int, ok: bool, error: str = "") -> str:
    """One report line as acme.recovery.allgather_check prints it."""
    fields = {"check": "acme-allgather-check", "node": node, "rank": rank, "world_size": world_size,
              "backend": "nccl", "ok": ok, "error": error, "phases": {}, "check_s": 1.2 if ok else None}  # fmt: skip
    return json.dumps(fields) + "\n"


def env_of(pod: dict) -> dict[str, str]:
    return {e["name"]: e.get("value") for e in pod["spec"]["containers"][0].get("env") or []}


def script_checks(api: FakeKubernetesApi, faulty: set[str]) -> None:
    """Check pods print their rank's report: a world holding a faulty node fails, the faulty rank silently."""

    def log(pod: dict) -> str:
        env = env_of(pod)
        node, world = env["ACME_NODE_NAME"], env["ACME_CHECK_WORLD"].split(",")
        if node in faulty:
            return "NCCL WARN Cuda failure 'unspecified launch failure'\n"
        broken = faulty & set(world)
        error = f"all-gather timed out waiting for {', '.join(sorted(broken))}" if broken else ""
        return report(node, int(env["RANK"]), len(world), not broken, error)

    def exit_code(pod: dict) -> int:
        return 1 if faulty & set(env_of(pod)["ACME_CHECK_WORLD"].split(",")) else 0

    api.script_pods(name_prefix="acme-check-", log=log, exit_code=exit_code)


def add_crashed_job(api: FakeKubernetesApi, job_id: str, namespace: str = "training") -> None:
    for rank, node in enumerate(GPU_NODES):
        api.add_node(node, taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}])
        api.add_pod(
            {
                "metadata": {
                    "name": f"{job_id}-worker-{rank}",
                    "namespace": namespace,
                    "labels": {"acme.io/job-id": job_id, "acme.io/rank": str(rank)},
                },
                "spec": {
                    "nodeName": node,
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "trainer",
                            "image": "acme/train:1",
                            "command": ["python", "train.py"],
                            "env": [{"name": "ACME_RUN", "value": "llm-7b"}],
                        }
                    ],
                },
            }  # fmt: skip
        )


@pytest.fixture
def kube(tmp_path, monkeypatch, lake_dir):
    with FakeKubernetesApi() as api:
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig", namespace="training")
        connection = {
            "conn_type": "kubernetes",
            "extra": {"kube_config_path": str(kubeconfig), "namespace": "training"},
        }
        monkeypatch.setenv("AIRFLOW_CONN_KUBERNETES_DEFAULT", json.dumps(connection))
        monkeypatch.setenv("ACME_RECOVERY_BACKEND", "kubernetes")
        monkeypatch.setenv("ACME_RECOVERY_NAMESPACE", "training")
        monkeypatch.setenv("ACME_RECOVERY_POD_STARTUP_TIMEOUT_S", "20")
        add_crashed_job(api, "job-k8s")
        yield api


def k8s_conf(checkpoints: Path, **extra) -> dict:
    return {"cluster": "kalos", "job_id": "job-k8s", "nodes": GPU_NODES, "checkpoint_uri": str(checkpoints),
            "recovery_id": "incident-7", "dry_run": False, "diagnosis_source": "rule", **extra}  # fmt: skip


def test_kubernetes_finds_one_faulty_node_cordons_it_and_restarts_the_job_as_sent(
    airflow_db, kube, lake_dir, checkpoints
):
    script_checks(kube, faulty={"gpu-2"})
    run = run_dag(**k8s_conf(checkpoints))
    assert run.state == "success", task_states(run)

    check_pods = [p for p in kube.created_pods() if p["metadata"]["name"].startswith("acme-check-")]
    # Round 1: [gpu-0, gpu-1] and [gpu-2, gpu-3]; round 2: gpu-2 and gpu-3 each beside a healthy node.
    assert len(check_pods) == 8
    for pod in check_pods:
        spec, env = pod["spec"], env_of(pod)
        (container,) = spec["containers"]
        assert container["resources"]["requests"] == {"nvidia.com/gpu": "8"}
        assert container["resources"]["limits"] == {"nvidia.com/gpu": "8"}
        (term,) = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            "nodeSelectorTerms"
        ]
        assert term["matchExpressions"] == [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": [env["ACME_NODE_NAME"]]}
        ]
        assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in spec["tolerations"]
        assert spec["hostNetwork"] is True and spec["enableServiceLinks"] is False
        assert env["MASTER_ADDR"] == env["ACME_CHECK_WORLD"].split(",")[0]
        assert pod["metadata"]["labels"]["acme.io/job"] == "job-k8s"
    worlds = sorted({env_of(p)["ACME_CHECK_WORLD"] for p in check_pods})
    assert worlds == ["gpu-0,gpu-1", "gpu-2,gpu-0", "gpu-2,gpu-3", "gpu-3,gpu-1"]
    assert not [p for p in kube.pods if p[1].startswith("acme-check-")], "check pods must be deleted"

    ((node, patch),) = kube.node_patches()
    assert node == "gpu-2"
    assert patch["spec"]["unschedulable"] is True
    assert {"key": "acme.io/faulty", "value": "true", "effect": "NoSchedule"} in patch["spec"]["taints"]
    assert {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"} in patch["spec"]["taints"]
    assert "failed the all-gather check twice" in patch["metadata"]["annotations"]["acme.io/cordon-reason"]

    restarted = [
        p for p in kube.created_pods() if p["metadata"]["labels"].get("acme.io/restart-of") == "job-k8s"
    ]
    assert len(restarted) == 4
    for pod in restarted:
        assert "nodeName" not in pod["spec"]
        (term,) = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            "nodeSelectorTerms"
        ]
        assert {"key": "kubernetes.io/hostname", "operator": "NotIn", "values": ["gpu-2"]} in term[
            "matchExpressions"
        ]
        env = env_of(pod)
        assert env["ACME_RESUME_FROM"].endswith("checkpoints/step_200") and env["ACME_RESUME_STEP"] == "200"
        assert env["ACME_RUN"] == "llm-7b"

    log = actions(lake_dir, "kalos", "job-k8s")
    decided = next(r for r in log if r["step"] == "decide")
    assert decided["result"]["faulty"] == ["gpu-2"]
    restart = next(r for r in log if r["step"] == "restart")
    assert restart["status"] == "done" and restart["result"]["detection_to_restart_s"] >= 0

    # The same recovery again: its recorded checks are reused, nothing is cordoned or restarted twice.
    requests_before = len(kube.requests)
    again = run_dag(**k8s_conf(checkpoints))
    assert again.state == "success", task_states(again)
    assert len(kube.node_patches()) == 1
    assert {r["method"] for r in kube.requests[requests_before:]} == {"GET"}


def test_kubernetes_dry_run_sends_no_pod_and_no_patch(airflow_db, kube, lake_dir, checkpoints):
    script_checks(kube, faulty={"gpu-2"})
    run = run_dag(**k8s_conf(checkpoints, dry_run=True))
    assert run.state == "success", task_states(run)
    assert kube.created_pods() == [] and kube.node_patches() == []
    assert {r["method"] for r in kube.requests} == {"GET"}
    log = actions(lake_dir, "kalos", "job-k8s")
    assert {r["dry_run"] for r in log} == {True}
    assert [r["step"] for r in log][-1] == "restart" and log[-1]["status"] == "planned"


def test_a_failing_node_patch_fails_the_run_and_nothing_is_restarted(airflow_db, kube, lake_dir, checkpoints):
    script_checks(kube, faulty={"gpu-2"})
    kube.fail("PATCH", r"/api/v1/nodes/.*", status=500)
    run = run_dag(**k8s_conf(checkpoints))
    assert run.state == "failed"
    states = task_states(run)
    assert states["decide_and_restart"] == ["failed"]
    assert not [p for p in kube.created_pods() if "acme.io/restart-of" in p["metadata"]["labels"]]
    assert "restart" not in [r["step"] for r in actions(lake_dir, "kalos", "job-k8s")]
    failed = [r for r in actions(lake_dir, "kalos", "job-k8s") if r["status"] == "failed"]
    assert failed[0]["step"] == "cordon" and "HTTP 500" in failed[0]["error"]


def test_a_failing_pod_api_blames_no_node(airflow_db, kube, lake_dir, checkpoints):
    script_checks(kube, faulty=set())
    kube.fail("POST", r"/api/v1/namespaces/training/pods", status=403)
    run = run_dag(**k8s_conf(checkpoints))
    assert run.state == "failed"
    states = task_states(run)
    assert set(states["check_round1"]) == {"failed"}
    assert states["decide_and_restart"] == ["upstream_failed"]
    assert kube.node_patches() == []


def test_an_unknown_kubernetes_job_is_refused_before_any_check(airflow_db, kube, lake_dir, checkpoints):
    run = run_dag(**k8s_conf(checkpoints, job_id="job-nobody-knows"))
    assert run.state == "failed"
    assert task_states(run)["open_recovery"] == ["failed"]
    assert kube.created_pods() == [] and kube.node_patches() == []
    (opened,) = actions(lake_dir, "kalos", "job-nobody-knows")
    assert "no pod labelled acme.io/job-id=job-nobody-knows" in opened["error"]


# --- the simulated backend (the offline default) -------------------------------------------------


@pytest.fixture
def simulated(monkeypatch, lake_dir):
    monkeypatch.setenv("ACME_RECOVERY_BACKEND", "simulated")
    return lake_dir


def sim_conf(checkpoints: Path, **extra) -> dict:
    nodes = [f"seren-n{i:03d}" for i in range(8)]
    return {"cluster": "seren", "job_id": "demo-pretrain-1", "nodes": nodes, "checkpoint_uri": str(checkpoints),
            "recovery_id": "incident-8", "dry_run": False, "diagnosis_source": "rule", **extra}  # fmt: skip


def test_the_simulated_demo_job_recovers_and_a_rerun_changes_nothing(airflow_db, simulated, checkpoints):
    run = run_dag(**sim_conf(checkpoints))
    assert run.state == "success", task_states(run)
    state_file = simulated / "recovery/simulated/cluster=seren/state.json"
    state = json.loads(state_file.read_text())
    assert list(state["cordoned"]) == ["seren-n005"]
    assert [s["nodes_excluded"] for s in state["submitted"]] == [["seren-n005"]]
    assert not (simulated / "recovery/cluster=seren/job=demo-pretrain-1/_active.json").exists()

    assert run_dag(**sim_conf(checkpoints)).state == "success"
    assert json.loads(state_file.read_text()) == state
    steps = [r["step"] for r in actions(simulated, "seren", "demo-pretrain-1")]
    assert steps.count("cordon") == 1 and steps.count("restart") == 1


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        ("partial", "step 100: partial: 1 of 2 shards missing"),
        ("corrupt", "step 100: corrupt manifest"),
    ],
)
def test_no_healthy_checkpoint_needs_a_person_and_nothing_restarts(
    airflow_db, simulated, tmp_path, damage, expected
):
    root = tmp_path / f"ckpt-{damage}"
    if damage == "partial":
        write_checkpoint(root, 100, missing=1)
    else:
        write_checkpoint(root, 100, manifest='{"step": 100, "shards": [{"path": "x"')
    run = run_dag(**sim_conf(root))
    assert run.state == "failed"
    states = task_states(run)
    assert states["decide_and_restart"] == ["failed"]
    chosen = next(
        r for r in actions(simulated, "seren", "demo-pretrain-1") if r["step"] == "choose_checkpoint"
    )
    assert chosen["status"] == "needs-person"
    assert chosen["error"].startswith(
        "NeedsPersonError: needs a person: none of the 1 checkpoints is healthy"
    )
    assert expected in chosen["error"]
    # Live, the checkpoint is chosen before any cordon (the approval form shows it): nothing was touched.
    state_file = simulated / "recovery/simulated/cluster=seren/state.json"
    state = json.loads(state_file.read_text()) if state_file.exists() else {}
    assert not state.get("submitted") and not state.get("cordoned")


def test_a_job_the_simulated_file_does_not_list_is_simulated_on_its_nodes_all_healthy(
    airflow_db, simulated, checkpoints
):
    nodes = ["gpu01", "gpu02", "gpu03"]
    run = run_dag(**sim_conf(checkpoints, job_id="8100", nodes=nodes))
    assert run.state == "success", task_states(run)
    state = json.loads((simulated / "recovery/simulated/cluster=seren/state.json").read_text())
    assert state["cordoned"] == {}
    assert [(s["restart_of"], s["eligible_nodes"]) for s in state["submitted"]] == [("8100", nodes)]


def test_a_manual_trigger_defaults_to_a_dry_run_and_requires_the_job(airflow_db, monkeypatch):
    from airflow.sdk.definitions.param import ParamsDict
    from airflow.sdk.exceptions import ParamValidationError

    params = load_dag().params
    assert params["dry_run"] is True
    with pytest.raises(ParamValidationError, match="job_id"):  # no demo job: Trigger without edits fails
        ParamsDict(params).validate()
    empty = ParamsDict(params)
    with pytest.raises(ParamValidationError):
        empty.update({"job_id": "8100", "nodes": []})
        empty.validate()
    filled = ParamsDict(params)
    filled.update({"job_id": "8100", "nodes": ["gpu01"]})
    assert filled.validate()["dry_run"] is True

    monkeypatch.setenv("ACME_RECOVERY_DRY_RUN", "false")  # the one setting that makes recovery live
    assert load_dag().params["dry_run"] is False
    from acme.diagnosis.routing import recovery_dry_run

    assert recovery_dry_run() is False


def test_on_a_fresh_install_the_default_dry_run_writes_the_restart_plan_and_names_the_missing_checkpoint(
    airflow_db, simulated
):
    nodes = [f"seren-n{i:03d}" for i in range(8)]
    run = run_dag(cluster="seren", job_id="demo-pretrain-1", nodes=nodes, recovery_id="fresh")
    assert run.state == "success", task_states(run)
    log = {r["step"]: r for r in actions(simulated, "seren", "demo-pretrain-1")}
    expected_location = f"{simulated}/checkpoints/cluster=seren/job=demo-pretrain-1"
    chosen = log["choose_checkpoint"]
    assert chosen["inputs"]["checkpoint_uri"] == expected_location
    assert chosen["status"] == "planned" and "ACME_CHECKPOINT_URI_PATTERN" in chosen["result"]["planned"]
    restart = log["restart"]
    assert restart["status"] == "planned" and restart["dry_run"] is True
    assert (
        "would resubmit job demo-pretrain-1 through simulated but has no checkpoint"
        in restart["result"]["planned"]
    )
    assert not (simulated / "recovery/simulated").exists()  # a dry run touched no (simulated) cluster


def test_live_recovery_finds_checkpoints_by_the_default_pattern_or_names_the_setting(airflow_db, simulated):
    nodes = [f"seren-n{i:03d}" for i in range(8)]
    conf = {
        "cluster": "seren",
        "job_id": "demo-pretrain-1",
        "nodes": nodes,
        "dry_run": False,
        "diagnosis_source": "rule",
    }
    run = run_dag(**conf, recovery_id="no-checkpoints")
    assert run.state == "failed"
    (log,) = simulated.glob("recovery/cluster=seren/job=demo-pretrain-1/no-checkpoints/actions.jsonl")
    chosen = next(json.loads(line) for line in log.read_text().splitlines() if '"choose_checkpoint"' in line)
    assert chosen["status"] == "needs-person" and "from ACME_CHECKPOINT_URI_PATTERN" in chosen["error"]

    folder = simulated / "checkpoints/cluster=seren/job=demo-pretrain-1"
    write_checkpoint(folder, 100)
    write_checkpoint(folder, 200)
    run = run_dag(**conf, recovery_id="with-checkpoints")
    assert run.state == "success", task_states(run)
    state = json.loads((simulated / "recovery/simulated/cluster=seren/state.json").read_text())
    (submitted,) = state["submitted"]
    assert submitted["environment"]["ACME_RESUME_FROM"].endswith("job=demo-pretrain-1/step_200")


def test_an_empty_node_list_is_refused_by_the_params(airflow_db):
    from airflow.sdk.definitions.param import ParamsDict
    from airflow.sdk.exceptions import ParamValidationError

    params = ParamsDict(load_dag().params)
    with pytest.raises(ParamValidationError):
        params.update({"job_id": "8100", "nodes": []})
        params.validate()
