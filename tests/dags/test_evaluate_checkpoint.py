"""The evaluate_checkpoint DAG run by Airflow (dag.test) on the tiny suite, local backend, CPU.

Expected scores come from the tiny data (include/eval/tiny/SOURCES.md): the tiny model is right on
5 of 6 GSM8K items, 24 of 32 multiple-choice items, and 2 of 4 HumanEval tasks.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "include" / "eval" / "tiny"
TINY_SUITE = ROOT / "include" / "eval" / "tiny_suite.csv"
EXPECTED_SCORES = {"tiny_gsm8k": 5 / 6, "tiny_arith_mc": 24 / 32, "tiny_humaneval": 2 / 4}

pytestmark = pytest.mark.airflow


@pytest.fixture
def eval_env(lake_dir, tmp_path, monkeypatch):
    """A lake, a node shared-memory folder, a tiny checkpoint in 'remote' storage, a copy of the data."""
    import shutil

    from acme.evaluation.suite import read_suite
    from acme.evaluation.tiny_model import build_tiny_checkpoint

    data = tmp_path / "data"
    shutil.copytree(TINY, data)
    shm = tmp_path / "shm"
    monkeypatch.setenv("ACME_EVAL_SHM_DIR", str(shm))
    monkeypatch.setenv("ACME_EVAL_DATA_DIR", str(data))
    monkeypatch.setenv("ACME_EVAL_CODE_TIMEOUT_S", "2")
    suite = read_suite(TINY_SUITE)
    checkpoint = build_tiny_checkpoint(
        tmp_path / "remote" / "tiny-7b" / "step-1000" / "model.pt",
        data,
        {d.name: d.metric_kind for d in suite.datasets},
    )
    return {"lake": lake_dir, "shm": shm, "data": data, "checkpoint": checkpoint}


def run_eval_dag(**conf):
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(ROOT / "dags" / "evaluate_checkpoint.py"))
    assert not bag.import_errors, bag.import_errors
    dag = bag.dags["evaluate_checkpoint"]
    for task in dag.tasks:
        task.retries = 0
    return dag.test(logical_date=datetime(2026, 11, 29, tzinfo=UTC), run_conf=conf)


def task_states(run) -> dict[str, list[str]]:
    states: dict[str, list[str]] = {}
    for ti in run.get_task_instances():
        states.setdefault(ti.task_id, []).append(ti.state)
    return states


def eval_prefix(lake: Path) -> Path:
    (prefix,) = list((lake / "eval" / "runs").glob("*/*"))
    return prefix


def test_tiny_suite_is_evaluated_end_to_end_and_a_rerun_skips_done_trials(airflow_db, eval_env):
    import pyarrow.parquet as pq

    conf = {"model_location": str(eval_env["checkpoint"]), "suite": str(TINY_SUITE), "nodes": 2}
    run = run_eval_dag(**conf)
    assert run.state == "success", task_states(run)
    states = task_states(run)
    assert states["preload_model"] == ["success", "success"]  # one precursor per node
    assert len(states["trial.infer"]) == 4 and len(states["trial.score"]) == 4

    prefix = eval_prefix(eval_env["lake"])
    plan = json.loads((prefix / "plan.json").read_text())
    assert {t["node"] for t in plan["trials"]} == {0, 1}
    # The model was copied into node shared memory once, with its manifest.
    (copy,) = [p for p in eval_env["shm"].iterdir() if not p.name.startswith(".")]
    assert (copy / "_manifest.json").exists()
    assert (copy / "model.pt").read_bytes() == eval_env["checkpoint"].read_bytes()

    results = {r["dataset"]: r for r in pq.read_table(prefix / "results.parquet").to_pylist()}
    assert {name: r["score"] for name, r in results.items()} == pytest.approx(EXPECTED_SCORES)
    assert results["tiny_arith_mc"]["trials"] == 2 and results["tiny_arith_mc"]["n_samples"] == 32
    assert results["tiny_humaneval"]["metric"] == "pass@1"
    report = (prefix / "report.md").read_text()
    assert "| tiny_gsm8k | exact_match | 0.8333 | 6 |" in report
    priors = json.loads((eval_env["lake"] / "eval" / "priors" / "priors.json").read_text())
    assert set(priors["datasets"]) == set(EXPECTED_SCORES) and len(priors["folded_runs"]) == 1

    outputs = {p.name: p.stat().st_mtime_ns for p in (prefix / "outputs").iterdir()}
    metrics = {p.name: p.stat().st_mtime_ns for p in (prefix / "metrics").iterdir()}
    rerun = run_eval_dag(**conf)
    assert rerun.state == "success", task_states(rerun)
    assert {p.name: p.stat().st_mtime_ns for p in (prefix / "outputs").iterdir()} == outputs
    assert {p.name: p.stat().st_mtime_ns for p in (prefix / "metrics").iterdir()} == metrics
    again = json.loads((eval_env["lake"] / "eval" / "priors" / "priors.json").read_text())
    assert again == priors  # the same evaluation is never folded into the priors twice


def test_a_failed_trial_fails_alone_and_a_rerun_redoes_only_it(airflow_db, eval_env):
    conf = {"model_location": str(eval_env["checkpoint"]), "suite": str(TINY_SUITE), "nodes": 1}
    humaneval = eval_env["data"] / "tiny_humaneval.jsonl"
    good = humaneval.read_text()
    humaneval.write_text(good.replace('"entry_point"', '"entry"', 1))  # task 0 loses a field
    run = run_eval_dag(**conf)
    assert run.state == "failed"
    states = task_states(run)
    assert sorted(states["trial.infer"]).count("failed") == 1
    assert sorted(states["trial.infer"]).count("success") == 3
    assert states["collect_results"] == ["upstream_failed"]
    prefix = eval_prefix(eval_env["lake"])
    done = {p.name: p.stat().st_mtime_ns for p in (prefix / "outputs").iterdir()}
    assert len(done) == 3 and not any("humaneval" in name for name in done)

    humaneval.write_text(good)
    rerun = run_eval_dag(**conf)
    assert rerun.state == "success", task_states(rerun)
    after = {p.name: p.stat().st_mtime_ns for p in (prefix / "outputs").iterdir()}
    assert {k: v for k, v in after.items() if k in done} == done  # the three others were skipped
    assert len(after) == 4


def test_a_dry_run_plans_and_simulates_the_default_suite_without_writing(airflow_db, lake_dir):
    run = run_eval_dag(model_location="s3://nowhere/ckpt", suite="default", nodes=4, dry_run=True)
    assert run.state == "success", task_states(run)
    (plan_ti,) = [ti for ti in run.get_task_instances() if ti.task_id == "plan"]
    assert not (lake_dir / "eval").exists()
    states = task_states(run)
    assert states["collect_results"] == ["skipped"]


def fake_kubelet(env_overrides: dict[str, str]):
    """The fake API's pod log: runs the pod's container command here, once per pod (a fake kubelet)."""
    import os
    import subprocess
    import sys

    ran: dict[str, str] = {}

    def run_container(manifest: dict) -> str:
        name = manifest["metadata"]["name"]
        if name not in ran:
            container = manifest["spec"]["containers"][0]
            command = [*container.get("command", []), *container.get("args", [])]
            assert command[:3] == ["python", "-m", "acme.evaluation.pod_main"], command
            env = {**os.environ, **{e["name"]: e.get("value", "") for e in container.get("env", [])}}
            env.update(env_overrides)
            done = subprocess.run(
                [sys.executable, *command[1:]], capture_output=True, text=True, env=env, timeout=120
            )
            ran[name] = done.stdout + done.stderr + f"exit {done.returncode}\n"
        return ran[name]

    return run_container, ran


def test_kubernetes_backend_runs_pinned_gpu_pods_against_a_fake_api(
    airflow_db, eval_env, tmp_path, monkeypatch
):
    from tests.fakes.kubernetes_api import FakeKubernetesApi

    conf = {"model_location": str(eval_env["checkpoint"]), "suite": str(TINY_SUITE), "nodes": 2}
    with FakeKubernetesApi() as api:
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
        monkeypatch.setenv(
            "AIRFLOW_CONN_KUBERNETES_DEFAULT",
            json.dumps({"conn_type": "kubernetes", "extra": {"kube_config_path": str(kubeconfig)}}),
        )
        monkeypatch.setenv("ACME_EVAL_BACKEND", "kubernetes")
        monkeypatch.setenv("ACME_EVAL_NODE_NAMES", "gpu-a,gpu-b")
        monkeypatch.setenv("ACME_EVAL_POD_POLL_S", "0.2")
        for node in ("gpu-a", "gpu-b"):
            api.add_node(node)
        log, ran = fake_kubelet({"PYTHONPATH": str(ROOT / "plugins")})
        api.script_pods(name_prefix="acme-eval", log=log)
        run = run_eval_dag(**conf)
        assert run.state == "success", task_states(run)
        pods = api.created_pods()

    assert all(output.rstrip().endswith("exit 0") for output in ran.values()), ran
    plan = json.loads((eval_prefix(eval_env["lake"]) / "plan.json").read_text())
    node_of_trial = {t["trial_id"]: ["gpu-a", "gpu-b"][t["node"]] for t in plan["trials"]}

    def pinned_to(pod: dict) -> str:
        terms = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        (expression,) = terms["nodeSelectorTerms"][0]["matchExpressions"]
        assert expression["key"] == "kubernetes.io/hostname"
        return expression["values"][0]

    preload = [p for p in pods if p["metadata"]["labels"]["acme.io/step"] == "eval-preload"]
    infer = [p for p in pods if p["metadata"]["labels"]["acme.io/step"] == "eval-infer"]
    assert sorted(pinned_to(p) for p in preload) == ["gpu-a", "gpu-b"]
    assert len(infer) == 4
    for pod in infer:
        container = pod["spec"]["containers"][0]
        trial_id = container["args"][container["args"].index("--trial") + 1]
        assert pinned_to(pod) == node_of_trial[trial_id]  # on its precursor's node
        assert (
            container["resources"]["requests"] == {"nvidia.com/gpu": "1"} == container["resources"]["limits"]
        )
        (mount,) = container["volumeMounts"]
        assert mount["mountPath"] == str(eval_env["shm"])
    assert all("nvidia.com/gpu" not in (p["spec"]["containers"][0].get("resources") or {}).get("requests", {})
               for p in preload)  # fmt: skip

    import pyarrow.parquet as pq

    results = {
        r["dataset"]: r["score"]
        for r in pq.read_table(eval_prefix(eval_env["lake"]) / "results.parquet").to_pylist()
    }
    assert results == pytest.approx(EXPECTED_SCORES)


def test_trials_that_find_no_free_gpu_fail_and_are_retried_each_on_its_own(airflow_db, eval_env, monkeypatch):
    """Another process holds the node's only GPU for 2 s: the waiting trials fail, Airflow retries them."""
    import threading
    import time
    from datetime import timedelta

    from airflow.dag_processing.dagbag import DagBag

    from acme.evaluation.trial_steps import gpu_lease

    monkeypatch.setenv("ACME_EVAL_GPUS_PER_NODE", "1")
    monkeypatch.setenv("ACME_EVAL_GPU_LEASE_TIMEOUT_S", "0.3")
    shm = eval_env["shm"]

    def hold_the_gpu_after_the_precursor() -> None:
        deadline = time.monotonic() + 120
        while not list(shm.glob("*/_manifest.json")) and time.monotonic() < deadline:
            time.sleep(0.01)
        with gpu_lease(shm, node=0, slots=1):
            time.sleep(2.0)

    holder = threading.Thread(target=hold_the_gpu_after_the_precursor, daemon=True)
    holder.start()
    dag = DagBag(dag_folder=str(ROOT / "dags" / "evaluate_checkpoint.py")).dags["evaluate_checkpoint"]
    for task in dag.tasks:
        task.retries = 3
        task.retry_delay = timedelta(seconds=1)
        task.max_retry_delay = timedelta(seconds=2)
    conf = {"model_location": str(eval_env["checkpoint"]), "suite": str(TINY_SUITE), "nodes": 1}
    run = dag.test(logical_date=datetime(2026, 11, 29, tzinfo=UTC), run_conf=conf)
    holder.join(timeout=30)
    assert run.state == "success", task_states(run)
    tries = {ti.map_index: ti.try_number for ti in run.get_task_instances() if ti.task_id == "trial.infer"}
    assert max(tries.values()) > 1, tries  # at least one trial waited, failed and was retried
    import pyarrow.parquet as pq

    results = pq.read_table(eval_prefix(eval_env["lake"]) / "results.parquet").to_pylist()
    assert {r["dataset"]: r["score"] for r in results} == pytest.approx(EXPECTED_SCORES)
