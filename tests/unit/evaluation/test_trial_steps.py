"""The real trial steps on CPU: precursor copy to shared memory, inference, metrics, results, priors.

The model here is the lookup-table fake (``tests/fakes/lookup_model.py``), so the bookkeeping can
be checked against known answers in milliseconds: it is right on 5/6 GSM8K items, 24/32
multiple-choice items, 2/4 HumanEval tasks (include/eval/tiny/SOURCES.md). The same steps with the
real model: ``test_real_model_trial.py``.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import threading
from pathlib import Path

import pytest

from acme.errors import InputError
from acme.evaluation.evaluation_run import (
    EvaluationRequest,
    collect_results,
    fold_into_priors,
    load_priors,
    prepare_evaluation,
)
from acme.evaluation.layout import PRIORS_KEY, EvalRun
from acme.evaluation.precursor import ModelNotPreloaded, model_id_for, preload_model
from acme.evaluation.priors import Hardware
from acme.evaluation.suite import read_suite
from acme.evaluation.trial_steps import GpuLeaseTimeout, gpu_lease, run_metric
from acme.evaluation.trial_steps import run_inference as run_real_inference
from acme.lake import Lake
from tests.fakes.lookup_model import TinyLookupModel, build_tiny_checkpoint

ROOT = Path(__file__).resolve().parents[3]
TINY = ROOT / "include" / "eval" / "tiny"
TINY_SUITE = ROOT / "include" / "eval" / "tiny_suite.csv"


def run_inference(*args, **kwargs):
    """The trial's inference step with the lookup-table model in place of the configured backend."""
    return run_real_inference(*args, load_model=TinyLookupModel.load, **kwargs)


def jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture
def env(tmp_path):
    data = tmp_path / "data"
    shutil.copytree(TINY, data)
    suite = read_suite(TINY_SUITE)
    checkpoint = build_tiny_checkpoint(
        tmp_path / "remote" / "ckpt" / "model.pt", data, {d.name: d.metric_kind for d in suite.datasets}
    )
    return {
        "lake": Lake(str(tmp_path / "lake")),
        "shm": tmp_path / "shm",
        "data": data,
        "checkpoint": checkpoint,
        "tmp": tmp_path,
    }


def plan_tiny(env, nodes: int = 1) -> tuple[EvalRun, dict]:
    manifest = prepare_evaluation(
        env["lake"], EvaluationRequest(str(env["checkpoint"]), "7B", str(TINY_SUITE), nodes)
    )
    return EvalRun(manifest["model_id"], manifest["run"]), manifest


# --- precursor ----------------------------------------------------------------------------------
def test_precursor_copies_once_and_replaces_a_corrupted_copy(env):
    first = preload_model(str(env["checkpoint"]), env["shm"])
    assert first.copied and first.bytes == env["checkpoint"].stat().st_size
    copy = Path(first.path) / "model.pt"
    assert copy.read_bytes() == env["checkpoint"].read_bytes()
    assert not any(p.name.startswith(f".{first.model_id}.tmp-") for p in env["shm"].iterdir())

    again = preload_model(str(env["checkpoint"]), env["shm"])
    assert not again.copied and copy.stat().st_mtime_ns == Path(first.path, "model.pt").stat().st_mtime_ns

    data = bytearray(copy.read_bytes())
    data[100] ^= 0xFF  # same size, wrong bytes: only the checksum notices
    copy.write_bytes(bytes(data))
    repaired = preload_model(str(env["checkpoint"]), env["shm"])
    assert repaired.copied and copy.read_bytes() == env["checkpoint"].read_bytes()


def test_concurrent_precursors_of_one_host_copy_once(env):
    results = []
    threads = [
        threading.Thread(target=lambda: results.append(preload_model(str(env["checkpoint"]), env["shm"])))
        for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(r.copied for r in results) == [False, False, False, True]


def test_precursor_copies_a_sharded_folder_and_names_a_missing_one(env):
    folder = env["tmp"] / "remote" / "sharded"
    (folder / "shards").mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / "shards" / "part-0.bin").write_bytes(b"x" * 1000)
    result = preload_model(f"file://{folder}", env["shm"])
    assert result.files == 2 and (Path(result.path) / "shards" / "part-0.bin").stat().st_size == 1000
    with pytest.raises(InputError, match="checkpoint not found"):
        preload_model(str(env["tmp"] / "remote" / "missing.pt"), env["shm"])


def test_model_ids_are_stable_and_path_safe():
    assert model_id_for("s3://ckpts/llama-7b/step-1000/model.pt") == model_id_for(
        "s3://ckpts/llama-7b/step-1000/model.pt"
    )
    assert model_id_for("s3://ckpts/llama-7b/step-1000/model.pt").startswith("step-1000-model-")
    assert model_id_for("s3://a/b c/d.pt") != model_id_for("s3://a/b c/e.pt")
    assert "/" not in model_id_for("/x/y z/ckpt/")


# --- GPU leases (warm start: set-up before, GPU held only for load + inference) -----------------
def test_gpu_leases_are_exclusive_per_slot_and_wait_with_a_timeout(tmp_path):
    with gpu_lease(tmp_path, node=0, slots=2, preferred=1) as first:
        assert first == 1
        with gpu_lease(tmp_path, node=0, slots=2, preferred=1) as second:
            assert second == 0  # the preferred slot is busy: any free slot of the node
            with pytest.raises(GpuLeaseTimeout), gpu_lease(tmp_path, node=0, slots=2, timeout_s=0.2):
                pass
        with gpu_lease(tmp_path, node=1, slots=1) as other_node:
            assert other_node == 0


# --- inference and metrics ----------------------------------------------------------------------
def test_inference_needs_the_precursor_then_writes_the_models_answers(env):
    run, manifest = plan_tiny(env)
    gsm = next(t for t in manifest["trials"] if "tiny_gsm8k" in t["trial_id"])
    with pytest.raises(ModelNotPreloaded, match="precursor"):
        run_inference(env["lake"], run, gsm["trial_id"], env["shm"], env["data"])
    preload_model(str(env["checkpoint"]), env["shm"], run.model_id)
    done = run_inference(env["lake"], run, gsm["trial_id"], env["shm"], env["data"])
    assert done["samples"] == 6 and not done["skipped"]
    outputs = jsonl(Path(env["lake"].path(run.outputs_key(gsm["trial_id"]))))
    answers = {
        r["id"]: r["answer"]
        for r in jsonl(env["data"] / "tiny_model_answers.jsonl")
        if r["dataset"] == "tiny_gsm8k"
    }
    assert {o["id"]: o["answer"] for o in outputs} == answers
    assert [o["index"] for o in outputs] == list(range(6))
    timings = env["lake"].read_json(run.timings_key(gsm["trial_id"]))
    assert timings["load_s"] > 0 and timings["slices"][0]["n_samples"] == 6

    again = run_inference(env["lake"], run, gsm["trial_id"], env["shm"], env["data"])
    assert again["skipped"]


def test_every_trial_scores_what_the_tiny_data_says(env):
    run, manifest = plan_tiny(env, nodes=2)
    preload_model(str(env["checkpoint"]), env["shm"], run.model_id)
    for trial in manifest["trials"]:
        run_inference(env["lake"], run, trial["trial_id"], env["shm"], env["data"])
        run_metric(env["lake"], run, trial["trial_id"], env["data"], code_timeout_s=2)
    # Multiple choice: the model's option is the label except on every fourth item.
    mc_outputs = [
        o
        for t in manifest["trials"]
        if "arith_mc" in t["trial_id"]
        for o in jsonl(Path(env["lake"].path(run.outputs_key(t["trial_id"]))))
    ]
    labels = {r["id"]: r["label"] for r in jsonl(env["data"] / "tiny_arith_mc.jsonl")}
    assert len(mc_outputs) == 32
    assert sum(o["choice"] == labels[o["id"]] for o in mc_outputs) == 24
    code = next(t for t in manifest["trials"] if "humaneval" in t["trial_id"])
    verdicts = env["lake"].read_json(run.metrics_key(code["trial_id"]))["slices"][0]["samples"]
    assert [(v["id"], v["status"]) for v in verdicts] == [
        ("HumanEval/0", "passed"),
        ("HumanEval/1", "passed"),
        ("HumanEval/2", "failed"),  # float(int(number)) fails the asserts
        ("HumanEval/4", "timeout"),  # the endless loop is killed
    ]

    summary = collect_results(env["lake"], run, str(TINY_SUITE))
    assert summary["scores"] == {"tiny_arith_mc": 0.75, "tiny_gsm8k": 0.8333, "tiny_humaneval": 0.5}
    report = Path(env["lake"].path(run.report_key)).read_text()
    assert "| tiny_humaneval | pass@1 | 50.0 | 15.0–85.0 | 4 | 1 |" in report  # percent, Wilson 95%
    measured = env["lake"].read_json(run.measurements_key)["measurements"]
    assert {m["dataset"] for m in measured} == {"tiny_gsm8k", "tiny_arith_mc", "tiny_humaneval"}
    assert sum(m["n_samples"] for m in measured) == 42


def test_metric_step_refuses_outputs_that_do_not_match_the_samples(env):
    run, manifest = plan_tiny(env)
    preload_model(str(env["checkpoint"]), env["shm"], run.model_id)
    gsm = next(t for t in manifest["trials"] if "tiny_gsm8k" in t["trial_id"])
    with pytest.raises(InputError, match="no outputs"):
        run_metric(env["lake"], run, gsm["trial_id"], env["data"])
    run_inference(env["lake"], run, gsm["trial_id"], env["shm"], env["data"])
    key = run.outputs_key(gsm["trial_id"])
    lines = env["lake"].read_bytes(key).decode().splitlines()
    env["lake"].write_bytes(key, ("\n".join(lines[:-1]) + "\n").encode())  # one answer lost
    with pytest.raises(InputError, match="5 outputs for 6 samples"):
        run_metric(env["lake"], run, gsm["trial_id"], env["data"])


def test_a_malformed_dataset_names_file_and_line(env):
    path = env["data"] / "tiny_gsm8k.jsonl"
    lines = path.read_text().splitlines()
    lines[2] = '{"id": "x", "question": "q"}'
    path.write_text("\n".join(lines) + "\n")
    run, manifest = plan_tiny(env)
    preload_model(str(env["checkpoint"]), env["shm"], run.model_id)
    gsm = next(t for t in manifest["trials"] if "tiny_gsm8k" in t["trial_id"])
    with pytest.raises(InputError, match=r"tiny_gsm8k.jsonl:3: match sample lacks answer"):
        run_inference(env["lake"], run, gsm["trial_id"], env["shm"], env["data"])


# --- learned priors -----------------------------------------------------------------------------
def test_measured_times_are_folded_into_the_priors_once_and_change_the_next_plan(env):
    lake = env["lake"]
    run = EvalRun("m-1", "tiny_suite-x")
    suite = read_suite(TINY_SUITE)
    gsm = suite.by_name()["tiny_gsm8k"]
    measurement = {
        "trial_id": "t0",
        "dataset": "tiny_gsm8k",
        "n_samples": 6,
        "infer_s": 6 * 2.0,  # 2 s per sample measured, the suite's prior says 12 s
        "metric_s": 6 * 0.01,
        "model_size": "7B",
        "gpus": 1,
        "load_s": 1.0,
        "model_bytes": 4e9,
    }
    result = fold_into_priors(lake, run, [measurement], suite)
    assert result["folded"]
    priors, folded = load_priors(lake, Hardware())
    learned = priors.learned["tiny_gsm8k"]
    assert learned["gpu_s_per_sample_ref"] == pytest.approx(0.5 * gsm.gpu_s_per_sample + 0.5 * 2.0)
    assert learned["cpu_s_per_sample"] == pytest.approx(0.5 * 0.002 + 0.5 * 0.01)
    assert priors.hardware.shm_read_gbytes_s == pytest.approx(0.5 * 10.0 + 0.5 * 4.0)
    assert folded == ["m-1/tiny_suite-x"]

    assert not fold_into_priors(lake, run, [measurement], suite)["folded"]  # a re-run folds nothing
    assert lake.read_json(PRIORS_KEY)["datasets"]["tiny_gsm8k"] == learned

    # The next evaluation is planned with the learned prior: GSM8K is expected at 7 s per sample.
    _, manifest = plan_tiny(env)
    plan = json.loads(lake.read_bytes(manifest["plan"].removeprefix(lake.uri + "/")))
    (gsm_slice,) = [s for t in plan["trials"] for s in t["slices"] if s["dataset"] == "tiny_gsm8k"]
    assert gsm_slice["expected_infer_s"] == pytest.approx(6 * 7.0)


def test_a_rerun_reuses_the_stored_plan(env):
    _, first = plan_tiny(env, nodes=2)
    _, second = plan_tiny(env, nodes=3)
    assert second["plan_reused"] and second["trials"] == first["trials"]
    assert any("re-using" in w for w in second["warnings"])


def test_warm_start_the_trial_sets_up_before_it_waits_for_the_gpu(env):
    """While another trial holds the node's GPU, this one has already read its samples and prompts."""
    import time

    run, manifest = plan_tiny(env)
    preload_model(str(env["checkpoint"]), env["shm"], run.model_id)
    gsm = next(t for t in manifest["trials"] if "tiny_gsm8k" in t["trial_id"])
    plan = json.loads(env["lake"].read_bytes(run.plan_key))
    slots = plan["gpus_per_node"] // plan["gpus_per_trial"]
    held = threading.Event()

    def hold_every_gpu_of_node_0() -> None:
        with contextlib.ExitStack() as stack:
            for _ in range(slots):
                stack.enter_context(gpu_lease(env["shm"], node=0, slots=slots))
            held.set()
            time.sleep(1.5)

    holder = threading.Thread(target=hold_every_gpu_of_node_0)
    holder.start()
    held.wait(10)
    run_inference(env["lake"], run, gsm["trial_id"], env["shm"], env["data"], lease_timeout_s=30)
    holder.join()
    timings = env["lake"].read_json(run.timings_key(gsm["trial_id"]))
    assert timings["lease_wait_s"] > 0.5  # it waited for the GPU…
    assert timings["setup_s"] > 0  # …after its set-up, which needed none
    assert timings["setup_s"] + timings["lease_wait_s"] < 1.5 + 1.0  # and got it once it was released
